"""Which IMB points of a study fit its budget on a shared plant, by the link model.

On one shared medium (seed 002's 27 Mbit/s DOCSIS upstream) every byte any device sends
crosses the one channel: a call's time is at least the bytes all ranks send in it over the
rate, plus its sequential steps of one latency each. A point costs at least a warm-up and
one counted call, each D times longer on the emulated plant. The points whose calls are
longest are planned as not run, one at a time, until the rest fit the budget; each keeps
its reason ("not run: one call would take X s (model)"), which the run's ``skipped`` table
and the report print, so nothing is left out silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shoal.cluster import linkmodel
from shoal.profiles import LinkType

CALLS_PER_POINT = 2  # the warm-up and one counted repetition


def _log2(p: int) -> int:
    return max(1, math.ceil(math.log2(p)))


# Per test: (bytes all ranks send in one call, sequential latency steps), for P ranks and
# m bytes, as the MPIs' usual algorithms move them (binomial trees, recursive doubling, pairwise).
def _traffic(test: str, p: int, m: int) -> tuple[float, int]:
    short = test.split(".", 1)[-1]
    return {
        "PingPong": (2 * m, 2), "PingPing": (2 * m, 1), "Uniband": (m, 1), "Biband": (2 * m, 1),
        "Sendrecv": (p * m, 1), "Exchange": (2 * p * m, 2),
        "Bcast": ((p - 1) * m, _log2(p)), "Reduce": ((p - 1) * m, _log2(p)),
        "Gather": ((p - 1) * m, _log2(p)), "Scatter": ((p - 1) * m, _log2(p)),
        "Reduce_scatter": ((p - 1) * m, _log2(p)), "Allreduce": (2 * (p - 1) * m, 2 * _log2(p)),
        "Allgather": (p * (p - 1) * m, _log2(p)), "Alltoall": (p * (p - 1) * m, p - 1),
        "Barrier": (0, 2 * _log2(p)),
    }.get(short, (p * m, _log2(p)))


def call_s(test: str, ranks: int, size_B: int, link: LinkType) -> float:
    """One call's time on the real plant (device time), by the message-level model."""
    sent, steps = _traffic(test, ranks, size_B)
    messages = max(1, steps)
    wire = linkmodel.wire_bytes(max(1, int(sent / messages))) * messages if sent else 0
    return 8 * wire / link.rate_bps + steps * linkmodel.path(link).latency_s


@dataclass(frozen=True)
class Budget:
    not_run: dict[tuple[str, int, int], str]  # (test, size_B, ranks) -> why
    planned_s: float  # host seconds of the calls of the points that run (at least)
    dropped_s: float  # host seconds the points not run would have taken (at least)
    longest_call_s: float  # the longest modelled call of a point that runs (device time)

    @property
    def point_timeout_s(self) -> float:
        """Device seconds a point may take before it counts as hung: its warm-up and one call of
        the longest, six times over. The model counts no TCP acknowledgement queueing for its
        own grant: a 128-box Bcast of 256 KiB took 1.3 times its modelled call, a Sendrecv of
        128 KiB (5 s modelled) had not done two calls in 30 s; and a point declared hung costs
        a new launch, 150-250 s at 128 boxes."""
        return 6 * CALLS_PER_POINT * self.longest_call_s


def plan(points: list[tuple[str, int, int]], link: LinkType, dilation: float, budget_s: float) -> Budget:
    """Points (test, size_B, ranks) within ``budget_s`` host seconds of calls at ``dilation``."""
    call = {pt: call_s(pt[0], pt[2], pt[1], link) for pt in points}  # device seconds
    cost = {pt: CALLS_PER_POINT * dilation * call[pt] for pt in points}
    total = sum(cost.values())
    not_run: dict[tuple[str, int, int], str] = {}
    for pt in sorted(points, key=lambda q: -cost[q]):
        if total <= budget_s:
            break
        total -= cost[pt]
        one = call[pt]
        not_run[pt] = (f"not run: one call would take {one:.3g} s on the {link.name} plant (model; "
                       f"{one * dilation:.3g} s at D = {dilation:g}), over the study's "
                       f"{budget_s:.0f} s for IMB on it")
    longest = max((call[pt] for pt in points if pt not in not_run), default=0.0)
    return Budget(not_run, total, sum(cost[pt] for pt in not_run), longest)
