"""Two runs set side by side: what differs in their stacks, and which results moved.

Seed 001's experiment (and seed 000 §5.3-5.4) is "the same benchmark on two operating
systems, compared". A difference between two runs means something only when both are
named: what changed underneath (kernel, its configuration, governor, MPI build, compiler,
how busy the rest of the system was) and which points changed beyond the noise of their
own measurement (the 95% confidence intervals of the medians no longer overlap).

A run's confidence intervals hold only that run's own noise; the same stack measured again
moves further (another placement, another moment of the host). Given repeats (either
stack measured again), each side is a set of runs, and a point moved only where every run
of one side is slower than every run of the other: for runs of one stack, as likely as
2 / C(n_a + n_b, n_a) (10 % with 3 runs a side, 3 % with 4), whatever their distribution.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from shoal.errors import ShoalError
from shoal.runs.store import Run

# The rest of the system's activity is measured, so it differs a little between any two
# runs; it is a difference of stacks when it is large both absolutely and relatively.
# Background CPU: a quarter of a CPU and twice as much (a daemon that wakes now and then
# stays under it; a busy distribution's desktop or an injected load goes over it).
BACKGROUND_CPUS_APART = 0.25
FORKS_PER_S_APART = 10.0
RATIO_APART = 2.0
# Facts that differ between any two runs and say nothing about the stack.
NOT_STACK = {"uptime_s", "forks_since_boot", "forks_per_s_since_boot", "cpufreq"}
KEY = ["config", "nodes", "ranks", "test", "size_B"]


@dataclass(frozen=True)
class Difference:
    fact: str
    a: Any
    b: Any


@dataclass(frozen=True)
class Moved:
    test: str
    config: str
    nodes: int
    ranks: int
    size_B: int
    time_a_s: float
    time_b_s: float
    # With repeats: the medians of every run of each side at this point (the times above
    # are their medians).
    runs_a_s: tuple[float, ...] = ()
    runs_b_s: tuple[float, ...] = ()

    @property
    def ratio(self) -> float:
        """B's time over A's: above 1, B is slower."""
        return self.time_b_s / self.time_a_s


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    differences: list[Difference]
    moved: list[Moved]
    points: int   # points measured in both runs
    # Repeats given (their paths), and the points whose CIs part in A and B but whose runs'
    # medians overlap between the sides (so not counted as moved).
    repeats: list[str] = field(default_factory=list)
    within_spread: list[Moved] = field(default_factory=list)
    runs: tuple[int, int] = (1, 1)

    @property
    def chance(self) -> float | None:
        """How likely one point of one stack is counted as moved (with repeats; else None)."""
        n_a, n_b = self.runs
        return 2 / math.comb(n_a + n_b, n_a) if self.repeats else None

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "points_compared": self.points, "repeats": self.repeats,
                "runs": list(self.runs), "moved_by_chance": self.chance,
                "stack_differences": [asdict(d) for d in self.differences],
                "moved": [{**asdict(m), "ratio": m.ratio} for m in self.moved],
                "within_run_to_run_spread": [{**asdict(m), "ratio": m.ratio} for m in self.within_spread]}


def compare(a: Run, b: Run, repeats_a: tuple[Run, ...] = (), repeats_b: tuple[Run, ...] = ()) -> Comparison:
    """``repeats_a``/``repeats_b``: the same stack as A's (B's) measured again."""
    results_a, results_b = _results(a), _results(b)
    joined = _join(a, b, results_a, results_b)
    runs_a = _medians(a, results_a, repeats_a)
    runs_b = _medians(b, results_b, repeats_b)
    moved, within = [], []
    for row in joined.itertuples():
        if not (row.time_ci_high_s_a < row.time_ci_low_s_b or row.time_ci_high_s_b < row.time_ci_low_s_a):
            continue
        point = (int(row.nodes), int(row.ranks), row.test, int(row.size_B))
        if not (repeats_a or repeats_b):
            moved.append(Moved(row.test, row.config, *point[:2], point[3], float(row.time_median_s_a),
                               float(row.time_median_s_b)))
            continue
        side_a = (float(row.time_median_s_a), *runs_a.get(point, ()))
        side_b = (float(row.time_median_s_b), *runs_b.get(point, ()))
        found = Moved(row.test, row.config, *point[:2], point[3], float(pd.Series(side_a).median()),
                      float(pd.Series(side_b).median()), side_a, side_b)
        apart = max(side_a) < min(side_b) or max(side_b) < min(side_a)
        (moved if apart else within).append(found)
    return Comparison(str(a.path), str(b.path), stack_differences(a.manifest, b.manifest),
                      moved, len(joined), [str(r.path) for r in (*repeats_a, *repeats_b)], within,
                      (1 + len(repeats_a), 1 + len(repeats_b)))


def _medians(run: Run, results: pd.DataFrame, repeats: tuple[Run, ...]) -> dict[tuple, tuple[float, ...]]:
    """Per point (nodes, ranks, test, size), each repeat's median where it measured it."""
    found: dict[tuple, tuple[float, ...]] = {}
    for repeat in repeats:
        for row in _join(run, repeat, results, _results(repeat)).itertuples():
            point = (int(row.nodes), int(row.ranks), row.test, int(row.size_B))
            found[point] = (*found.get(point, ()), float(row.time_median_s_b))
    return found


def _results(run: Run) -> pd.DataFrame:
    kind = run.manifest.get("kind")
    if kind not in ("bench", "study"):
        raise ShoalError(f"{run.path} is a '{kind}' run; shoal compare takes bench or study runs "
                         "(their points carry confidence intervals): give two of those")
    frame = run.read("results")
    if frame.empty:
        raise ShoalError(f"{run.path} holds no measured point yet; give a run with measured points")
    return frame


def _join(a: Run, b: Run, ra: pd.DataFrame, rb: pd.DataFrame) -> pd.DataFrame:
    tests_a, tests_b = set(ra["test"]), set(rb["test"])
    if not tests_a & tests_b:
        raise ShoalError(f"{a.path.name} measured {_names(tests_a)} and {b.path.name} measured "
                         f"{_names(tests_b)}: no test in common; give two runs of the same tests")
    key = KEY
    if not set(ra["config"]) & set(rb["config"]) and ra["config"].nunique() == rb["config"].nunique() == 1:
        key = KEY[1:]   # one configuration each, named apart (two hosts): match by the rest
    columns = [*KEY, "time_median_s", "time_ci_low_s", "time_ci_high_s"]
    joined = ra[columns].merge(rb[columns], on=key, suffixes=("_a", "_b"))
    if joined.empty:
        raise ShoalError(f"{a.path.name} and {b.path.name} share no point (the same test, "
                         "configuration, node and rank count, and size); give two runs of the same points")
    if "config" not in joined:
        joined["config"] = joined["config_a"]
    return joined.sort_values(["test", "config", "nodes", "ranks", "size_B"])


def _names(tests: set[str]) -> str:
    names = sorted(tests)
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")


def stack_differences(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    """What differs between two manifests' stacks: every recorded fact that is not equal,
    and the measured activity during the runs where it is far apart."""
    found: list[Difference] = []
    stack_a, stack_b = a.get("stack") or {}, b.get("stack") or {}
    for name in sorted(set(stack_a) | set(stack_b)):
        if name not in NOT_STACK:
            _differ(found, name, stack_a.get(name), stack_b.get(name))
    _differ(found, "cpufreq limits", _limits(stack_a), _limits(stack_b))
    for name in ("cpu_model", "cpus", "memory_B"):
        _differ(found, f"host {name}", (a.get("host") or {}).get(name), (b.get("host") or {}).get(name))
    _differ(found, "transport_env", a.get("transport_env"), b.get("transport_env"))
    _differ(found, "devices' OS noise", _device_noise(a), _device_noise(b))
    _differ(found, "node", _node_stacks(a), _node_stacks(b))
    during_a, during_b = a.get("stack_during") or {}, b.get("stack_during") or {}
    for name, floor in (("background_cpus", BACKGROUND_CPUS_APART), ("forks_per_s", FORKS_PER_S_APART)):
        x, y = during_a.get(name), during_b.get(name)
        if x is not None and y is not None and _apart(x, y, floor):
            found.append(Difference(f"during the run: {name}", round(x, 3), round(y, 3)))
    # A background program busy in one run and not (or far less) in the other: named.
    busy_a, busy_b = _busy_commands(during_a), _busy_commands(during_b)
    for comm in sorted(set(busy_a) | set(busy_b)):
        x, y = busy_a.get(comm, 0.0), busy_b.get(comm, 0.0)
        if _apart(x, y, BACKGROUND_CPUS_APART):
            found.append(Difference(f"during the run: background CPUs of '{comm}'", round(x, 3), round(y, 3)))
    return found


def _device_noise(manifest: dict[str, Any]) -> dict[str, Any]:
    """Per device profile, the OS noise its emulated devices carried ("none" without)."""
    found: dict[str, Any] = {}
    for cluster in (manifest.get("clusters") or {}).values():
        for node in cluster.get("nodes") or ():
            noise = node.get("os_noise")
            found[node["profile"]] = noise["name"] if noise else "none"
    return found


def _node_stacks(manifest: dict[str, Any]) -> dict[str, Any]:
    """The stacks a real cluster's hosts reported (ssh clusters), by node."""
    found: dict[str, Any] = {}
    for cluster in (manifest.get("clusters") or {}).values():
        stacks = cluster.get("node_stacks")
        if isinstance(stacks, dict):
            for name, stack in stacks.items():
                found[name] = {k: v for k, v in stack.items() if k not in NOT_STACK}
    return found


def _busy_commands(during: dict[str, Any]) -> dict[str, float]:
    """CPUs each of the busiest background commands kept busy on average during a run."""
    wall = during.get("duration_s") or 0
    return {p["comm"]: p["cpu_s"] / wall for p in during.get("background_top") or () if wall > 0}


def _differ(found: list[Difference], name: str, x: Any, y: Any) -> None:
    """Equal facts add nothing; two dicts are compared key by key (kernel options, builds)."""
    if isinstance(x, dict) and isinstance(y, dict):
        for key in sorted(set(x) | set(y)):
            _differ(found, f"{name}.{key}", x.get(key), y.get(key))
    elif x != y:
        found.append(Difference(name, x, y))


def _limits(stack: dict[str, Any]) -> list[tuple] | None:
    """Each CPU's min and max frequency (the current one changes from moment to moment)."""
    cpus = stack.get("cpufreq")
    return [(c.get("cpu"), c.get("min_Hz"), c.get("max_Hz")) for c in cpus] if cpus else None


def _apart(x: float, y: float, floor: float) -> bool:
    low, high = sorted((x, y))
    return high - low >= floor and high >= RATIO_APART * low


def write_figures(a: Run, b: Run, out: Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """The figure pair: each common test of both runs overlaid, as ``shoal plot A B`` draws it."""
    from shoal.report.figures import plot_runs

    return plot_runs([a, b], out, formats)
