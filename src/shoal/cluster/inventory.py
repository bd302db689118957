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

from shoal import profiles as _profiles
from shoal.cluster import qos, storage
from shoal.errors import ShoalError

MODES = ("emulated", "ssh", "slurm")
# The most devices of one emulated cluster: what the link forwarders know of the devices behind
# other hosts (REMOTE_TABLE in shoal-linkemu); one host holds far fewer (cluster.capacity).
MAX_EMULATED = 32767


@dataclass(frozen=True)
class Node:
    """One device of the cluster."""

    name: str
    profile: _profiles.DeviceProfile
    link: _profiles.LinkType
    slots: int
    address: str
    # The distribution's background activity an emulated device carries (None: none).
    os_noise: _profiles.OsNoise | None = None
    # What it keeps doing beside the ranks (a box decoding a programme; None: nothing).
    background: _profiles.Background | None = None
    # Its upstream service flow on a shared plant, where --qos set one (bit/s; None: the link's).
    qos_bps: float | None = None
    # The file server its job's output goes to when it holds rank 0 (None: kept in memory).
    storage: _profiles.Storage | None = None

    def describe(self) -> dict[str, Any]:
        described = {"name": self.name, "address": self.address, "slots": self.slots,
                     "profile": self.profile.name, "link": self.link.name}
        if self.os_noise is not None:
            described["os_noise"] = self.os_noise.describe()
        if self.background is not None:
            described["background"] = self.background.describe()
        if self.qos_bps is not None:
            described["qos_bps"] = self.qos_bps
        if self.storage is not None:
            described["storage"] = self.storage.describe()
        return described


@dataclass
class Inventory:
    """Nodes in order, the mode that reaches them, and where they came from."""

    nodes: list[Node]
    mode: str = "emulated"
    source: str = "--emulate"
    # This host's core in reference cores, as given (None: measured, shoal.cluster.hostspeed).
    host_speed: float | None = None
    profiles: dict[str, _profiles.DeviceProfile] = field(default_factory=dict)
    # The inventory's own [switches.NAME] tables (built-in and user ones are found by name).
    switch_tables: dict[str, dict] = field(default_factory=dict)

    def switches(self) -> list[_profiles.DeviceProfile]:
        """The switches (access points, gateways) the nodes' links name, each once."""
        seen: dict[str, _profiles.DeviceProfile] = {}
        for node in self.nodes:
            switch = _profiles.switch_of(node.link, {"switches": self.switch_tables})
            if switch is not None:
                seen.setdefault(switch.name, switch)
        return list(seen.values())

    @property
    def runs_here(self) -> bool:
        """Whether every node's ranks run on this machine (emulated devices)."""
        return self.mode == "emulated"

    def describe(self) -> dict[str, Any]:
        used = {n.profile.name: n.profile for n in self.nodes}
        links = {n.link.name: n.link for n in self.nodes}
        return {"mode": self.mode, "source": self.source,
                "nodes": [n.describe() for n in self.nodes],
                "profiles": {k: v.describe() for k, v in used.items()},
                "links": {k: v.describe() for k, v in links.items()}}


def load(path: str | Path) -> Inventory:
    """Read and validate an inventory file."""
    from shoal.inputs import schema

    data, text = schema.read_toml(path, "inventory", "--cluster")
    return parse(data, str(path), text)


def parse(data: dict, where: str = "inventory", text: str = "") -> Inventory:
    """Validate an inventory already parsed from TOML (``text`` locates errors)."""
    from shoal.cluster.inventory_file import InventoryFile
    from shoal.inputs import schema

    declared = schema.validate(InventoryFile, data, where, text)
    known_profiles, known_links = _profiles.load_all(
        {"profiles": declared.profiles, "links": declared.links, "switches": declared.switches}, where, text)
    default_link = declared.cluster.link
    if default_link is not None and default_link not in known_links:
        raise schema.locate(where, text, ("cluster", "link"), f"unknown link type {default_link!r} "
                            f"(known: {', '.join(sorted(known_links))})")
    nodes: list[Node] = []
    seen: set[str] = set()
    for i, raw in enumerate(declared.nodes):
        if raw.name in seen:
            raise schema.locate(where, text, ("nodes", i, "name"), f"node {raw.name!r} is listed twice; give each node its own name")
        seen.add(raw.name)
        if raw.profile not in known_profiles:
            raise schema.locate(where, text, ("nodes", i, "profile"),
                                f"unknown profile {raw.profile!r} (known: "
                                f"{', '.join(sorted(known_profiles))}; add your own under [profiles])")
        profile = known_profiles[raw.profile]
        link_name = raw.link or default_link or profile.link
        if link_name not in known_links:
            raise schema.locate(where, text, ("nodes", i, "link"), f"unknown link type {link_name!r} "
                                f"(known: {', '.join(sorted(known_links))})")
        nodes.append(Node(raw.name, profile, known_links[link_name], raw.slots or profile.cores,
                          raw.address or raw.name))
    return Inventory(nodes, declared.cluster.mode, where, declared.cluster.host_speed, known_profiles,
                     dict(declared.switches))


# COUNTxPROFILE, then @-suffixes in any order: a clock (@500M, @powersave: the devices held
# at one P-state, shoal.profiles.clock), an OS noise profile (@fedora: [os_noise.NAME]) and a
# background (@mpeg2-sd: [backgrounds.NAME]); @qos=RATE and @storage=NAME name their kind.
_TERM = re.compile(r"^(\d+)x([a-z0-9][a-z0-9-]*)((?:@[^@+]+)*)$")


def _suffixes(spec: str, suffixes: str, known: dict[str, _profiles.OsNoise],
              backgrounds: dict[str, _profiles.Background] | None = None
              ) -> tuple[str | None, _profiles.OsNoise | None, _profiles.Background | None,
                         tuple[float, int | None] | None, _profiles.Storage | None]:
    """A term's clock (its text), OS noise profile (of ``known``), background (of
    ``backgrounds``), upstream service flow (``@qos=RATE[/PRIORITY]``: bit/s, priority) and storage
    (``@storage=NAME``), each at most once."""
    from shoal.profiles import clock as clocks

    clock, noise, background, flow, store = None, None, None, None, None
    backgrounds = backgrounds or {}
    for word in filter(None, suffixes.split("@")):
        if word.startswith(storage.SUFFIX):
            if store is not None:
                raise ShoalError(f"--emulate {spec}: @{word}: a term carries one storage")
            store = storage.known(word[len(storage.SUFFIX):], spec)
            continue
        if word.startswith(qos.SUFFIX):
            if flow is not None:
                raise ShoalError(f"--emulate {spec}: @{word}: a term carries one service flow")
            flow = qos.flow(word[len(qos.SUFFIX):])
            continue
        if word in backgrounds:
            if background is not None:
                raise ShoalError(f"--emulate {spec}: @{word}: a term carries one background")
            background = backgrounds[word]
            continue
        if word in known:
            if noise is not None:
                raise ShoalError(f"--emulate {spec}: @{word}: a term carries one OS noise profile")
            noise = known[word]
            continue
        try:
            clocks.parse(word)
        except ShoalError:
            raise ShoalError(f"--emulate {spec}: @{word} is neither a clock (e.g. @500M, @powersave), "
                             f"an OS noise profile (known: {', '.join(sorted(known))}) nor a "
                             f"background (known: {', '.join(sorted(backgrounds))}); add "
                             f"[os_noise.{word}] or [backgrounds.{word}] to a profiles file") from None
        if clock is not None:
            raise ShoalError(f"--emulate {spec}: @{word}: a term carries one clock")
        clock = word
    return clock, noise, background, flow, store


def from_emulate(spec: str, link: str | None = None, host_speed: float | None = None) -> Inventory:
    """Build an emulated inventory from ``4xminnowboard+1xnuc`` (``link`` overrides every node);
    ``4xminnowboard@500M`` (or ``@powersave``) holds those devices at one of their P-states."""
    from shoal.profiles import clock as clocks

    known_profiles, known_links = _profiles.load_all()
    known_noise = _profiles.load_os_noise() if "@" in spec else {}
    known_backgrounds = _profiles.load_backgrounds() if "@" in spec else {}
    if link is not None and link not in known_links:
        raise ShoalError(f"--link {link}: unknown link type (known: {', '.join(sorted(known_links))})")
    nodes: list[Node] = []
    counters: dict[str, int] = {}
    for term in spec.replace(" ", "").split("+"):
        match = _TERM.match(term)
        if not match:
            raise ShoalError(f"--emulate {spec}: {term!r} is not COUNTxPROFILE[@CLOCK][@OS][@BACKGROUND] "
                             "(e.g. 4xminnowboard, 4xminnowboard+1xnuc, 4xminnowboard@500M, "
                             "2xminnowboard@fedora or 8xstb@mpeg2-sd)")
        count, name = int(match.group(1)), match.group(2)
        clock, noise, background, flow, store = _suffixes(spec, match.group(3), known_noise,
                                                          known_backgrounds)
        if name not in known_profiles:
            raise ShoalError(f"--emulate {spec}: unknown profile {name!r} "
                             f"(known: {', '.join(sorted(known_profiles))})")
        if count < 1:
            raise ShoalError(f"--emulate {spec}: a count must be at least 1")
        if count > MAX_EMULATED - len(nodes):
            raise ShoalError(f"--emulate {spec}: more than {MAX_EMULATED} devices; "
                             f"at most {MAX_EMULATED} fit one emulated cluster")
        profile = known_profiles[name]
        if clock is not None:
            profile = clocks.at_clock(profile, clocks.parse(clock),
                                      "--governor" if clock in clocks.GOVERNORS else "--freq")
            known_profiles = {**known_profiles, profile.name: profile}
            name = profile.name
        device_link = known_links[link or profile.link]
        if flow is not None:
            device_link = qos.apply(device_link, flow[0], f"--emulate {spec}", flow[1])
        for _ in range(count):
            counters[name] = counters.get(name, 0) + 1
            node_name = f"{name}{counters[name]}"
            nodes.append(Node(node_name, profile, device_link, profile.cores, node_name, noise,
                              background, flow[0] if flow else None, store))
    if any(node.background for node in nodes):
        from shoal.cluster import background as backgrounds

        backgrounds.check(nodes, f"--emulate {spec}")
    return Inventory(nodes, "emulated", f"--emulate {spec}", host_speed, known_profiles)
