"""Which benchmark points of a study fit its budget, by the link model and the fixed cost of a
point measured by node count.

A point costs a calibration call, which is also its warm-up once a call outlasts the point's
own budget, and one counted call (``CALLS_PER_POINT``), each D times longer on emulated
devices, and a fixed cost of host time. Its calls come from the link's model: on one shared
medium (seed 002's 27 Mbit/s DOCSIS upstream) ``shoal.bench.plant_calls``, where the fixed
cost grows with the number of boxes (the harness's own collectives and its timing
negotiation on slow boxes over the request-grant plant) and is most of a point below
128 KiB; on switched links (seed 000's 100 Mbit/s Ethernet) ``shoal.bench.switch_calls``
(both through ``shoal.bench.call_model``),
where a 32 MiB call is seconds. The costliest points are planned as not run, one at a time,
until the rest fit the budget; the points of tests the study keeps (``keep``) are never
dropped. Each point not run keeps its reason ("not run: ..."), which the run's ``skipped``
table and the report print, so nothing is left out silently.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.bench import plant_calls
from shoal.bench.call_model import slowed_call_s
from shoal.bench.plant_calls import CALLS_PER_POINT, hung_after_s
from shoal.profiles import LinkType

# Host seconds a point on switched links costs beside its calls, at D = 2: its set-up, the
# calibration's short trials, its own budget of measured repetitions and the harness's
# agreements (the seed000 preset's first run, docs/study.md: 0.3-0.6 s between a 32 MiB
# point's two calls and the next point, 0.1-0.2 s for a point below 32 MiB).
SWITCHED_FIXED_S = 0.25
SWITCHED_FIXED_AT_DILATION = 2.0

Point = tuple[str, int, int, int]  # (test, size_B, nodes, ranks)


def fixed_s(ranks: int, dilation: float, link: LinkType | None = None) -> float:
    """Host seconds of a point beside its calls, at ``ranks`` and ``dilation``: on a shared
    plant by the boxes (one rank each), on switched links the same at any count."""
    if link is not None and not link.shared:
        return SWITCHED_FIXED_S / SWITCHED_FIXED_AT_DILATION * dilation
    return plant_calls.point_fixed_s(ranks) * dilation


def point_s(test: str, ranks: int, size_B: int, link: LinkType, dilation: float,
            nodes: int | None = None) -> float:
    """Host seconds one point costs at ``dilation``: its calls, slowed as measured, and its
    fixed cost."""
    return (CALLS_PER_POINT * dilation * slowed_call_s(test, ranks, size_B, link, nodes)
            + fixed_s(ranks, dilation, link))


def kept(test: str, size_B: int, keep: frozenset[str]) -> bool:
    """Whether ``keep`` (test names, or ``test@size_B``) holds the point."""
    return test in keep or f"{test}@{size_B}" in keep


@dataclass(frozen=True)
class Budget:
    not_run: dict[Point, str]  # (test, size_B, nodes, ranks) -> why
    planned_s: float  # host seconds the points that run are planned to take
    dropped_s: float  # host seconds the points not run would have taken
    longest_call_s: float  # the longest modelled call of a point that runs (device time)
    planned: dict[int, int]  # nodes -> points that run

    @property
    def point_timeout_s(self) -> float:
        """Device seconds a point may take before it counts as hung (``hung_after_s``)."""
        return hung_after_s(self.longest_call_s)


def plan(points: list[Point], link: LinkType, dilation: float, budget_s: float,
         keep: frozenset[str] = frozenset()) -> Budget:
    """Points (test, size_B, nodes, ranks) within ``budget_s`` host seconds at ``dilation``,
    never dropping those ``keep`` holds (they may then take more than the budget)."""
    call = {pt: slowed_call_s(pt[0], pt[3], pt[1], link, pt[2]) for pt in points}  # device s
    cost = {pt: point_s(pt[0], pt[3], pt[1], link, dilation, pt[2]) for pt in points}
    total = sum(cost.values())
    where = f"the {link.name} plant" if link.shared else f"{link.name} links"
    not_run: dict[Point, str] = {}
    for pt in sorted(points, key=lambda q: -cost[q]):
        if total <= budget_s:
            break
        if kept(pt[0], pt[1], keep):
            continue
        total -= cost[pt]
        not_run[pt] = (f"not run: it would take {cost[pt]:.3g} s of host time at D = {dilation:g} "
                       f"(one call {call[pt]:.3g} s on {where} by the model, "
                       f"{fixed_s(pt[3], dilation, link):.3g} s fixed at {pt[3]} ranks), over the "
                       f"study's {budget_s:.0f} s for benchmarks on {where}")
    running = [pt for pt in points if pt not in not_run]
    planned: dict[int, int] = {}
    for pt in running:
        planned[pt[2]] = planned.get(pt[2], 0) + 1
    longest = max((call[pt] for pt in running), default=0.0)
    return Budget(not_run, total, sum(cost[pt] for pt in not_run), longest, planned)
