"""What a study measures, with defaults that answer the thesis's question on
an emulated cluster of MinnowBoard-class devices against a NUC-class PC."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from shoal.errors import ShoalError

SUITES = ("mpbench", "imb", "mpbench,imb")
DEFAULT_SIZES = "8,128,2K,32K,512K"
QUICK_SIZES = "8,2K,128K"


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

    def validate(self) -> None:
        if self.suite not in SUITES:
            raise ShoalError(f"--suite {self.suite}: choose mpbench, imb or mpbench,imb")
        if self.emulate and self.cluster:
            raise ShoalError("give either --emulate or --cluster FILE, not both")
        if self.link and not self.emulate:
            raise ShoalError("--link sets the link of emulated devices and needs --emulate SPEC; "
                             "an inventory's links are set in its file")
        if not (self.emulate or self.cluster):
            raise ShoalError("a study needs devices: --emulate 4xminnowboard or --cluster FILE")
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

    @property
    def size_list(self) -> str:
        return self.sizes or (QUICK_SIZES if self.quick else DEFAULT_SIZES)

    def to_manifest(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> "StudyRequest":
        return cls(**data)
