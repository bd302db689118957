"""The study's answer as typed objects, rendered by the report and written to findings.json.

Every figure of the headline names the ``work.csv`` rows it comes from
(``rows``), so a reader can recompute it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from shoal.model.resample import Interval
from shoal.model.scaling import _jsonable


@dataclass(frozen=True)
class Combined:
    """The mix of the workloads whose fits hold, under one waiting condition."""

    condition: str  # shoal.model.waiting: sleeping or spinning
    weights: dict[str, float]  # member -> weight (summing to 1)
    left_out: dict[str, str]  # workload -> why it is not a member
    measured_energy: dict[int, float]  # E_mix(n) relative to one device, measured
    best_measured: int | None
    n_star: Interval  # the model's n*_mix and its bootstrap interval
    disagree: list[str]  # members whose own answer differs from the mix's, said plainly
    rows: list[str]  # work.csv point_ids behind measured_energy

    def to_dict(self) -> dict:
        out = _jsonable(asdict(self))
        out["measured_energy"] = {str(n): e for n, e in self.measured_energy.items()}
        return out


@dataclass(frozen=True)
class Headline:
    """What the first lines say: a size that was measured, and the model beside it."""

    condition: str
    size: int | None  # the measured best node count, or N when perf/W still rises at N
    at_least: bool  # True: the optimum lies at or beyond the largest measured size N
    largest_measured: int
    gain: float | None  # perf/W at ``size`` over perf/W at the fewest devices measured (one by default)
    rising_by: float | None  # at_least: perf/W at N over perf/W at the next smaller N measured, minus 1
    model: Interval
    text: str
    rows: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))
