"""What a study measures, with defaults that answer the thesis's question on
an emulated cluster of MinnowBoard-class devices against a NUC-class PC.

``StudyRequest`` is the one home of the study's defaults: the command line
passes only what the user gave (``StudyRequest.create``), and a resumed
study reads its request back from the manifest (``from_manifest``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from shoal.errors import ShoalError
from shoal.execute.where import Where
from shoal.study import presets
from shoal.study.reference import Reference

SUITES = ("mpbench", "imb", "mpbench,imb", "none")
DEFAULT_SIZES = "8,128,2K,32K,512K"
QUICK_SIZES = "8,2K,128K"
DEFAULT_EMULATE = "4xminnowboard"
DEFAULT_REFERENCE = "nuc"  # beside an emulated cluster; real clusters default to "host"
DEFAULT_SUITE = "mpbench"
DEFAULT_POWER = "auto"
TIME_BUDGET_S = 150.0
QUICK_TIME_BUDGET_S = 90.0
# Workloads of the default study and their sizes (shoal.work): chosen so that one
# emulated MinnowBoard takes about a second on each, with f inside 0.85-0.97.
DEFAULT_WORKLOADS = "raytrace,msa,videostream,ep"
# ep draws its numbers in NPB's double-precision arithmetic: M24 (NPB class S) took 3.2-3.7 s
# on one emulated MinnowBoard, so M22 (a quarter of its pairs) keeps it near a second.
DEFAULT_WORK_SIZES = {"raytrace": "512", "msa": "S80-L150", "videostream": "640x360x16", "ep": "M22",
                      "edge": "8@1024x816", "is": "S"}
# With workloads, the benchmarks are the secondary part: three sizes, this many seconds.
BENCH_BUDGET_WITH_WORK_S = 30.0
# A workload point repeats until the 95 % CI of its median time is within CI of the
# median, or it has WORK_REPS repetitions or WORK_POINT_BUDGET_S seconds of runs.
# Six repetitions are the fewest whose order statistics bound the median at 95 %.
CI = 0.03
WORK_MIN_REPS = 6
WORK_REPS = 12
WORK_POINT_BUDGET_S = 30.0
# The first round at each configuration is a warm-up, kept in work.csv but not counted: the
# first launch on a set of devices ran 2-5x slower than the next ones on a loaded 2-core host
# (connections and caches of devices not used before).
WORK_WARMUP = 1


@dataclass
class StudyRequest:
    """Everything that defines a study (saved in the manifest for --resume)."""

    emulate: str | None = DEFAULT_EMULATE
    cluster: str | None = None  # inventory file of real (or emulated) devices instead
    attach: str | None = None  # or an emulated cluster already up ('shoal cluster up')
    link: str | None = None
    # The "traditional system" the cluster is compared with (shoal.study.reference).
    reference: Reference = field(default_factory=lambda: Reference.parse(DEFAULT_REFERENCE))
    nodes: str | None = None
    suite: str = DEFAULT_SUITE
    sizes: str | None = None
    quick: bool = False
    time_budget_s: float = TIME_BUDGET_S  # for the benchmarks; the per-point budget follows from it
    mpi: str | None = None
    power: str = DEFAULT_POWER  # for real hosts and "host"; emulated devices always use their models
    offload: dict[str, Any] = field(default_factory=dict)  # overrides of the offload scenario
    # Time dilation of the emulated cluster and reference (one D for both; None: chosen to fit).
    dilation: float | None = None
    # This host's core in reference cores (None: measured, cached per host), and whether to
    # measure it again (shoal.cluster.hostspeed).
    host_speed: float | None = None
    recalibrate: bool = False
    # Workloads timed at every node count (shoal.work; "" for none), their sizes
    # (name -> one size or several separated by commas).
    workloads: str = DEFAULT_WORKLOADS
    work_sizes: dict[str, str] = field(default_factory=dict)
    # Precision of a workload point: the 95 % CI of its median time within ``ci`` of the
    # median, at most ``work_reps`` repetitions and ``work_point_budget_s`` seconds of runs.
    ci: float = CI
    work_reps: int = WORK_REPS
    work_point_budget_s: float = WORK_POINT_BUDGET_S
    work_warmup: int = WORK_WARMUP
    # Weights of the workloads in the combined answer (name -> weight; empty: equal).
    mix: dict[str, float] = field(default_factory=dict)
    # libshoalwait mode of the workloads' ranks, so waiting shows as idle power
    # (None: event on emulated devices whose CPU quota polling would use up, else backoff).
    work_wait: str | None = None
    explicit_budget: bool = False  # --time-budget given: the benchmarks take all of it
    # The named study whose options fill those not given (shoal.study.presets), if any.
    preset: str | None = None
    # Ranks per cluster device of the workloads (None: one per core of the device).
    work_ranks_per_node: int | None = None
    # Host seconds for the cluster's benchmark calls (--imb-budget; None: no limit); the points
    # whose calls do not fit are planned as not run, with their modelled call time
    # (shoal.study.bench_budget). Named for seed 002's IMB on the plant, where it began.
    imb_budget_s: float | None = None
    # Points never planned as not run: test names, or test@size_B (e.g. imb.Allreduce@64).
    imb_keep: str | None = None
    # Host seconds for the whole study (a preset's): the workloads and the reference as
    # measured, the cluster's benchmarks what they leave unless --imb-budget (shoal.study.schedule).
    study_budget_s: float | None = None
    # The clock of the cluster's emulated devices: folded into ``emulate`` (4xminnowboard@500M)
    # by create(); left here only where there is no emulated cluster, for validate() to refuse.
    freq: float | None = None
    governor: str | None = None
    # The clocks a frequency sweep runs the study at (Hz; shoal.study.freqs), None: no sweep.
    freqs: list[float] | None = None
    # Where the MPI's launch daemons run on an emulated cluster: "box" (the MPI's own, one in
    # every device) or "head" (in the head, starting each rank into its device; --launch).
    launch: str = "box"
    # What the cluster's emulated devices keep doing beside their ranks, by profile
    # (--background stb=mpeg2-sd): folded into ``emulate`` by create(); left here only where
    # there is no emulated cluster, for validate() to refuse.
    background: dict[str, str] | None = None
    # Each profile's upstream service flow on a shared plant (--qos stb=10M): folded into
    # ``emulate`` by create() like ``background``.
    qos: dict[str, str] | None = None
    # The file server each profile's devices write their output to (--storage
    # xeon-blade=seed002-nas): folded into ``emulate`` and the reference by create().
    storage: dict[str, str] | None = None
    # How a large MPI_Bcast travels on the devices (--bcast): "mpi", or "multicast" down a
    # shared medium; jobs over switched links (a reference's blades) keep the MPI's own.
    bcast: str = "mpi"
    # A preset's reference of several devices: fewer where they would raise the study's
    # dilation (shoal.study.blades); False once given on the command line or fitted.
    reference_fallback: bool = False

    @classmethod
    def create(cls, **given: Any) -> "StudyRequest":
        """A request from the options a user gave (None: not given); the defaults that
        depend on other options are decided here and nowhere else."""
        given = {k: v for k, v in given.items() if v is not None and v != {}}
        if given.get("preset"):
            preset = presets.values(given["preset"], bool(given.get("quick")))
            mine = given.get("work_sizes", {})
            if given.get("cluster") or given.get("attach"):
                preset.pop("emulate", None)  # the user's own devices instead of the preset's
            if given.get("cluster"):
                preset.pop("launch", None)  # real hosts run their MPI's own launch
            if "reference" in given:
                preset.pop("reference_fallback", None)  # the user's reference runs as given
            given = {**preset, **given}
            # Sizes of the preset's workloads that still run, beside (under) the user's own.
            running = [w.strip() for w in str(given.get("workloads", "")).split(",")]
            given["work_sizes"] = {**{k: v for k, v in preset.get("work_sizes", {}).items()
                                      if k in running}, **mine}
        cluster = given.get("cluster") or given.get("attach")
        if "emulate" not in given and cluster:
            given["emulate"] = None
        if given.get("freq") is not None and given.get("governor") is not None:
            raise ShoalError(f"--freq and --governor {given['governor']} both name a clock; give one")
        clock = given.get("freq") or given.get("governor")
        if clock is not None and given.get("freqs"):
            raise ShoalError(f"--freqs sweeps the clock: drop --{'freq' if given.get('freq') else 'governor'}")
        if clock is not None and not cluster:
            from shoal.profiles import clock as clocks

            given["emulate"] = clocks.with_clock(given.get("emulate") or DEFAULT_EMULATE, clocks.text(clock))
            given.pop("freq", None)
            given.pop("governor", None)
        if given.get("background") and not cluster:
            from shoal.cluster import background

            given["emulate"] = background.with_background(given.get("emulate") or DEFAULT_EMULATE,
                                                          given.pop("background"))
        if given.get("qos") and not cluster:
            from shoal.cluster import qos

            given["emulate"] = qos.with_qos(given.get("emulate") or DEFAULT_EMULATE, given.pop("qos"))
        given["reference"] = Reference.parse(given.get("reference")
                                             or ("host" if cluster else DEFAULT_REFERENCE))
        if given.get("storage") and not cluster:
            from shoal.cluster import storage

            given["emulate"], given["reference"] = storage.with_storage_study(
                given.get("emulate") or DEFAULT_EMULATE, given["reference"], given.pop("storage"))
        given["explicit_budget"] = "time_budget_s" in given
        if "time_budget_s" not in given:
            given["time_budget_s"] = QUICK_TIME_BUDGET_S if given.get("quick") else TIME_BUDGET_S
        if given.get("workloads") == "none":
            given["workloads"] = ""
        return cls(**given)

    def validate(self) -> None:
        if self.suite not in SUITES and not all(
                word.strip().split(".")[0] in ("imb", "mpbench") and "." in word
                for word in self.suite.split(",")):
            raise ShoalError(f"--suite {self.suite}: choose mpbench, imb, mpbench,imb, none or "
                             "tests of them such as imb.PingPong,imb.Bcast")
        self.where().validate()
        if not (self.emulate or self.cluster or self.attach):
            raise ShoalError("a study needs devices: --emulate 4xminnowboard, --cluster FILE or --attach ID")
        if self.suite == "none" and not self.workloads:
            raise ShoalError("--suite none with no --workloads leaves nothing to measure; "
                             "keep the default workloads or choose a --suite")
        if self.work_reps < 1:
            raise ShoalError(f"--work-reps must be at least 1, got {self.work_reps}")
        if not (0 < self.ci < 1) or not math.isfinite(self.ci):
            raise ShoalError(f"--ci {self.ci:g}: give the CI target as a fraction between 0 and 1, "
                             "e.g. 0.03 for 3 %")
        unknown = sorted(set(self.work_sizes) - set(self.workload_list))
        if unknown:
            raise ShoalError(f"--work-size names {', '.join(unknown)}, which --workloads does not run "
                             f"({self.workloads or 'none'}); add it to --workloads or drop its --work-size")
        self._check_mix()
        if self.time_budget_s <= 0:
            raise ShoalError(f"--time-budget must be positive, got {self.time_budget_s}")
        if self.imb_budget_s is not None and not (0 < self.imb_budget_s < math.inf):
            raise ShoalError(f"--imb-budget must be a positive number of seconds, got {self.imb_budget_s:g}")
        uplink = self.offload.get("uplink")
        if uplink is not None:
            from shoal.model import UPLINKS

            if uplink not in UPLINKS:
                raise ShoalError(f"--uplink {uplink}: use one of {', '.join(UPLINKS)}")
        if self.offload.get("rate_Bps", 0) < 0:
            raise ShoalError("--data-rate must not be negative")
        if self.reference.emulated and self.cluster:
            raise ShoalError(f"--reference {self.reference}: an emulated reference needs an emulated "
                             "cluster; with --cluster use --reference host or none")

    def where(self) -> Where:
        """The devices' side of the study (its reference and power are checked by its plans)."""
        return Where(mpi=self.mpi, emulate=self.emulate, cluster=self.cluster, attach=self.attach,
                     link=self.link,
                     nodes=self.nodes, dilation=self.dilation, host_speed=self.host_speed,
                     recalibrate=self.recalibrate, freq=self.freq, governor=self.governor, launch=self.launch,
                     background=self.background, qos=self.qos, bcast=self.bcast)

    def layouts(self, cluster_label: str, reference_label: str) -> dict[str, str]:
        """Each configuration's launch layout: box or head on emulated devices, box on real
        hosts (their MPI's own launch), "local" for this machine as the reference."""
        emulated = bool(self.emulate or self.attach)
        out = {cluster_label: self.launch if emulated else "box"}
        if self.reference.emulated:
            out[reference_label] = self.launch
        elif self.reference.local:
            out[reference_label] = "local"
        return out

    def _check_mix(self) -> None:
        if not self.mix:
            return
        unknown = sorted(set(self.mix) - set(self.workload_list))
        if unknown:
            raise ShoalError(f"--mix names {', '.join(unknown)}, which --workloads does not run "
                             f"({self.workloads or 'none'}); use names from --workloads")
        bad = [f"{k}={v:g}" for k, v in self.mix.items() if not math.isfinite(v) or v < 0]
        if bad:
            raise ShoalError(f"--mix {', '.join(bad)}: a weight must be a finite number >= 0")
        if not any(v > 0 for v in self.mix.values()):
            raise ShoalError("--mix: every weight is 0; give at least one workload a positive weight")

    @property
    def workload_list(self) -> list[str]:
        return [w.strip() for w in self.workloads.split(",") if w.strip()]

    @property
    def weights(self) -> dict[str, float]:
        """Each workload's weight in the combined answer, summing to 1 (--mix, else equal);
        a workload --mix leaves out weighs 0."""
        names = self.workload_list
        raw = {n: (self.mix.get(n, 0.0) if self.mix else 1.0) for n in names}
        total = sum(raw.values()) or 1.0
        return {n: w / total for n, w in raw.items()}

    def work_size_list(self, workload: str) -> list[str]:
        """The sizes a workload runs at: --work-size, else the study's default, else its own."""
        text = self.work_sizes.get(workload) or DEFAULT_WORK_SIZES.get(workload) or "default"
        return [t.strip() for t in text.split(",") if t.strip()]

    @property
    def work_min_reps(self) -> int:
        return min(WORK_MIN_REPS, self.work_reps)

    @property
    def size_list(self) -> str:
        return self.sizes or (QUICK_SIZES if self.quick or self.workload_list else DEFAULT_SIZES)

    @property
    def bench_budget_s(self) -> float:
        """Measuring time of the benchmarks: all of --time-budget, or a short secondary part."""
        if self.workload_list and not self.explicit_budget:
            return BENCH_BUDGET_WITH_WORK_S
        return self.time_budget_s

    def to_manifest(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "reference": str(self.reference)}

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> "StudyRequest":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("work_warmup", 0)  # studies saved before warm-up rounds had none
        values["reference"] = Reference.parse(data.get("reference"))
        return cls(**values)


def saved_request(manifest: dict[str, Any]) -> StudyRequest | None:
    """The request a study saved in its manifest (None for a run of another command)."""
    saved = manifest.get("study")
    return StudyRequest.from_manifest(saved) if isinstance(saved, dict) else None


def parse_mix(text: str) -> dict[str, float]:
    """``--mix raytrace=2,msa=1``: workload name -> weight (checked against the workloads later)."""
    from shoal.inputs import grammar

    out: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ShoalError(f"--mix {text!r}: give NAME=WEIGHT,... (e.g. raytrace=2,msa=1)")
        try:
            weight = grammar.number(value.strip())
        except grammar.GrammarError as exc:
            raise ShoalError(f"--mix {name.strip()}={value.strip()}: {exc}") from None
        out[name.strip().lower()] = weight
    return out
