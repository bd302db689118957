"""CPU fidelity of emulated devices: does every rank compute at its device core's speed?

A pure CPU-bound kernel (a fixed loop, no communication) runs in every rank of
k devices with c ranks each, started by the MPI's own launcher as any job is
(so each rank lands on its own device core). Per (k, c): the time per unit of
work over the single-rank time (1 device, 1 rank) measured in the same run,
and the spread of the repetitions. On a faithful emulation every ratio is 1:
a device core is as fast with its neighbours busy as alone, and D changes
nothing once times are divided by it. Repetitions are interleaved over the
configurations, so a slow spell of a shared host touches them all alike.
"""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass

from shoal import proc
from shoal.errors import ShoalError

# Loop steps per rank: about 0.1 s of a host core.
STEPS = 400_000
# Each rank: a fixed number of steps of a linear congruential generator, timed around the loop.
KERNEL = r"""
import sys, time
n = int(sys.argv[1])
x = 1
t, c = time.perf_counter(), time.process_time()
for _ in range(n):
    x = (x * 1103515245 + 12345) & 0xFFFFFFFF
wall, cpu = time.perf_counter() - t, time.process_time() - c
sys.stdout.write(f"<{wall!r} {cpu!r} {x}>\n")  # one write: ranks' lines may interleave
"""


@dataclass(frozen=True)
class Point:
    devices: int
    ranks_per_device: int
    times_s: tuple[float, ...]      # per repetition: the slowest rank's loop time, undilated
    # per repetition: the least share of a host CPU a rank got (CPU s / wall s). Over the
    # core's budget it is what the emulation delivered, whatever the host's speed per CPU
    # second did meanwhile (on a shared virtual machine that varies by tens of per cent).
    shares: tuple[float, ...] = ()

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def spread(self) -> float:
        return (max(self.times_s) - min(self.times_s)) / self.median_s


def kernel_time(where, mpi, devices: int, ranks_per_device: int, steps: int) -> tuple[float, float]:
    """One launch: the slowest rank's loop time as the devices saw it (divided by D), and the
    least share of a host CPU a rank got."""
    job = where.job(mpi, devices, [sys.executable, "-c", KERNEL, str(steps)],
                    ranks_per_node=ranks_per_device)
    argv, env_add = job.command()
    result = proc.run(argv, env=job.popen_env(), show_env=env_add, leaves=job.leaves,
                      timeout=120 * where.dilation, what="the CPU kernel")
    found = [(float(w), float(c)) for w, c in re.findall(r"<([0-9.e+-]+) ([0-9.e+-]+) \d+>",
                                                          result.stdout)]
    if not result.ok or len(found) != devices * ranks_per_device:
        raise ShoalError(f"the CPU kernel failed on {devices} device(s) x {ranks_per_device}: "
                         f"{result.tail() or 'no output'}")
    return max(w for w, _ in found) / where.dilation, min(c / w for w, c in found)


def measure(where, mpi, configs: list[tuple[int, int]], reps: int, steps: int) -> dict:
    """Every (devices, ranks per device) in ``configs`` and the single rank, ``reps`` rounds."""
    order = [(1, 1)] + [c for c in configs if c != (1, 1)]
    runs: dict[tuple[int, int], list[tuple[float, float]]] = {c: [] for c in order}
    for _ in range(reps):
        for config in order:
            runs[config].append(kernel_time(where, mpi, *config, steps))
    points = {c: Point(c[0], c[1], tuple(t for t, _ in r), tuple(s for _, s in r))
              for c, r in runs.items()}
    single = points[(1, 1)].median_s
    budget = core_budget(where)
    return {"dilation": where.dilation, "single_rank_s": single, "core_budget_cpus": budget,
            "points": [{"devices": p.devices, "ranks_per_device": p.ranks_per_device,
                        "median_s": p.median_s, "ratio": p.median_s / single, "spread": p.spread,
                        "times_s": list(p.times_s),
                        "delivered": (statistics.median(p.shares) / budget) if budget else None}
                       for p in points.values()]}


def core_budget(where) -> float | None:
    """The budget of the first device's cores (CPUs), as the cluster records it."""
    nodes = where.emulated.record.get("nodes", {}) if where.emulated else {}
    first = next(iter(nodes.values()), {})
    return first.get("cpu_fraction")
