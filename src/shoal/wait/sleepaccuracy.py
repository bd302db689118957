"""Experiment C of seed 003: how long ``clock_nanosleep`` really sleeps, per place.

The native program ``shoal-sleepsweep`` (shoal/native/sleepsweep) requests sleeps
from 0 to 1 ms in fixed steps, several times each, and reads CLOCK_MONOTONIC around
every call, as the seed did (500 ns steps, 10 measures each; ``--quick``: 10 us
steps, 5 each), one pass over the range per repeat, each pass coarse to fine. A
place that sleeps far longer than asked stops at the budget (three times the time the
sweep takes when every sleep is 100 us late, at least 5 s) with its measures still
spread over the range; the summary says how many measures of how many planned. Four conditions: idle or loaded (one spinning thread per core of the
place, in the same process), and the kernel's default timer slack or
``PR_SET_TIMERSLACK`` 1 ns. A place is this host, or one emulated device of each
profile (the sweep runs inside the device's namespace and CPU cgroup, at its quota,
so the spinners share the device's cores as they would on the board).

Per place and condition the summary holds: the offset at zero (what a sleep of 0
costs), the slope and intercept of measured against requested (through each step's
median, so a shared machine's rare stalls do not tilt it), the lateness
(measured - requested) p50 and p99 over the sweep, and the lateness at the longest
sleep (1 ms), which is what cyclictest measures at its default 1 ms interval; the
same place's cyclictest median and p99 come beside it (shoal.wait.cyclictest); and the
sleeper's CPU per sleep (``wake_cpu_s``, host seconds), the price of one wake-up there.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from shoal import proc
from shoal.errors import ShoalError


@dataclass(frozen=True)
class Condition:
    """Idle or loaded, at the kernel's default timer slack or at 1 ns."""

    load: str      # "idle" | "loaded"
    slack: str     # "default" | "1ns"

    @property
    def slack_ns(self) -> int:
        return 1 if self.slack == "1ns" else 0   # 0: the program keeps the kernel's default


CONDITIONS = (Condition("idle", "default"), Condition("idle", "1ns"),
              Condition("loaded", "default"), Condition("loaded", "1ns"))


@dataclass(frozen=True)
class Sweep:
    """Requested sleeps 0, step, ... longest (s), ``repeats`` measures each."""

    longest_s: float
    step_s: float
    repeats: int

    def argv(self, exe: str, condition: Condition, spinners: int) -> list[str]:
        return [exe, "--max", str(round(self.longest_s * 1e9)), "--step", str(round(self.step_s * 1e9)),
                "--repeats", str(self.repeats), "--slack", str(condition.slack_ns),
                "--spinners", str(spinners if condition.load == "loaded" else 0),
                "--budget-ms", str(round(self.budget_s * 1000))]

    @property
    def budget_s(self) -> float:
        """No sleep starts after this (s)."""
        return max(5.0, 3 * self.expected_s())

    @property
    def measures(self) -> int:
        return (round(self.longest_s / self.step_s) + 1) * self.repeats

    def expected_s(self, late_s: float = 100e-6) -> float:
        """Wall time of one condition if every sleep ends ``late_s`` late."""
        return self.measures * (self.longest_s / 2 + late_s)


SEED = Sweep(1e-3, 500e-9, 10)     # seed 003 Fig. 4: 2001 steps x 10 = 20010 measures
QUICK = Sweep(1e-3, 10e-6, 5)      # 101 steps x 5


@dataclass(frozen=True)
class Place:
    """Where a sweep runs: this host, or an emulated device (its cores, how to run there)."""

    device: str                                    # "host" or the device's node name
    profile: str                                   # "host" or the device profile's name
    cores: int                                     # spinning threads when loaded
    run: Callable[[list[str], float], proc.Result]   # (argv, timeout s) -> finished command
    # An emulated device's cores get 1/dilation of their profile's real-time share of a host
    # core; the sweep's times stay host seconds.
    dilation: float = 1.0


def host_place() -> Place:
    cores = len(os.sched_getaffinity(0))
    return Place("host", "host", cores, lambda argv, timeout: proc.run(argv, timeout=timeout))


def one_of_each_profile(inventory) -> list[str]:
    """The first device of each profile: the devices a sweep runs in."""
    first: dict[str, str] = {}
    for node in inventory.nodes:
        first.setdefault(node.profile.name, node.name)
    return list(first.values())


def device_places(cluster) -> list[Place]:
    """The first device of each profile in an emulated cluster (an EmulatedCluster)."""
    nodes = {node.name: node for node in cluster.inventory.nodes}
    return [Place(name, nodes[name].profile.name, nodes[name].profile.cores,
                  lambda argv, timeout, name=name: cluster.run_on(name, argv, timeout=timeout),
                  cluster.dilation)
            for name in one_of_each_profile(cluster.inventory)]


def parse(stdout: str) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """(facts, requested s, measured s) from shoal-sleepsweep's output."""
    lines = stdout.splitlines()
    if not lines or not lines[0].startswith("{"):
        raise ShoalError("shoal-sleepsweep printed no result")
    facts = json.loads(lines[0])
    pairs = np.loadtxt(lines[1:], dtype=np.int64, ndmin=2) if len(lines) > 1 else np.empty((0, 2))
    if len(pairs) != facts["measures"] or not len(pairs):
        raise ShoalError(f"shoal-sleepsweep printed {len(pairs)} measures of {facts['measures']}")
    return facts, pairs[:, 0] * 1e-9, pairs[:, 1] * 1e-9


def wake_cpu_s(facts: dict[str, Any]) -> float | None:
    """The sleeper's CPU per sleep (host s): the system call, the timer and the wake-up, what
    every wake-up of a waiting rank costs here. None where the program could not read it."""
    cpu, measures = facts.get("cpu_s", -1), facts.get("measures", 0)
    return cpu / measures if cpu >= 0 and measures else None


def summarize(requested: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Offset at zero, slope and intercept of measured against requested (fitted to each
    step's median), lateness quantiles (s)."""
    late = measured - requested
    at_zero = late[requested == 0]
    longest = requested.max()
    at_longest = late[requested == longest]
    # The fit goes through each step's median: a shared machine's rare long stalls would
    # otherwise tilt it (one 20 ms stall among 5 measures at 1 ms doubles a least-squares slope).
    steps = np.unique(requested)
    medians = np.array([np.median(measured[requested == r]) for r in steps])
    slope, intercept = np.polyfit(steps, medians, 1) if len(steps) > 1 else (np.nan, np.nan)
    return {
        "measures": int(len(late)),
        "offset_zero_s": float(np.median(at_zero)),
        "offset_zero_p99_s": float(np.quantile(at_zero, 0.99)),
        "slope": float(slope), "intercept_s": float(intercept),
        "lateness_p50_s": float(np.median(late)), "lateness_p99_s": float(np.quantile(late, 0.99)),
        "longest_s": float(longest),
        "lateness_longest_p50_s": float(np.median(at_longest)),
        "lateness_longest_p99_s": float(np.quantile(at_longest, 0.99)),
    }


def measure(place: Place, sweep: Sweep, condition: Condition, exe: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """Run one condition's sweep at a place: (program facts, requested s, measured s)."""
    argv = sweep.argv(exe, condition, place.cores)
    # The budget bounds the sleeps started; the last may end late at a small CPU quota.
    timeout = 60 + sweep.budget_s
    try:
        done = place.run(argv, timeout)
    except proc.CommandTimeout as exc:
        raise ShoalError(f"the sleep sweep on {place.device} ({condition.load}, slack "
                         f"{condition.slack}) did not finish in {timeout:.0f} s") from exc
    if not done.ok:
        raise ShoalError(f"the sleep sweep on {place.device} failed: {done.error_line('shoal-sleepsweep')}")
    return parse(done.stdout)


def beside_spinners(exe: str, spinners: int, argv: list[str]) -> list[str]:
    """``argv`` run while ``spinners`` threads spin beside it in the same place; they stop
    when it ends, and its exit status is kept."""
    line = " ".join(shlex.quote(a) for a in argv)
    # The spinners' own bound (a day) only matters if the shell itself is killed.
    return ["/bin/sh", "-c", f"{shlex.quote(exe)} --spinners {spinners} --spin-ms 86400000 & s=$!; "
                             f"{line}; rc=$?; kill $s; wait $s 2>/dev/null; exit $rc"]
