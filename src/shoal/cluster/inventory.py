"""The cluster inventory: which nodes, how they are reached, what they are.

An inventory is a TOML file (documented with examples in docs/cluster.md)::

    [cluster]
    mode = "ssh"                 # "ssh" (real hosts), "emulated" or "slurm"
    link = "ethernet-100m"       # default link type of every node

    [[nodes]]
    name = "minnow1"
    address = "192.168.1.11"     # what ssh reaches (defaults to name)
    slots = 2
    profile = "minnowboard"
    power = "model"              # power source for this node

The same inventory drives emulation (``mode = "emulated"``), where each node
becomes a network namespace shaped like its profile and link. The shorthand
``4xminnowboard+1xnuc`` builds an emulated inventory without a file.
Errors name the file, the line and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.cluster import profiles as _profiles
from shoal.cluster.tomlpos import line_of
from shoal.errors import ShoalError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

MODES = ("emulated", "ssh", "slurm")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
_ADDRESS = re.compile(r"^[A-Za-z0-9._:\[\]-]+$")


@dataclass(frozen=True)
class Node:
    """One device of the cluster."""

    name: str
    profile: _profiles.DeviceProfile
    link: _profiles.LinkType
    slots: int
    address: str
    power: str = "model"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "slots": self.slots,
                "profile": self.profile.name, "link": self.link.name, "power": self.power}


@dataclass
class Inventory:
    """Nodes in order, the mode that reaches them, and where they came from."""

    nodes: list[Node]
    mode: str = "emulated"
    source: str = "--emulate"
    host_speed: float = 1.0
    profiles: dict[str, _profiles.DeviceProfile] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        used = {n.profile.name: n.profile for n in self.nodes}
        links = {n.link.name: n.link for n in self.nodes}
        return {"mode": self.mode, "source": self.source,
                "nodes": [n.describe() for n in self.nodes],
                "profiles": {k: v.describe() for k, v in used.items()},
                "links": {k: v.describe() for k, v in links.items()}}


class _Where:
    """Formats 'file:line: field: problem' for a path inside the document."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text

    def error(self, keys: tuple, message: str) -> ShoalError:
        line = line_of(self.text, keys)
        dotted = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".")
        place = f"{self.path}:{line}" if line else self.path
        return ShoalError(f"{place}: {dotted}: {message}")


_NODE_FIELDS = {"name", "address", "slots", "profile", "power", "link"}
_CLUSTER_FIELDS = {"mode", "link", "host_speed", "name"}


def load(path: str | Path) -> Inventory:
    """Read and validate an inventory file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ShoalError(f"cannot read inventory {path}: {exc.strerror}; "
                         "give an existing TOML file to --cluster") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ShoalError(f"{path}: not valid TOML: {exc}") from exc
    return parse(data, str(path), text)


def parse(data: dict, where: str = "inventory", text: str = "") -> Inventory:
    """Validate an inventory already parsed from TOML (``text`` locates errors)."""
    at = _Where(where, text)
    unknown = set(data) - {"cluster", "nodes", "links", "profiles"}
    if unknown:
        key = sorted(unknown)[0]
        raise at.error((key,), "unknown table (known: cluster, nodes, links, profiles)")
    cluster = data.get("cluster", {})
    if not isinstance(cluster, dict):
        raise at.error(("cluster",), "must be a table")
    for key in cluster:
        if key not in _CLUSTER_FIELDS:
            raise at.error(("cluster", key), f"unknown field (known: {', '.join(sorted(_CLUSTER_FIELDS))})")
    mode = cluster.get("mode", "ssh")
    if mode not in MODES:
        raise at.error(("cluster", "mode"), f"must be one of {', '.join(MODES)}, got {mode!r}")
    host_speed = cluster.get("host_speed", 1.0)
    if isinstance(host_speed, bool) or not isinstance(host_speed, (int, float)) or host_speed <= 0:
        raise at.error(("cluster", "host_speed"), f"must be a number above 0, got {host_speed!r}")
    extra = {"profiles": data.get("profiles", {}), "links": data.get("links", {})}
    for table in ("profiles", "links"):
        if not isinstance(extra[table], dict):
            raise at.error((table,), "must be a table of named tables")
    try:
        known_profiles, known_links = _profiles._load_all(extra, where)
    except ShoalError as exc:
        # Point at the offending table when the message names one.
        match = re.search(r"(profile|link) '([^']+)'", str(exc))
        if match and text:
            table = "profiles" if match.group(1) == "profile" else "links"
            line = line_of(text, (table, match.group(2)))
            if line:
                raise ShoalError(str(exc).replace(f"{where}:", f"{where}:{line}:", 1)) from None
        raise
    default_link = cluster.get("link")
    if default_link is not None and default_link not in known_links:
        raise at.error(("cluster", "link"), f"unknown link type {default_link!r} "
                       f"(known: {', '.join(sorted(known_links))})")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise at.error(("nodes",), "an inventory needs at least one [[nodes]] table")
    nodes: list[Node] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict):
            raise at.error(("nodes", i), "each node must be a table")
        for key in raw:
            if key not in _NODE_FIELDS:
                raise at.error(("nodes", i, key),
                               f"unknown field (known: {', '.join(sorted(_NODE_FIELDS))})")
        name = raw.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise at.error(("nodes", i, "name"), "needs a name of lower-case letters, digits "
                           f"and '-', at most 32 characters, got {name!r}")
        if name in seen:
            raise at.error(("nodes", i, "name"), f"node {name!r} is listed twice")
        seen.add(name)
        address = raw.get("address", name)
        if not isinstance(address, str) or not _ADDRESS.match(address) or address.startswith("-"):
            raise at.error(("nodes", i, "address"), f"is not a host name or address: {address!r}")
        profile_name = raw.get("profile")
        if profile_name is None:
            raise at.error(("nodes", i), f"node {name!r} needs a profile "
                           f"(known: {', '.join(sorted(known_profiles))})")
        if profile_name not in known_profiles:
            raise at.error(("nodes", i, "profile"), f"unknown profile {profile_name!r} (known: "
                           f"{', '.join(sorted(known_profiles))}; add your own under [profiles])")
        profile = known_profiles[profile_name]
        slots = raw.get("slots", profile.cores)
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise at.error(("nodes", i, "slots"), f"must be a whole number >= 1, got {slots!r}")
        link_name = raw.get("link", default_link or profile.link)
        if link_name not in known_links:
            raise at.error(("nodes", i, "link"), f"unknown link type {link_name!r} "
                           f"(known: {', '.join(sorted(known_links))})")
        power = raw.get("power", "model")
        if not isinstance(power, str) or not power:
            raise at.error(("nodes", i, "power"), f"must name a power source, got {power!r}")
        nodes.append(Node(name, profile, known_links[link_name], slots, address, power))
    return Inventory(nodes, mode, where, float(host_speed), known_profiles)


_TERM = re.compile(r"^(\d+)x([a-z0-9][a-z0-9-]*)$")


def from_emulate(spec: str, link: str | None = None, host_speed: float = 1.0) -> Inventory:
    """Build an emulated inventory from ``4xminnowboard+1xnuc`` (``link`` overrides every node)."""
    known_profiles, known_links = _profiles._load_all()
    if link is not None and link not in known_links:
        raise ShoalError(f"--link {link}: unknown link type (known: {', '.join(sorted(known_links))})")
    nodes: list[Node] = []
    counters: dict[str, int] = {}
    for term in spec.replace(" ", "").split("+"):
        match = _TERM.match(term)
        if not match:
            raise ShoalError(f"--emulate {spec}: {term!r} is not COUNTxPROFILE "
                             "(e.g. 4xminnowboard or 4xminnowboard+1xnuc)")
        count, name = int(match.group(1)), match.group(2)
        if name not in known_profiles:
            raise ShoalError(f"--emulate {spec}: unknown profile {name!r} "
                             f"(known: {', '.join(sorted(known_profiles))})")
        if count < 1:
            raise ShoalError(f"--emulate {spec}: a count must be at least 1")
        profile = known_profiles[name]
        for _ in range(count):
            counters[name] = counters.get(name, 0) + 1
            node_name = f"{name}{counters[name]}"
            nodes.append(Node(node_name, profile, known_links[link or profile.link],
                              profile.cores, node_name))
    if len(nodes) > 250:
        raise ShoalError(f"--emulate {spec}: {len(nodes)} devices; at most 250 fit one emulated switch")
    return Inventory(nodes, "emulated", f"--emulate {spec}", host_speed, known_profiles)
