"""A benchmark call's modelled device time on any link: ``plant_calls`` on one shared medium
(a cable plant), ``switch_calls`` on switched links (a port per device). A study's budget
(``shoal.study.bench_budget``) plans its points by it, and a sweep waits as long as a point's
calls could take before it counts the point as hung (``shoal.bench.runner``).
"""

from __future__ import annotations

from shoal.bench import plant_calls, switch_calls
from shoal.profiles import LinkType


def call_s(test: str, ranks: int, size_B: int, link: LinkType, nodes: int | None = None) -> float:
    """One call's modelled device time, on ``nodes`` devices (default: one rank on each)."""
    if link.shared:
        return plant_calls.call_s(test, ranks, size_B, link)
    return switch_calls.call_s(test, nodes or ranks, size_B, link)


def slowed_call_s(test: str, ranks: int, size_B: int, link: LinkType, nodes: int | None = None) -> float:
    """A call's modelled time, slowed as its test was measured to run slower than the model."""
    if link.shared:
        return plant_calls.slowed_call_s(test, ranks, size_B, link)
    return switch_calls.slowed_call_s(test, nodes or ranks, size_B, link)
