"""The planned time of a study's parts, stated before anything starts (studies with a time
budget: ``study_budget_s``, e.g. the seed002 preset's 90 minutes, seed000's 20).

The workloads cost what their rounds cost as measured (``presets.WORK_ROUND_S``: host seconds
of one round at each node count, one launch per configuration), times the rounds (the warm-up
and ``work_reps``); the benchmark points on the cluster cost their modelled calls and their
fixed cost (``shoal.study.bench_budget``); what is left of the budget after the set-up, the
workloads and the reference's benchmarks is theirs, unless ``--imb-budget`` gives it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shoal.errors import ShoalError
from shoal.profiles import LinkType
from shoal.study import bench_budget, presets

# Host seconds outside the parts: the 128 boxes and the blade brought up and calibrated,
# down again, and the report (cluster up of 128 boxes: 29 s at D = 7, docs/cluster.md).
SETUP_S = 120.0


def setup_s(preset: str | None) -> float:
    """Host seconds of a study's set-up, down and report: the preset's as measured, else
    ``SETUP_S``."""
    return presets.SETUP_S.get(preset or "", SETUP_S)


@dataclass(frozen=True)
class Benchmarks:
    """What the cluster's benchmarks are and where, for the plan's lines: "IMB on the plant",
    "MPBench on the ethernet-100m links"."""

    kind: str    # IMB, MPBench, or benchmarks (a mix)
    shared: bool  # on one shared medium (a plant of boxes) rather than switched links
    link: str

    def __str__(self) -> str:
        return f"{self.kind} on the plant" if self.shared else f"{self.kind} on the {self.link} links"

    @property
    def devices(self) -> str:
        return "boxes" if self.shared else "devices"


PLANT_IMB = Benchmarks("IMB", True, "docsis-27m")  # seed002's


def benchmarks_there(suite: str, link: LinkType) -> Benchmarks:
    """The suite's benchmarks on ``link``."""
    names = {t.strip().split(".", 1)[0] for t in suite.split(",") if t.strip()}
    kind = {frozenset({"imb"}): "IMB", frozenset({"mpbench"}): "MPBench"}.get(frozenset(names), "benchmarks")
    return Benchmarks(kind, link.shared, link.name)


def work_round_s(preset: str | None, counts: list[int], reference: bool) -> float | None:
    """Host seconds of one round of the preset's workloads at ``counts`` boxes (and on the
    reference), interpolated between the node counts measured; None: nothing measured."""
    measured = presets.WORK_ROUND_S.get(preset or "")
    if not measured:
        return None
    boxes = sorted(n for n in measured if isinstance(n, int))
    at = np.interp(counts, boxes, [measured[n] for n in boxes])
    return float(at.sum()) + (measured["reference"] if reference else 0.0)


# Host seconds an IMB point on the reference costs: its ranks on one fast device, no plant
# (the full seed002 run: the blade's 67 points in 21 s, launches included).
REFERENCE_POINT_S = 0.35


def reference_imb_s(points: int) -> float:
    """The reference's IMB points, each at its measured cost (its calls take milliseconds)."""
    return points * REFERENCE_POINT_S


def _span(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 600 else f"{seconds:.0f} s"


@dataclass(frozen=True)
class Schedule:
    budget_s: float
    work_rounds: int
    work_s: float
    reference_imb_s: float
    imb_budget_s: float  # the cluster's benchmarks' share (IMB's on seed002's plant)
    imb: bench_budget.Budget
    setup_s: float = SETUP_S
    benchmarks: Benchmarks = PLANT_IMB  # what they are, where (benchmarks_there)

    @property
    def total_s(self) -> float:
        return self.setup_s + self.work_s + self.reference_imb_s + self.imb.planned_s

    def lines(self) -> list[str]:
        """What the study plans to spend, and what it leaves out to fit."""
        ran = sum(self.imb.planned.values())
        dropped: dict[int, int] = {}
        for (_test, _size, nodes, _ranks) in self.imb.not_run:
            dropped[nodes] = dropped.get(nodes, 0) + 1
        out = [f"planned: {_span(self.total_s)} of the study's {_span(self.budget_s)} "
               f"(host time, by measured costs; shoal.study.schedule)",
               f"  workloads: {_span(self.work_s)}, {self.work_rounds} rounds (the warm-up and "
               f"{self.work_rounds - 1} counted)",
               f"  {self.benchmarks}: {_span(self.imb.planned_s)}, {ran} points, of its "
               f"{_span(self.imb_budget_s)}",
               f"  {self.benchmarks.kind} on the reference: {_span(self.reference_imb_s)}",
               f"  set-up and report: {_span(self.setup_s)}"]
        if dropped:
            kind, devices = self.benchmarks.kind, self.benchmarks.devices
            per = ", ".join(f"{dropped[n]} of {dropped[n] + self.imb.planned.get(n, 0)} at {n} {devices}"
                            for n in sorted(dropped))
            points = f"{kind} point" if len(self.imb.not_run) == 1 else f"{kind} points"
            out.append(f"  left out to fit: {len(self.imb.not_run)} {points} ({per}; "
                       f"{_span(self.imb.dropped_s)}), each in skipped.csv and the report")
        return out


def bench_share_s(budget_s: float, work_s: float, reference_s: float, setup: float = SETUP_S,
                  benchmarks: Benchmarks = PLANT_IMB) -> float:
    """The study's seconds left to the cluster's benchmarks after the set-up, workloads and
    reference."""
    left = budget_s - setup - work_s - reference_s
    if left <= 0:
        raise ShoalError(f"the study's {budget_s:.0f} s hold no {benchmarks}: its workloads are "
                         f"planned at {work_s:.0f} s and the reference's at {reference_s:.0f} s; "
                         "give fewer --work-reps or --nodes, or --imb-budget SECONDS")
    return left
