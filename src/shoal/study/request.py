"""What a study measures, with defaults that answer the thesis's question on
an emulated cluster of MinnowBoard-class devices against a NUC-class PC."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from shoal.errors import ShoalError
from shoal.execute.where import Where

SUITES = ("mpbench", "imb", "mpbench,imb", "none")
DEFAULT_SIZES = "8,128,2K,32K,512K"
QUICK_SIZES = "8,2K,128K"
# Workloads of the default study and their sizes (shoal.work): chosen so that one
# emulated MinnowBoard takes about a second on each, with f inside 0.85-0.97.
DEFAULT_WORKLOADS = "raytrace,msa,videostream,ep"
DEFAULT_WORK_SIZES = {"raytrace": "512", "msa": "S80-L150", "videostream": "640x360x16", "ep": "M24",
                      "edge": "8@1024x816", "is": "S"}
# With workloads, the benchmarks are the secondary part: three sizes, this many seconds.
BENCH_BUDGET_WITH_WORK_S = 30.0
WORK_REPS = 3


@dataclass
class StudyRequest:
    """Everything that defines a study (saved in the manifest for --resume)."""

    emulate: str | None = "4xminnowboard"
    cluster: str | None = None  # inventory file of real (or emulated) devices instead
    link: str | None = None
    # The "traditional system": a device profile emulated beside the cluster
    # ("nuc"), this machine with its own power readings ("host"), or "none".
    reference: str = "nuc"
    nodes: str | None = None
    suite: str = "mpbench"
    sizes: str | None = None
    quick: bool = False
    time_budget_s: float = 150.0  # for the measurements; the per-point budget follows from it
    mpi: str | None = None
    power: str = "auto"  # for real hosts and "host"; emulated devices always use their models
    offload: dict[str, Any] = field(default_factory=dict)  # overrides of the offload scenario
    # Time dilation of the emulated cluster and reference (one D for both; None: chosen to fit).
    dilation: float | None = None
    # Workloads timed at every node count (shoal.work; "" for none), their sizes
    # (name -> one size or several separated by commas) and repetitions per count.
    workloads: str = DEFAULT_WORKLOADS
    work_sizes: dict[str, str] = field(default_factory=dict)
    work_reps: int = WORK_REPS
    # libshoalwait mode of the workloads' ranks, so waiting shows as idle power
    # (None: event on emulated devices whose CPU quota polling would use up, else backoff).
    work_wait: str | None = None
    explicit_budget: bool = False  # --time-budget given: the benchmarks take all of it

    def validate(self) -> None:
        if self.suite not in SUITES:
            raise ShoalError(f"--suite {self.suite}: choose mpbench, imb or mpbench,imb")
        self.where().validate()
        if not (self.emulate or self.cluster):
            raise ShoalError("a study needs devices: --emulate 4xminnowboard or --cluster FILE")
        if self.suite == "none" and not self.workloads:
            raise ShoalError("--suite none with no --workloads leaves nothing to measure; "
                             "keep the default workloads or choose a --suite")
        if self.work_reps < 1:
            raise ShoalError(f"--work-reps must be at least 1, got {self.work_reps}")
        unknown = sorted(set(self.work_sizes) - set(self.workload_list))
        if unknown:
            raise ShoalError(f"--work-size names {', '.join(unknown)}, which --workloads does not run "
                             f"({self.workloads or 'none'}); add it to --workloads or drop its --work-size")
        if self.time_budget_s <= 0:
            raise ShoalError(f"--time-budget must be positive, got {self.time_budget_s}")
        uplink = self.offload.get("uplink")
        if uplink is not None:
            from shoal.model import UPLINKS

            if uplink not in UPLINKS:
                raise ShoalError(f"--uplink {uplink}: use one of {', '.join(UPLINKS)}")
        if self.offload.get("rate_Bps", 0) < 0:
            raise ShoalError("--data-rate must not be negative")
        if self.reference != "none" and self.reference != "host" and self.cluster:
            raise ShoalError(f"--reference {self.reference}: an emulated reference needs an emulated "
                             "cluster; with --cluster use --reference host or none")

    def where(self) -> Where:
        """The devices' side of the study (its reference and power are checked by its plans)."""
        return Where(mpi=self.mpi, emulate=self.emulate, cluster=self.cluster, link=self.link,
                     nodes=self.nodes, dilation=self.dilation)

    @property
    def workload_list(self) -> list[str]:
        return [w.strip() for w in self.workloads.split(",") if w.strip()]

    def work_size_list(self, workload: str) -> list[str]:
        """The sizes a workload runs at: --work-size, else the study's default, else its own."""
        text = self.work_sizes.get(workload) or DEFAULT_WORK_SIZES.get(workload) or "default"
        return [t.strip() for t in text.split(",") if t.strip()]

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
        return dataclasses.asdict(self)

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> "StudyRequest":
        return cls(**data)
