"""The fields of an inventory file (``--cluster FILE``), declared once beside the inventory
they become (checked by ``shoal.inputs.schema``); its ``[profiles]``, ``[links]`` and
``[switches]`` tables are checked by ``shoal.profiles.tables`` where they merge with the
built-ins.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Optional

from pydantic import AfterValidator, Field

from shoal.inputs.grammar import MAX_SLOTS, SPEED
from shoal.inputs.schema import Table, Text

from shoal.cluster.inventory import MODES
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
_ADDRESS = re.compile(r"^[A-Za-z0-9._:\[\]-]+$")


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


def _power_not_read(value: Any) -> None:
    raise ValueError("a node's power source is not read from the inventory; remove the field and "
                     "give --power SOURCE on the command line (it applies to every node)")


class ClusterTable(Table):
    mode: Literal[MODES] = "ssh"  # type: ignore[valid-type]
    link: Optional[Text] = None
    # This host's core in reference cores; leave it out to have it measured.
    host_speed: Optional[Annotated[float, Field(ge=SPEED.lo, le=SPEED.hi)]] = None
    name: Optional[Text] = None


class NodeTable(Table):
    required_hint: ClassVar[str] = "every node needs a name and a profile"
    name: Annotated[str, AfterValidator(_node_name)]
    address: Optional[Annotated[str, AfterValidator(_address)]] = None
    slots: Optional[Annotated[int, Field(ge=1, le=MAX_SLOTS)]] = None
    profile: Text
    link: Optional[Text] = None
    # Refused, not ignored: the command line's --power names every node's source.
    power: Optional[Annotated[Any, AfterValidator(_power_not_read)]] = None


class InventoryFile(Table):
    required_hint: ClassVar[str] = "an inventory needs at least one [[nodes]] table"
    cluster: ClusterTable = ClusterTable()
    nodes: Annotated[list[NodeTable], Field(min_length=1)]
    # Checked entry by entry by ProfileTable and LinkTable, where they merge with the built-ins.
    profiles: dict[str, dict[str, Any]] = {}
    links: dict[str, dict[str, Any]] = {}
    # [switches.NAME]: the switch, access point or gateway a link names; its watts are
    # charged once to every configuration of the cluster (checked by SwitchTable).
    switches: dict[str, dict[str, Any]] = {}
