"""The fields of ``[profiles.NAME]``, ``[links.NAME]`` and ``[switches.NAME]`` tables, declared
once beside the profiles they become (checked by ``shoal.inputs.schema``).

Read from shoal/data/profiles.toml, users' profile files and inventories. Every number is
finite and within its range; unknown fields are refused, so a typo is never silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from pydantic import ConfigDict, Field, model_validator

from shoal.inputs.grammar import MAX_SLOTS
from shoal.inputs.schema import NonNegative, Positive, Table, Text


class PerTestTable(Table):
    """``[profiles.NAME.per_test]``: watts measured under each benchmark (test = W), with its source."""

    average_W: dict[str, NonNegative] = {}
    max_W: dict[str, NonNegative] = {}
    min_W: dict[str, NonNegative] = {}
    source: str = ""


class PStateTable(Table):
    """One ``[[profiles.NAME.pstates]]`` table: a clock of the device, every number sourced."""

    required_hint: ClassVar[str] = ("every P-state needs Hz, relative_speed (1 at the profile's "
                                    "clock_Hz), idle_W, busy_W and the source of its numbers")
    Hz: Positive
    relative_speed: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)]
    idle_W: NonNegative
    busy_W: NonNegative
    source: Annotated[str, Field(min_length=1)]

    @model_validator(mode="after")
    def _watts(self) -> "PStateTable":
        if self.busy_W < self.idle_W:
            raise ValueError(f"needs idle_W <= busy_W, got {self.idle_W:g} and {self.busy_W:g}")
        return self


class ProfileTable(Table):
    """One ``[profiles.NAME]`` table; ``FIELD_source`` keys say where a number came from."""

    model_config = ConfigDict(extra="allow")
    required_hint: ClassVar[str] = ("every profile needs cores, idle_W, busy_W and a speed (speed, "
                                    "or kernel_unit_s with speed_kernel)")
    cores: Annotated[int, Field(ge=1, le=MAX_SLOTS)]
    # One core's speed in reference cores on ``speed_kernel`` ("mix": the reference kernels'
    # geometric mean), or "host": as fast as the core of the machine that emulates it.
    speed: Optional[Union[Positive, Literal["host"]]] = None
    speed_kernel: Optional[Text] = None
    # Or the time one device core takes per unit of ``speed_kernel`` (s per pixel, frame,
    # alignment, op): shoal converts it with the reference core's time on that kernel.
    kernel_unit_s: Optional[Positive] = None
    idle_W: NonNegative
    busy_W: NonNegative
    link: Text = "gigabit"
    description: str = ""
    clock_Hz: Optional[Positive] = None
    max_W: Optional[NonNegative] = None
    # The clocks the CPU runs at (shoal.profiles.clock): at most one state per frequency.
    pstates: list[PStateTable] = []
    # Whether the CPU has AES instructions (None: not known); the edge workload
    # runs software AES on devices without them.
    aes_instructions: Optional[bool] = None
    # Memory of one device (bytes): an emulated device's processes are held to it (a memory
    # cgroup) and a run whose ranks would not fit in it is refused before it starts.
    memory_B: Optional[Positive] = None
    per_test: Optional[PerTestTable] = None

    @model_validator(mode="after")
    def _sources_and_watts(self) -> "ProfileTable":
        for key, value in (self.model_extra or {}).items():
            if not key.endswith("_source"):
                raise ValueError(f"unknown field {key!r} (known: "
                                 f"{', '.join(sorted(type(self).model_fields))}, FIELD_source)")
            if not isinstance(value, str):
                raise ValueError(f"{key} must be text naming where the number came from")
        if self.busy_W < self.idle_W:
            raise ValueError(f"needs idle_W <= busy_W, got {self.idle_W:g} and {self.busy_W:g}")
        self._check_speed()
        self._check_pstates()
        return self

    def _check_pstates(self) -> None:
        from shoal.profiles.clock import MATCH

        frequencies = sorted(s.Hz for s in self.pstates)
        for low, high in zip(frequencies, frequencies[1:]):
            if high - low <= MATCH * high:
                raise ValueError(f"pstates: two states at {low:g} and {high:g} Hz; give each clock once")
        at_clock = [s for s in self.pstates if self.clock_Hz and abs(s.Hz - self.clock_Hz) <= MATCH * s.Hz]
        if at_clock and at_clock[0].relative_speed != 1:
            raise ValueError(f"pstates: the state at clock_Hz ({self.clock_Hz:g}) is the profile's own "
                             f"speed: its relative_speed must be 1, got {at_clock[0].relative_speed:g}")

    def _check_speed(self) -> None:
        from shoal.profiles import MIX, reference_kernels

        kernels = reference_kernels()
        names = ", ".join([*kernels, MIX])
        if self.speed is None and self.kernel_unit_s is None:
            raise ValueError("needs a speed: speed = N (reference cores; speed_kernel names the kernel "
                             "it was measured on, default mix), speed = \"host\", or kernel_unit_s = "
                             f"SECONDS per unit with speed_kernel = one of {', '.join(kernels)}")
        if self.speed is not None and self.kernel_unit_s is not None:
            raise ValueError("give speed or kernel_unit_s, not both")
        if self.speed == "host" and self.speed_kernel is not None:
            raise ValueError('speed = "host" is this machine\'s own core: drop speed_kernel')
        if self.kernel_unit_s is not None and self.speed_kernel in (None, MIX):
            raise ValueError(f"kernel_unit_s needs speed_kernel naming the kernel it was timed on "
                             f"(one of {', '.join(kernels)})")
        if self.speed_kernel is not None and self.speed_kernel not in (*kernels, MIX):
            raise ValueError(f"speed_kernel {self.speed_kernel!r}: use one of {names}")

    def resolved_speed(self) -> tuple[float, str]:
        """(speed in reference cores, or of this host's core for "host"; the kernel it is on)."""
        from shoal.profiles import HOST, MIX, reference_kernels

        if self.speed == "host":
            return 1.0, HOST
        if self.kernel_unit_s is not None:
            kernel = reference_kernels()[self.speed_kernel]
            return kernel.unit_s / self.kernel_unit_s, self.speed_kernel
        return float(self.speed), self.speed_kernel or MIX

    @property
    def sources(self) -> dict[str, str]:
        return {k.removesuffix("_source"): v for k, v in (self.model_extra or {}).items()}


class LinkTable(Table):
    """One ``[links.NAME]`` table; each number may name its source (``rate_source``, ...)."""

    required_hint: ClassVar[str] = "every link needs rate_bps (bits per second)"
    rate_bps: Positive
    latency_s: NonNegative = 0.0
    jitter_s: NonNegative = 0.0
    loss: Annotated[float, Field(ge=0, lt=1)] = 0.0
    source: str = ""
    switch: str = ""
    shared: bool = False
    grant_interval_s: NonNegative = 0.0
    device_rate_bps: NonNegative = 0.0
    upstream_channel_bps: NonNegative = 0.0
    device_buffer_B: NonNegative = 0.0
    # A device's service flow's traffic priority (DOCSIS 0-7, higher granted first; None: none).
    device_priority: Optional[Annotated[int, Field(ge=0, le=7)]] = None
    rate_source: str = ""
    latency_source: str = ""
    jitter_source: str = ""
    loss_source: str = ""
    switch_source: str = ""
    shared_source: str = ""
    grant_interval_source: str = ""
    device_rate_source: str = ""
    device_buffer_source: str = ""
    upstream_channel_source: str = ""
    device_priority_source: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> "LinkTable":
        if self.jitter_s > self.latency_s:
            raise ValueError(f"needs jitter_s <= latency_s (a message cannot arrive before it is "
                             f"sent), got {self.jitter_s:g} and {self.latency_s:g}")
        if self.device_rate_bps and not self.shared:
            raise ValueError("device_rate_bps caps one device on a shared medium: give shared = true "
                             "or leave it out (a port of its own runs at rate_bps)")
        if self.device_buffer_B and not self.device_rate_bps:
            raise ValueError("device_buffer_B is the buffer of a capped device on a shared medium: "
                             "give device_rate_bps too, or leave it out")
        if self.device_priority is not None and not self.shared:
            raise ValueError("device_priority orders the devices of a shared medium: give shared = "
                             "true or leave it out")
        if self.upstream_channel_bps and not self.shared:
            raise ValueError("upstream_channel_bps is the upstream channel of a shared medium: give "
                             "shared = true or leave it out (a port of its own runs at rate_bps)")
        channel = self.upstream_channel_bps or self.rate_bps
        name = "upstream_channel_bps" if self.upstream_channel_bps else "rate_bps"
        if self.device_rate_bps > channel:
            raise ValueError(f"needs device_rate_bps <= {name} (one device cannot send faster than "
                             f"the channel), got {self.device_rate_bps:g} and {channel:g}")
        return self

    @property
    def sources(self) -> dict[str, str]:
        return {k.removesuffix("_source"): getattr(self, k) for k in type(self).model_fields
                if k.endswith("_source") and getattr(self, k)}

    def values(self) -> dict[str, Any]:
        """The link's own fields, without the sources."""
        return {k: getattr(self, k) for k in type(self).model_fields if not k.endswith("_source")}


def own_or_common_sources(table: Table, own: dict[str, str]) -> dict[str, str]:
    """Each field's source (``own``: field -> the name of its own ``*_source``), else the
    table's ``source``; fields with neither are left out."""
    return {field: v for field, name in own.items() if (v := getattr(table, name) or table.source)}


class OsNoiseTable(Table):
    """One ``[os_noise.NAME]`` table: what a distribution does beside the ranks on a device."""

    required_hint: ClassVar[str] = "every OS noise profile needs forks_per_s and cpu_share"
    forks_per_s: NonNegative
    cpu_share: Annotated[float, Field(ge=0, lt=1)]
    description: str = ""
    source: str = ""
    forks_source: str = ""
    cpu_source: str = ""

    @property
    def sources(self) -> dict[str, str]:
        return own_or_common_sources(self, {"forks_per_s": "forks_source", "cpu_share": "cpu_source"})


class StorageTable(Table):
    """One ``[storage.NAME]`` table: a file server at the cluster's head that a job's rank 0
    writes its output to, a block at a time, each acknowledged once committed."""

    required_hint: ClassVar[str] = "every storage needs write_Bps and block_B"
    write_Bps: Annotated[float, Field(gt=0)]
    block_B: Annotated[int, Field(ge=512, le=64 * 2**20)]
    description: str = ""
    source: str = ""
    write_source: str = ""
    block_source: str = ""

    @property
    def sources(self) -> dict[str, str]:
        return own_or_common_sources(self, {"write_Bps": "write_source", "block_B": "block_source"})


class BackgroundTable(Table):
    """One ``[backgrounds.NAME]`` table: what a device keeps doing beside the ranks (a set-top
    box decoding a programme: CPU work in a frame rhythm and a stream from the head-end)."""

    required_hint: ClassVar[str] = ("every background needs fps, frame_work_s, stream_bps and "
                                    "delivery")
    # 0 only for an upload with no CPU work: nothing on the device works in a frame rhythm.
    fps: Annotated[float, Field(ge=0, le=1000)]
    # Reference-core seconds of CPU per frame (the kernels' unit, [kernels.NAME]): its share
    # of a device core follows from the device's speed.
    frame_work_s: NonNegative
    stream_bps: NonNegative
    # multicast: one copy per programme down the plant, every box tuned to it; unicast: one
    # stream per box (video on demand); qam: the programme rides carriers of its own beside
    # the data channel (seed 002's MPEG-2 QAM), so only the CPU work is emulated; upload: the
    # device sends the stream up its link to the head-end (a subscriber's upload).
    delivery: Literal["multicast", "unicast", "qam", "upload"]
    description: str = ""
    source: str = ""
    fps_source: str = ""
    frame_work_source: str = ""
    stream_source: str = ""
    delivery_source: str = ""

    @model_validator(mode="after")
    def _rhythm(self) -> "BackgroundTable":
        if self.fps == 0 and (self.frame_work_s > 0 or self.delivery != "upload"):
            raise ValueError("needs fps above 0: a decoder works and takes its stream in frames "
                             "(only an upload with frame_work_s = 0 may have fps = 0)")
        return self

    @property
    def sources(self) -> dict[str, str]:
        return own_or_common_sources(self, {"fps": "fps_source", "frame_work_s": "frame_work_source",
                                            "stream_bps": "stream_source", "delivery": "delivery_source"})


class SwitchTable(Table):
    """One ``[switches.NAME]`` table: what a star of devices shares (counted once)."""

    required_hint: ClassVar[str] = "every switch needs idle_W and busy_W (watts)"
    idle_W: NonNegative
    busy_W: NonNegative
    description: str = ""
    idle_source: str = ""
    busy_source: str = ""

    @model_validator(mode="after")
    def _watts(self) -> "SwitchTable":
        if self.busy_W < self.idle_W:
            raise ValueError(f"needs idle_W <= busy_W, got {self.idle_W:g} and {self.busy_W:g}")
        return self

    @property
    def sources(self) -> dict[str, str]:
        return {k.removesuffix("_source"): getattr(self, k) for k in ("idle_source", "busy_source")
                if getattr(self, k)}
