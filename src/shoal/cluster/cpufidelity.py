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
t = time.perf_counter()
for _ in range(n):
    x = (x * 1103515245 + 12345) & 0xFFFFFFFF
sys.stdout.write(f"<{time.perf_counter() - t!r} {x}>\n")  # one write: ranks' lines may interleave
"""


@dataclass(frozen=True)
class Point:
    devices: int
    ranks_per_device: int
    times_s: tuple[float, ...]      # per repetition: the slowest rank's loop time, undilated

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def spread(self) -> float:
        return (max(self.times_s) - min(self.times_s)) / self.median_s


def kernel_time(where, mpi, devices: int, ranks_per_device: int, steps: int) -> float:
    """One launch: the slowest rank's loop time as the devices saw it (divided by D)."""
    job = where.job(mpi, devices, [sys.executable, "-c", KERNEL, str(steps)],
                    ranks_per_node=ranks_per_device)
    argv, env_add = job.command()
    result = proc.run(argv, env=job.popen_env(), show_env=env_add,
                      timeout=120 * where.dilation, what="the CPU kernel")
    times = [float(t) for t in re.findall(r"<([0-9.e+-]+) \d+>", result.stdout)]
    if not result.ok or len(times) != devices * ranks_per_device:
        raise ShoalError(f"the CPU kernel failed on {devices} device(s) x {ranks_per_device}: "
                         f"{result.tail() or 'no output'}")
    return max(times) / where.dilation


def measure(where, mpi, configs: list[tuple[int, int]], reps: int, steps: int) -> dict:
    """Every (devices, ranks per device) in ``configs`` and the single rank, ``reps`` rounds."""
    order = [(1, 1)] + [c for c in configs if c != (1, 1)]
    times: dict[tuple[int, int], list[float]] = {c: [] for c in order}
    for _ in range(reps):
        for config in order:
            times[config].append(kernel_time(where, mpi, *config, steps))
    points = {c: Point(c[0], c[1], tuple(t)) for c, t in times.items()}
    single = points[(1, 1)].median_s
    return {"dilation": where.dilation, "single_rank_s": single,
            "points": [{"devices": p.devices, "ranks_per_device": p.ranks_per_device,
                        "median_s": p.median_s, "ratio": p.median_s / single, "spread": p.spread,
                        "times_s": list(p.times_s)} for p in points.values()]}
