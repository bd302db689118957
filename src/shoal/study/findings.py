"""The study's answer as typed objects, rendered by the report and written to findings.json.

Every figure of the headline names the ``work.csv`` rows it comes from
(``rows``), so a reader can recompute it. Each ``to_json`` gives the object's
part of findings.json (numbers as numbers, None for what was not measured).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from shoal.model.optimum import Optimum
from shoal.model.resample import Interval
from shoal.model.scaling import ScalingFit, _jsonable


@dataclass(frozen=True)
class BenchmarkPoint:
    """One benchmark test at its representative size on one configuration (a results.csv row)."""

    nodes: int
    ranks: int
    point_id: str  # the results.csv row
    perf: float  # the test's own metric, higher is better (unit: BenchmarkResult.perf_unit)
    perf_ci: tuple[float, float]  # from the 95 % CI of the median time
    converged: bool
    power_W: float  # NaN when the point has no power
    power_kind: str | None  # measured | modelled
    energy_partial: bool
    perf_per_W: float  # NaN without power
    # Had its ranks spun while waiting (shoal.model.waiting); None when the profile cannot say.
    power_spin_W: float | None = None
    perf_per_W_spin: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BenchmarkFit:
    """Amdahl/Woo-Lee fitted to one test's performance (and perf/W) over node counts."""

    status: str  # ok | poor_fit | why no fit
    reason: str
    params: dict[str, float]
    stderr: dict[str, float]
    n_points: int
    r2_perf: float | None
    r2_ppw: float | None
    rmse_rel: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BenchmarkResult:
    """One benchmark test: its points over node counts at one size, the reference's point,
    the fit and the optimum it gives. ``status`` says why the rest is missing."""

    test: str
    metric: str  # bandwidth | time | rate
    perf_unit: str
    size_B: int | None
    status: str | None = None
    cluster: list[BenchmarkPoint] = field(default_factory=list)
    reference: BenchmarkPoint | None = None
    fit: BenchmarkFit | None = None
    optimum: Optimum | None = None
    beats_reference_at: list[int] | None = None  # node counts whose perf/W beats the reference's
    ppw_vs_reference: dict[str, float] | None = None  # node count -> perf/W over the reference's
    ppw_vs_reference_spin: dict[str, float] | None = None
    # Not in findings.json: the fit itself, for the curves and the overall optimum.
    model_fit: ScalingFit | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"test": self.test, "metric": self.metric, "perf_unit": self.perf_unit,
                               "size_B": self.size_B}
        if self.status is not None:
            return {**out, "status": self.status}
        out.update(cluster=[p.to_json() for p in self.cluster],
                   reference=self.reference.to_json() if self.reference else None,
                   fit=self.fit.to_json() if self.fit else None,
                   optimum=self.optimum.to_dict() if self.optimum else None)
        for name in ("beats_reference_at", "ppw_vs_reference", "ppw_vs_reference_spin"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class FitSummary:
    """Amdahl's f fitted to one workload's speed-up, and whether the model describes it."""

    status: str
    reason: str
    f: float | None
    f_stderr: float | None
    r2_perf: float | None
    r2_medians: float | None  # share of the medians' variance over node counts the fit explains
    n_points: int
    describes: bool  # the fit holds and explains enough: the workload joins the mix

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ConditionResult:
    """One workload under one waiting condition (sleeping or spinning)."""

    k: float  # idle fraction of the condition
    perf_per_W: dict[str, float | None]  # node count -> measured perf/W
    relative_energy: dict[str, float | None]  # node count -> energy per unit over one device's
    best_measured: int | None
    n_star: Interval  # the model's n* and its bootstrap interval
    # Not in findings.json: node count -> energy per unit of work of each counted repetition.
    energy_samples: dict[int, list[float]] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"k": self.k, "perf_per_W": self.perf_per_W, "relative_energy": self.relative_energy,
                "best_measured": self.best_measured, "n_star": self.n_star.to_dict()}


@dataclass
class WorkloadResult:
    """One workload at one size: its numbers per node count (``cluster``: one row each, columns
    in docs/study.md), the reference's, the fit, n* under each waiting condition, the verdict.
    ``status`` says why the rest is missing when nothing finished on the cluster."""

    workload: str
    size: str
    unit: str
    cluster: list[dict[str, Any]]
    reference: dict[str, Any] | None
    data_B_per_run: float | None
    status: str | None = None
    k: float | None = None
    shared_power_W: float = 0.0
    c: float = 0.0
    device: str | None = None
    device_busy_W: float | None = None
    fit: FitSummary | None = None
    scaling: str = ""  # scaling | not_scaling
    f_serial: float | None = None
    conditions: dict[str, ConditionResult] = field(default_factory=dict)
    n_star: float | None = None
    n_star_range_se: list[float | None] | None = None
    n_star_by_switch_W: list[dict[str, float | None]] = field(default_factory=list)
    n_best_measured: int | None = None
    n_best_measured_net: int | None = None
    cross_check: str = ""
    verdict: str = ""
    best_range: SizeRange | None = None  # sleeping: the sizes whose perf/W ties with n_best_measured
    ppw_vs_reference: dict[str, float] | None = None
    ppw_vs_reference_spin: dict[str, float] | None = None
    # Not in findings.json: the fit itself (for curves) and the bootstrap draws of f (for the mix).
    model_fit: ScalingFit | None = None
    f_boot: list[float | None] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.workload} {self.size}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workload": self.workload, "size": self.size, "unit": self.unit,
                               "cluster": self.cluster, "reference": self.reference,
                               "data_B_per_run": self.data_B_per_run}
        if self.status is not None:
            return {**out, "status": self.status}
        out.update(k=self.k, shared_power_W=self.shared_power_W, c=self.c, device=self.device,
                   device_busy_W=self.device_busy_W, fit=self.fit.to_json() if self.fit else None,
                   scaling=self.scaling, f_serial=self.f_serial,
                   conditions={name: c.to_json() for name, c in self.conditions.items()},
                   n_star=self.n_star, n_star_range_se=self.n_star_range_se,
                   n_star_by_switch_W=self.n_star_by_switch_W, n_best_measured=self.n_best_measured,
                   n_best_measured_net=self.n_best_measured_net, cross_check=self.cross_check,
                   verdict=self.verdict, best_range=asdict(self.best_range) if self.best_range else None)
        if self.ppw_vs_reference is not None:
            out["ppw_vs_reference"] = self.ppw_vs_reference
        if self.ppw_vs_reference_spin is not None:
            out["ppw_vs_reference_spin"] = self.ppw_vs_reference_spin
        return out


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
    # n -> the mix's perf/W relative to one device (1 / measured_energy) and its 95 % interval,
    # a bootstrap over each point's own repetitions (shoal.model.resample.mix_ppw_intervals).
    measured_ppw: dict[int, Interval] = field(default_factory=dict)
    # n -> the mix's perf/W at n over that at best_measured, its 95 % interval from the same
    # resamples (the ratio within each): one that holds 1 cannot be told apart from the best.
    ppw_vs_best: dict[int, Interval] = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = _jsonable(asdict(self))
        out["measured_energy"] = {str(n): e for n, e in self.measured_energy.items()}
        for name in ("measured_ppw", "ppw_vs_best"):
            out[name] = {str(n): i.to_dict() for n, i in getattr(self, name).items()}
        return out


@dataclass(frozen=True)
class SizeRange:
    """The measured sizes whose perf/W the measurements cannot tell apart from the best's: the
    node counts next to the best whose perf/W over the best's has a 95 % interval (a bootstrap
    over the points' own repetitions) that holds 1. ``low == high`` when the best stands clear
    of its neighbours."""

    low: int
    high: int
    within: float  # perf/W at the best over the lowest perf/W in the range, minus 1 (0: one size)
    level: float = 0.95

    @property
    def tied(self) -> bool:
        return self.high > self.low

    def holds(self, n: int) -> bool:
        return self.low <= n <= self.high

    def text(self) -> str:
        """"3–4 devices", or "3 device(s)" for one size."""
        return f"{self.low}–{self.high} devices" if self.tied else f"{self.low} device(s)"


@dataclass(frozen=True)
class Headline:
    """What the first lines say: a size that was measured, and the model beside it."""

    condition: str
    size: int | None  # the measured best node count, or N when perf/W still rises at N
    at_least: bool  # True: perf/W at the largest measured N stands clear above the next smaller N's
    largest_measured: int
    gain: float | None  # perf/W at ``size`` over perf/W at the fewest devices measured (one by default)
    rising_by: float | None  # at_least: perf/W at N over perf/W at the next smaller N measured, minus 1
    model: Interval
    text: str
    rows: list[str] = field(default_factory=list)
    best_range: SizeRange | None = None  # the sizes that tie with ``size``; None without a size
    smallest_measured: int | None = None  # the node count ``gain`` is over

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


@dataclass(frozen=True)
class PrecisionSummary:
    """How many workload points reached the study's CI target, and which did not and why."""

    ci_target: float | None
    points: int
    converged: int
    not_converged: list[dict[str, Any]]  # workload, config, nodes, reps, ci_rel, why

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class WorkFindings:
    """The workloads' part of the answer: every workload, the mix per waiting condition, the
    headline per condition, and the precision the points reached."""

    workloads: list[WorkloadResult] = field(default_factory=list)
    combined: dict[str, Combined] = field(default_factory=dict)
    headline: dict[str, Headline] = field(default_factory=dict)
    precision: PrecisionSummary | None = None


@dataclass(frozen=True)
class Offload:
    """The offload decision (shoal.model.decide's verdict, as its JSON) at one cluster size."""

    nodes_used: int
    nodes_from: str  # why this size: which answer of the study it is
    verdict: dict[str, Any]
    map: list[dict[str, Any]]  # the decision over data rates and device counts

    def to_json(self) -> dict[str, Any]:
        return {"nodes_used": self.nodes_used, "nodes_from": self.nodes_from, "verdict": self.verdict,
                "map": self.map}


@dataclass
class Findings:
    """Everything one study run found; ``to_json`` is its entry in findings.json."""

    run: str
    cluster_label: str
    reference: str
    idle_fraction_k: float | None
    work: WorkFindings
    tests: list[BenchmarkResult]
    power: list[dict[str, Any]]  # per configuration, shoal.study.analysis.power_by_nodes
    overall_optimum: dict[str, Any]
    offload: Offload
    measured_points: int
    modelled_power: bool
    unconverged_points: int  # benchmark points that did not reach their CI target
    device_speed: str  # profile | host | device (shoal.study.analysis.device_speed)
    host_speed: dict[str, Any] | None = None  # the run manifest's, as it stands; None: not measured
    beside_seed: list[dict[str, Any]] | None = None  # shoal.study.seed_compare.seed_rows
    not_run: list[dict[str, Any]] = field(default_factory=list)
    # Each configuration's launch layout (StudyRequest.layouts): config -> box | head | local.
    launch: dict[str, str] = field(default_factory=dict)

    @property
    def workloads(self) -> list[WorkloadResult]:
        return self.work.workloads

    @property
    def combined(self) -> dict[str, Combined]:
        return self.work.combined

    @property
    def headline(self) -> dict[str, Headline]:
        return self.work.headline

    @property
    def precision(self) -> PrecisionSummary | None:
        return self.work.precision

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run": self.run, "cluster_label": self.cluster_label, "reference": self.reference,
            "idle_fraction_k": self.idle_fraction_k,
            "headline": {c: h.to_dict() for c, h in self.headline.items()},
            "combined": {c: m.to_dict() for c, m in self.combined.items()},
            "precision": self.precision.to_dict() if self.precision else None,
            "workloads": [w.to_json() for w in self.workloads],
            "tests": [t.to_json() for t in self.tests],
            "power": self.power, "overall_optimum": self.overall_optimum, "offload": self.offload.to_json(),
            "measured_points": self.measured_points, "modelled_power": self.modelled_power,
            "unconverged_points": self.unconverged_points, "device_speed": self.device_speed,
            "beside_seed": self.beside_seed, "not_run": self.not_run, "launch": self.launch}
        if self.host_speed is not None:
            out["host_speed"] = self.host_speed
        return out
