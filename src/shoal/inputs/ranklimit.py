"""How many ranks a host can start, checked before anything starts.

Three limits apply to the ranks that run on one host (this machine, or
each emulated device, whose ranks all run on this machine too):

- slots: the host's CPUs (a device's cores) times the ``--oversubscribe``
  factor (default 4: waiting ranks that sleep share a core well, and the
  test suite runs 4 ranks on 2 cores; more than that measures the
  scheduler, not MPI);
- memory: each rank's base footprint plus its message buffers must fit in
  this machine's available memory (``MemAvailable``);
- a device's own memory: where its profile gives one (``memory_B``; a set-top
  box has 256 MiB), the ranks on one device must fit in it, as on the real
  board (an emulated device is held to it by a memory cgroup);
- processes: each rank is several tasks (MPI progress threads) and all of
  them count against ``RLIMIT_NPROC`` and ``kernel.threads-max``.

The first limit a request exceeds is named in one line, with what to do.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from shoal.errors import ShoalError
from shoal.hostfacts import meminfo_bytes

DEFAULT_OVERSUBSCRIBE = 4
# What one MPI rank costs beyond its message buffers (ranks of the two bundled
# MPIs measure 10-40 MB resident; the larger figure keeps the check on the safe side).
RANK_BASE_B = 40 * 2**20
# Tasks per rank: the rank and the progress threads its MPI starts.
TASKS_PER_RANK = 4


@dataclass(frozen=True)
class HostLimits:
    cpus: int
    available_B: int | None
    tasks_left: int | None


def this_host() -> HostLimits:
    return HostLimits(len(os.sched_getaffinity(0)), meminfo_bytes("MemAvailable"), _tasks_left())


def check(ranks: int, buffer_B: int = 0, *, slots: int | None = None, where: str = "this machine",
          option: str = "--ranks", oversubscribe: float = DEFAULT_OVERSUBSCRIBE,
          host_ranks: int | None = None, host: HostLimits | None = None,
          smaller: str = "smaller --sizes") -> None:
    """Refuse ``ranks`` on one host (of ``slots`` cores; default: this machine's CPUs).

    ``buffer_B`` is what each rank allocates for messages; ``host_ranks``
    the ranks all hosts together start on this machine (emulated devices).
    """
    host = host or this_host()
    slots = slots or host.cpus
    allowed = int(slots * oversubscribe)
    if ranks > allowed:
        raise ShoalError(
            f"{option} {ranks}: {where} has {slots} CPU(s); at most {allowed} ranks run on it with "
            f"--oversubscribe {oversubscribe:g}; give fewer ranks (or a larger --oversubscribe)")
    total = host_ranks or ranks
    need = total * (RANK_BASE_B + buffer_B)
    if host.available_B is not None and need > host.available_B:
        raise ShoalError(
            f"{option} {ranks}: {total} ranks need about {need / 2**30:.1f} GiB of memory and this "
            f"machine has {host.available_B / 2**30:.1f} GiB available; give fewer ranks or "
            f"{smaller}")
    if host.tasks_left is not None and total * TASKS_PER_RANK > host.tasks_left:
        raise ShoalError(
            f"{option} {ranks}: {total} ranks need about {total * TASKS_PER_RANK} processes and "
            f"threads, and this user may start only {host.tasks_left} more (ulimit -u, "
            "kernel.threads-max); give fewer ranks")


def check_device(ranks: int, buffer_B: float, memory_B: float, *, where: str,
                 option: str = "--ranks-per-node", smaller: str = "smaller --sizes") -> None:
    """Refuse ``ranks`` ranks of ``buffer_B`` each on a device of ``memory_B`` bytes (its profile's)."""
    need = ranks * (RANK_BASE_B + buffer_B)
    if need > memory_B:
        who = "1 rank needs" if ranks == 1 else f"{ranks} ranks need"
        remedy = f"give {smaller}" if ranks == 1 else f"give fewer ranks per node or {smaller}"
        raise ShoalError(
            f"{option} {ranks}: {who} about {need / 2**20:.0f} MiB of memory "
            f"({RANK_BASE_B / 2**20:.0f} MiB of MPI and {buffer_B / 2**20:.0f} MiB of data each) "
            f"and {where} has {memory_B / 2**20:.0f} MiB; {remedy}")


def _tasks_left() -> int | None:
    """Tasks this user may still start: the smaller of RLIMIT_NPROC and threads-max, less those running."""
    limits = []
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY:
        limits.append(soft)
    try:
        limits.append(int(Path("/proc/sys/kernel/threads-max").read_text()))
    except (OSError, ValueError):
        pass
    if not limits:
        return None
    return max(0, min(limits) - _tasks_running())


def _tasks_running() -> int:
    """Threads of this user's processes (what RLIMIT_NPROC counts), from /proc."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return count
