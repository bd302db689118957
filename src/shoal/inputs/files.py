"""The fields of every file shoal reads, declared once (checked by ``shoal.inputs.schema``).

Inventories (``--cluster FILE``), the ``[profiles.NAME]`` and
``[links.NAME]`` tables of profile files and inventories, and Pallex stage
files (their graph checks, which need all stages at once, stay in
``shoal.pallex.stagefile``). Every number is
finite and within its range; unknown fields are refused so that a typo is
never silently ignored. New file kinds (workloads, stage files) add their
model here.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from shoal.errors import ShoalError
from shoal.inputs.grammar import MAX_SECONDS, MAX_SLOTS, SPEED
from shoal.pallex.stagefile import ACTIONS, UNIT_SUFFIXES

MODES = ("emulated", "ssh", "slurm")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
_ADDRESS = re.compile(r"^[A-Za-z0-9._:\[\]-]+$")


class _Table(BaseModel):
    """A TOML table: types as written (no "3" for 3), finite numbers, no unknown keys."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)
    required_hint: ClassVar[str] = ""


def _node_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError("needs a name of lower-case letters, digits and '-', at most 32 "
                         f"characters, got {value!r}")
    return value


def _address(value: str) -> str:
    if not _ADDRESS.match(value) or value.startswith("-"):
        raise ValueError(f"is not a host name or address: {value!r}; give one such as "
                         "minnow1 or 192.168.1.11")
    return value


def _power_spec(value: str) -> str:
    from shoal.power import spec

    try:
        spec.parse(value)
    except ShoalError as exc:  # its message says what is wrong and the syntax
        raise ValueError(str(exc)) from None
    return value


Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]
Text = Annotated[str, Field(min_length=1)]


class ClusterTable(_Table):
    mode: Literal["emulated", "ssh", "slurm"] = "ssh"
    link: Optional[Text] = None
    host_speed: Annotated[float, Field(ge=SPEED.lo, le=SPEED.hi)] = 1.0
    name: Optional[Text] = None


class NodeTable(_Table):
    required_hint: ClassVar[str] = "every node needs a name and a profile"
    name: Annotated[str, AfterValidator(_node_name)]
    address: Optional[Annotated[str, AfterValidator(_address)]] = None
    slots: Optional[Annotated[int, Field(ge=1, le=MAX_SLOTS)]] = None
    profile: Text
    power: Annotated[str, AfterValidator(_power_spec)] = "model"
    link: Optional[Text] = None


class InventoryFile(_Table):
    required_hint: ClassVar[str] = "an inventory needs at least one [[nodes]] table"
    cluster: ClusterTable = ClusterTable()
    nodes: Annotated[list[NodeTable], Field(min_length=1)]
    # Checked entry by entry by ProfileTable and LinkTable, where they merge with the built-ins.
    profiles: dict[str, dict[str, Any]] = {}
    links: dict[str, dict[str, Any]] = {}
    # [switches.NAME]: the switch, access point or gateway a link names; its watts are
    # charged once to every configuration of the cluster (checked by SwitchTable).
    switches: dict[str, dict[str, Any]] = {}


class PerTestTable(_Table):
    """``[profiles.NAME.per_test]``: watts measured under each benchmark (test = W), with its source."""

    average_W: dict[str, NonNegative] = {}
    max_W: dict[str, NonNegative] = {}
    min_W: dict[str, NonNegative] = {}
    source: str = ""


class ProfileTable(_Table):
    """One ``[profiles.NAME]`` table; ``FIELD_source`` keys say where a number came from."""

    model_config = ConfigDict(extra="allow")
    required_hint: ClassVar[str] = "every profile needs cores, speed, idle_W and busy_W"
    cores: Annotated[int, Field(ge=1, le=MAX_SLOTS)]
    speed: Positive
    idle_W: NonNegative
    busy_W: NonNegative
    link: Text = "gigabit"
    description: str = ""
    clock_Hz: Optional[Positive] = None
    max_W: Optional[NonNegative] = None
    pstates: list[tuple[Positive, NonNegative]] = []
    # Whether the CPU has AES instructions (None: not known); the edge workload
    # runs software AES on devices without them.
    aes_instructions: Optional[bool] = None
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
        return self

    @property
    def sources(self) -> dict[str, str]:
        return {k.removesuffix("_source"): v for k, v in (self.model_extra or {}).items()}


class LinkTable(_Table):
    """One ``[links.NAME]`` table; each number may name its source (``rate_source``, ...)."""

    required_hint: ClassVar[str] = "every link needs rate_bps (bits per second)"
    rate_bps: Positive
    latency_s: NonNegative = 0.0
    jitter_s: NonNegative = 0.0
    loss: Annotated[float, Field(ge=0, lt=1)] = 0.0
    source: str = ""
    switch: str = ""
    rate_source: str = ""
    latency_source: str = ""
    jitter_source: str = ""
    loss_source: str = ""
    switch_source: str = ""

    @model_validator(mode="after")
    def _jitter(self) -> "LinkTable":
        if self.jitter_s > self.latency_s:
            raise ValueError(f"needs jitter_s <= latency_s (a message cannot arrive before it is "
                             f"sent), got {self.jitter_s:g} and {self.latency_s:g}")
        return self

    @property
    def sources(self) -> dict[str, str]:
        return {k.removesuffix("_source"): getattr(self, k) for k in type(self).model_fields
                if k.endswith("_source") and getattr(self, k)}

    def values(self) -> dict[str, Any]:
        """The link's own fields, without the sources."""
        return {k: getattr(self, k) for k in type(self).model_fields if not k.endswith("_source")}


class SwitchTable(_Table):
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


# -- Pallex stage files -------------------------------------------------------------
_STAGE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _stage_name(value: str) -> str:
    if not _STAGE_NAME.match(value):
        raise ValueError(f"{value!r}: use only letters, digits, '_', '.' and '-' in names")
    return value


def _unit(value: str) -> str:
    if not value.endswith(UNIT_SUFFIXES) or "/" in value:
        raise ValueError(f"{value!r} is not a unit name (use one ending in {', '.join(UNIT_SUFFIXES)})")
    return value


def _argv(value: Union[str, list[str]]) -> tuple[str, ...]:
    argv = shlex.split(value) if isinstance(value, str) else value
    if not argv:
        raise ValueError('is empty; give the program and its arguments, e.g. ["/path/to/program"]')
    return tuple(argv)


Unit = Annotated[str, AfterValidator(_unit)]


class AppTable(_Table):
    required_hint = 'the [app] table needs a name, e.g. [app] name = "icc"'
    name: Annotated[str, AfterValidator(_stage_name)]
    description: str = ""
    deadline_s: Annotated[float, Field(gt=0, le=MAX_SECONDS)] = 120.0
    config: Text = "EU"
    on_success: Literal[ACTIONS] = "poweroff-force"  # type: ignore[valid-type]
    on_failure: Literal[ACTIONS] = "poweroff-force"  # type: ignore[valid-type]


class StageTable(_Table):
    required_hint = 'every stage needs a command, e.g. command = ["/path/to/program"]'
    command: Annotated[Union[str, list[Text]], AfterValidator(_argv)]
    needs: list[Text] = []
    requires_units: list[Unit] = []
    wants_units: list[Unit] = []
    description: str = ""


class EdgeTable(_Table):
    required_hint = "every [[edges]] table needs from, to and bytes"
    src: Text = Field(alias="from")
    dst: Text = Field(alias="to")
    bytes: Annotated[int, Field(ge=0)] = 0


class StageFile(_Table):
    required_hint = 'a stage file needs an [app] table and at least one [stages.NAME]'
    app: AppTable
    stages: Annotated[dict[Annotated[str, AfterValidator(_stage_name)], StageTable], Field(min_length=1)]
    edges: list[EdgeTable] = []
    params: dict[str, Union[str, int, float]] = {}
