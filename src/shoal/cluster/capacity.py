"""How many emulated devices this host can hold, checked before any of them is made.

Every device runs a launcher daemon and its ranks, each with its own memory and
threads; the launcher in the head keeps pipes and sockets to every daemon, and
the link forwarder one TAP descriptor per device. What one device costs was
measured with one rank per device (set-top boxes on docsis-27m, 8-128 devices):
with one MPI a rank took 13 MB resident with 2 threads and its launcher daemon
3 MB, with the other a rank and its daemon about 45 MB with 9 threads together
(docs/cluster.md names them). The figures below round those up, so that a
refusal names a limit the run would really reach.
"""

from __future__ import annotations

import resource

from shoal.errors import ShoalError

# Per device, one rank: resident memory, tasks (threads count against process limits),
# and the head launcher's descriptors for it (pipes and sockets to its daemon).
DEVICE_MEMORY_B = 64 * 2**20
DEVICE_TASKS = 16
DEVICE_FDS = 8
# Ports of the link forwarder (MAX_PORTS in shoal-linkemu), the head's among them.
FORWARDER_PORTS = 2048
# Memory left to everything else on the host.
MEMORY_SHARE = 0.8


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def limits(ranks_per_device: float = 1) -> list[tuple[str, int]]:
    """(what limits, how many devices it allows) for every limit this host has; a mixed job's
    ``ranks_per_device`` is its mean over the devices."""
    from shoal.inputs import ranklimit

    host = ranklimit.this_host()
    found = []
    memory = host.available_B
    if memory is not None:
        found.append((f"memory: {memory / 2**30:.1f} GiB available, about "
                      f"{DEVICE_MEMORY_B * ranks_per_device / 2**20:.0f} MiB per device",
                      int(memory * MEMORY_SHARE // (DEVICE_MEMORY_B * ranks_per_device))))
    tasks = DEVICE_TASKS * ranks_per_device
    if host.tasks_left is not None:
        found.append((f"processes: {host.tasks_left} more tasks for this user (ulimit -u, "
                      f"kernel.threads-max), about {tasks:.0f} per device", int(host.tasks_left // tasks)))
    pid_max = _read_int("/proc/sys/kernel/pid_max")
    if pid_max is not None:
        found.append((f"processes: kernel.pid_max {pid_max}, about {tasks:.0f} tasks per device",
                      int(pid_max * MEMORY_SHARE // tasks)))
    nofile, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if nofile != resource.RLIM_INFINITY:
        found.append((f"open files: ulimit -n {nofile}, about {DEVICE_FDS} per device in the launcher",
                      (nofile - 64) // DEVICE_FDS))
    found.append((f"the link forwarder's {FORWARDER_PORTS} ports (the head's among them)", FORWARDER_PORTS - 1))
    return found


def check(devices: int, ranks_per_device: float = 1) -> None:
    """Refuse more devices than the tightest limit of this host allows (one line naming it)."""
    for what, allowed in sorted(limits(ranks_per_device), key=lambda item: item[1]):
        if devices > allowed:
            raise ShoalError(f"{devices} emulated devices do not fit this host: at most {allowed} "
                             f"for {what}; emulate fewer devices")
        break
