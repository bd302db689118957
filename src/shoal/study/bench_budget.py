"""Which IMB points of a study fit its budget on a shared plant, by the link model and the
fixed cost of a point measured by node count.

A call's time on one shared medium (seed 002's 27 Mbit/s DOCSIS upstream) is
``shoal.bench.plant_calls``'s model. A point costs a warm-up and one counted
call, each D times longer on the emulated plant, and a fixed cost of host time that grows
with the number of boxes (the harness's own collectives and its timing negotiation on slow
boxes over the request-grant plant), which on the plant is most of a point below 128 KiB.
The costliest points are planned as not run, one at a time, until the rest fit the budget;
the points of tests the study keeps (``keep``) are never dropped. Each point not run keeps
its reason ("not run: ..."), which the run's ``skipped`` table and the report print, so
nothing is left out silently.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.bench.plant_calls import (CALLS_PER_POINT, call_s, hung_after_s, longest_call_s,
                                     point_fixed_s, slowed_call_s)
from shoal.profiles import LinkType

def fixed_s(ranks: int, dilation: float) -> float:
    """Host seconds of a point beside its calls, at ``ranks`` (one per box) and ``dilation``."""
    return point_fixed_s(ranks) * dilation


def point_s(test: str, ranks: int, size_B: int, link: LinkType, dilation: float) -> float:
    """Host seconds one point costs at ``dilation``: its calls, slowed as measured, and its
    fixed cost."""
    return CALLS_PER_POINT * dilation * slowed_call_s(test, ranks, size_B, link) + fixed_s(ranks, dilation)


def kept(test: str, size_B: int, keep: frozenset[str]) -> bool:
    """Whether ``keep`` (test names, or ``test@size_B``) holds the point."""
    return test in keep or f"{test}@{size_B}" in keep


@dataclass(frozen=True)
class Budget:
    not_run: dict[tuple[str, int, int], str]  # (test, size_B, ranks) -> why
    planned_s: float  # host seconds the points that run are planned to take
    dropped_s: float  # host seconds the points not run would have taken
    longest_call_s: float  # the longest modelled call of a point that runs (device time)
    planned: dict[int, int]  # ranks -> points that run

    @property
    def point_timeout_s(self) -> float:
        """Device seconds a point may take before it counts as hung (``hung_after_s``)."""
        return hung_after_s(self.longest_call_s)


def plan(points: list[tuple[str, int, int]], link: LinkType, dilation: float, budget_s: float,
         keep: frozenset[str] = frozenset()) -> Budget:
    """Points (test, size_B, ranks) within ``budget_s`` host seconds at ``dilation``, never
    dropping those ``keep`` holds (they may then take more than the budget)."""
    call = {pt: call_s(pt[0], pt[2], pt[1], link) for pt in points}  # device seconds
    cost = {pt: point_s(pt[0], pt[2], pt[1], link, dilation) for pt in points}
    total = sum(cost.values())
    not_run: dict[tuple[str, int, int], str] = {}
    for pt in sorted(points, key=lambda q: -cost[q]):
        if total <= budget_s:
            break
        if kept(pt[0], pt[1], keep):
            continue
        total -= cost[pt]
        one = call[pt]
        not_run[pt] = (f"not run: it would take {cost[pt]:.3g} s of host time at D = {dilation:g} "
                       f"(one call {one:.3g} s on the {link.name} plant by the model, "
                       f"{fixed_s(pt[2], dilation):.3g} s fixed at {pt[2]} ranks), over the study's "
                       f"{budget_s:.0f} s for IMB on it")
    running = [pt for pt in points if pt not in not_run]
    longest = longest_call_s(running, link)
    planned: dict[int, int] = {}
    for pt in running:
        planned[pt[2]] = planned.get(pt[2], 0) + 1
    return Budget(not_run, total, sum(cost[pt] for pt in not_run), longest, planned)
