"""Device profiles (boot phases included), link types and switches: the one home of device
facts, read into typed classes.

Profiles come from ``shoal/data/profiles.toml``; users add or override them
without editing shoal in ``~/.config/shoal/profiles.toml``, in files named by
``SHOAL_PROFILES`` (colon-separated), or in an inventory's ``[profiles]``.
The power model takes ``idle_W``, ``busy_W`` and ``cores`` from here.
"""

from __future__ import annotations

import functools
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from shoal import environment
from shoal.errors import ShoalError

BUILTIN = Path(__file__).resolve().parent.parent / "data" / "profiles.toml"
# A profile's speed_kernel beside the reference kernels' names: their geometric mean, or
# this machine's own core (speed = "host").
MIX = "mix"
HOST = "host"


@dataclass(frozen=True)
class ReferenceKernel:
    """One kernel that defines the reference core: its time per unit of work on that core.

    A device's speed is the reference core's time over the device core's on the same
    kernel, and the host's core is measured on the same kernels (``shoal.cluster.hostspeed``)."""

    name: str
    unit: str
    unit_s: float
    source: str


@functools.lru_cache(maxsize=None)
def reference_kernels() -> dict[str, ReferenceKernel]:
    """The reference core's kernels ([kernels.NAME] of the built-in profiles file)."""
    data = _read(BUILTIN)[0]
    return {name: ReferenceKernel(name, t["unit"], float(t["unit_s"]), t["source"])
            for name, t in (data.get("kernels") or {}).items()}


@dataclass(frozen=True)
class LinkType:
    """A network link: rate per direction (bit/s), one-way delay (s), loss fraction.

    ``latency_s`` is the one-way time of a small message between two devices
    on such links through the switch (each link carries half); ``jitter_s``
    spreads it uniformly by up to that much either way; ``loss`` is the chance
    a frame is lost on one link in one direction. ``sources`` names where each
    number comes from (``source`` covers those without their own).
    """

    name: str
    rate_bps: float
    latency_s: float = 0.0
    loss: float = 0.0
    source: str = ""
    jitter_s: float = 0.0
    sources: dict = field(default_factory=dict, compare=False)
    # The switch (or access point, or gateway) devices on this link share: a
    # DeviceProfile of role "switch" under [switches.NAME].
    switch: str = ""
    # One medium for every device on this link (a cable plant): one upstream channel all
    # devices take turns on and one downstream channel the head-end broadcasts on, each
    # at rate_bps, rather than a port per device.
    shared: bool = False
    # On a shared medium a device with nothing queued asks for a grant and sends at the
    # head-end's next allocation map (MAP) after this interval: it waits 1 to 2 intervals.
    # Part of latency_s (which stays the mean one-way time of a small message).
    grant_interval_s: float = 0.0
    # On a shared medium, the most one device may send upstream (its service flow's maximum
    # sustained rate, set by the operator): it paces its frames at this rate, each taking the
    # channel for its time at rate_bps. 0: a device may use the whole channel.
    device_rate_bps: float = 0.0
    # On a shared medium with a cap, the bytes one device holds until the channel has carried
    # them (its modem's upstream buffer): a frame that finds it full is dropped. 0: the
    # emulator's own queue (200 ms at the cap, at least 256 KiB).
    device_buffer_B: float = 0.0
    # On a shared medium, the upstream channel's rate where it differs from the downstream's
    # (rate_bps): DOCSIS 3.0 bonds more channels down than up. 0: rate_bps both ways.
    upstream_channel_bps: float = 0.0
    # On a shared medium, a device's service flow's traffic priority (DOCSIS: 0-7, the head-end
    # grants higher ones first); None: none set, the channel serves frames as they are ready.
    device_priority: int | None = None

    @property
    def up_channel_bps(self) -> float:
        """The rate of the upstream channel all devices share (a shared medium), else rate_bps."""
        return self.upstream_channel_bps if self.shared and self.upstream_channel_bps else self.rate_bps

    @property
    def upstream_bps(self) -> float:
        """The rate one device sends at: its own cap on a shared medium, else the upstream's."""
        return self.device_rate_bps if self.shared and self.device_rate_bps else self.up_channel_bps

    @property
    def capped(self) -> bool:
        """Whether one device sends below the channel's rate (a shared medium with a cap)."""
        return self.upstream_bps < self.up_channel_bps

    @property
    def grant_wait_s(self) -> float:
        """Mean wait of an idle device for its upstream grant (1.5 MAP intervals)."""
        return 1.5 * self.grant_interval_s

    def describe(self) -> dict[str, Any]:
        return asdict(self)


_PHASES = ("bootloader_s", "kernel_s", "bootloader_kernel_J", "systemd_ready_s", "shutdown_s", "shutdown_J")


@dataclass(frozen=True)
class Userspace:
    """Userspace initialisation of one unit configuration: T_usi (s) and E_usi (J)."""

    name: str
    duration_s: float
    energy_J: float
    source: str = ""

    @property
    def power_W(self) -> float:
        return self.energy_J / self.duration_s


@dataclass(frozen=True)
class BootPhases:
    """Phases of one boot of a device (Pallex, seed 004): bootloader+kernel, userspace per
    unit configuration, forced shutdown; ``units`` say when a unit is ready."""

    device: str
    bootloader_s: float
    kernel_s: float
    bootloader_kernel_J: float
    systemd_ready_s: float
    shutdown_s: float
    shutdown_J: float
    userspace: dict[str, Userspace]
    units: dict[str, float]  # unit -> ready time after the kernel phase (s)
    sources: dict[str, str] = field(default_factory=dict)
    userspace_cpu_share: float = 0.0  # of the device's cores that userspace initialisation keeps busy
    storage_read_Bps: float = 0.0  # read rate of the boot storage (SD card); 0: reads not modelled
    storage_write_Bps: float = 0.0  # its write rate (the card's speed class); 0: not held

    @property
    def bootloader_kernel_s(self) -> float:
        return self.bootloader_s + self.kernel_s

    @property
    def bootloader_kernel_W(self) -> float:
        return self.bootloader_kernel_J / self.bootloader_kernel_s

    def config(self, name: str) -> Userspace:
        if name not in self.userspace:
            raise ShoalError(f"boot profile {self.device!r} has no unit configuration {name!r} "
                             f"(known: {', '.join(sorted(self.userspace))})")
        return self.userspace[name]

    def unit_ready_s(self, unit: str) -> float:
        """When ``unit`` is ready; units the profile does not list are ready with systemd."""
        return self.units.get(unit, self.systemd_ready_s)

    def describe(self) -> dict:
        return {"device": self.device, **{k: getattr(self, k) for k in _PHASES},
                "userspace_cpu_share": self.userspace_cpu_share, "storage_read_Bps": self.storage_read_Bps,
                "storage_write_Bps": self.storage_write_Bps,
                "userspace": {k: {"duration_s": u.duration_s, "energy_J": u.energy_J, "source": u.source}
                              for k, u in self.userspace.items()},
                "units": dict(self.units), "sources": dict(self.sources)}


def boot_from_table(device: str, table: dict, where: str) -> BootPhases:
    """A device's boot phases from one ``[boot.DEVICE]`` table; ``where`` names it in errors."""
    def number(tab: dict, key: str, what: str) -> float:
        value = tab.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ShoalError(f"{where}: boot profile {device!r}: {what} needs a non-negative number "
                             f"{key}, got {value!r}")
        return float(value)

    if not isinstance(table, dict):
        raise ShoalError(f"{where}: boot profile {device!r} must be a table")
    values = {key: number(table, key, "the boot") for key in _PHASES}
    if "userspace_cpu_share" in table:
        values["userspace_cpu_share"] = number(table, "userspace_cpu_share", "the boot")
        if values["userspace_cpu_share"] > 1:
            raise ShoalError(f"{where}: boot profile {device!r}: userspace_cpu_share is a fraction, at most 1")
    for rate in ("storage_read_Bps", "storage_write_Bps"):
        if rate in table:
            values[rate] = number(table, rate, "the boot")
    userspace = {}
    for name, tab in (table.get("userspace") or {}).items():
        duration = number(tab, "duration_s", f"userspace {name!r}")
        if duration <= 0:
            raise ShoalError(f"{where}: boot profile {device!r}: userspace {name!r} duration_s must be above 0")
        userspace[name] = Userspace(name, duration, number(tab, "energy_J", f"userspace {name!r}"),
                                    str(tab.get("source", "")))
    if not userspace:
        raise ShoalError(f"{where}: boot profile {device!r} has no [userspace.CONFIG] table; "
                         "give at least EU's duration_s and energy_J")
    units, sources = {}, {k[: -len("_source")]: str(v) for k, v in table.items() if k.endswith("_source")}
    for unit, tab in (table.get("units") or {}).items():
        units[unit] = number(tab, "ready_s", f"unit {unit!r}")
        sources[f"units.{unit}"] = str(tab.get("source", ""))
    return BootPhases(device=device, userspace=userspace, units=units, sources=sources, **values)


@dataclass(frozen=True)
class PerTestWatts:
    """Watts measured on one device under each benchmark (a paper's table): test -> W."""

    average_W: dict = field(default_factory=dict)
    max_W: dict = field(default_factory=dict)
    min_W: dict = field(default_factory=dict)
    source: str = ""

    def describe(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DeviceProfile:
    """One kind of device: cores, per-core speed relative to the reference core, watts, link.

    ``idle_W`` and ``busy_W`` are the ends of the linear power model
    (P = idle + u (busy - idle), u the CPU utilisation); ``max_W`` the
    highest draw measured; ``per_test`` the per-benchmark table where a
    paper gives one. ``sources`` maps a field name to where its number came from.

    ``role`` is "node" for a device that runs ranks ([profiles.NAME]) and
    "switch" for what a star of devices shares ([switches.NAME]: a switch,
    access point or gateway), counted once in a configuration's power. A
    switch has no cores; its draw barely follows traffic (a store-and-forward
    switch's ASIC and PHYs run whether frames pass or not), so a
    configuration is charged its ``idle_W``, and ``busy_W`` bounds it.
    """

    name: str
    cores: int = 1
    # One core's speed in reference cores on ``speed_kernel`` (a reference kernel's name or
    # MIX); for HOST, in cores of the machine that emulates it.
    speed: float = 1.0
    idle_W: float = 0.0
    busy_W: float = 0.0
    link: str = "gigabit"
    description: str = ""
    clock_Hz: float | None = None
    max_W: float | None = None
    # The clocks the CPU runs at where known (shoal.profiles.clock.PState): Hz, speed relative
    # to ``speed``, idle and busy watts; ``clock.at_clock`` holds the device at one of them.
    pstates: tuple = ()
    # AES instructions in the CPU (None: not known): decides the edge workload's AES.
    aes_instructions: bool | None = None
    # Memory of one device in bytes (None: not known, not limited).
    memory_B: float | None = None
    per_test: PerTestWatts | None = None
    role: str = "node"
    # Boot phases where known ([boot.NAME]): what duty cycling (Pallex) needs.
    boot: BootPhases | None = None
    sources: dict = field(default_factory=dict, compare=False)
    speed_kernel: str = MIX

    def describe(self) -> dict[str, Any]:
        data = asdict(self)
        data["pstates"] = [asdict(p) for p in self.pstates]
        return data


def profile_from_table(name: str, table: dict, where: str, text: str = "") -> DeviceProfile:
    """Build a profile from a TOML table; ``where`` (and ``text``) locate errors."""
    from shoal.inputs import schema
    from shoal.profiles import tables

    checked = schema.validate(tables.ProfileTable, table, where, text, at=("profiles", name))
    values = checked.model_dump(exclude=set(checked.model_extra or {}) | {"kernel_unit_s"})
    values["speed"], values["speed_kernel"] = checked.resolved_speed()
    from shoal.profiles.clock import PState

    values["pstates"] = tuple(PState(**state) for state in values["pstates"])
    if values.get("per_test") is not None:
        values["per_test"] = PerTestWatts(**values["per_test"])
    return DeviceProfile(name=name, sources=checked.sources, **values)


def switch_from_table(name: str, table: dict, where: str, text: str = "") -> DeviceProfile:
    """A ``[switches.NAME]`` table as a profile of role "switch" (no cores, no link of its own)."""
    from shoal.inputs import schema
    from shoal.profiles import tables

    checked = schema.validate(tables.SwitchTable, table, where, text, at=("switches", name))
    return DeviceProfile(name, cores=0, speed=0.0, idle_W=checked.idle_W, busy_W=checked.busy_W,
                         link="", description=checked.description, role="switch",
                         sources=checked.sources)


def link_from_table(name: str, table: dict, where: str, text: str = "") -> LinkType:
    from shoal.inputs import schema
    from shoal.profiles import tables

    checked = schema.validate(tables.LinkTable, table, where, text, at=("links", name))
    return LinkType(name, **checked.values(), sources=checked.sources)


def _read(path: Path) -> tuple[dict, str]:
    from shoal.inputs import schema

    return schema.read_toml(path, "profiles file", environment.PROFILES.name)


def user_files() -> list[Path]:
    """Profile files a user supplies, in the order they override each other."""
    files = []
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    if (config / "shoal" / "profiles.toml").is_file():
        files.append(config / "shoal" / "profiles.toml")
    for item in filter(None, (environment.PROFILES.get() or "").split(os.pathsep)):
        path = Path(item).expanduser()
        if not path.is_file():
            raise ShoalError(f"{environment.PROFILES.name} names {path}, which does not exist; "
                             "fix the variable or create the file")
        files.append(path)
    return files


def load_all(extra: dict | None = None, extra_where: str = "inventory", extra_text: str = ""
             ) -> tuple[dict[str, DeviceProfile], dict[str, LinkType]]:
    """Profiles and links: built-in, then user files, then ``extra`` (an inventory's tables)."""
    profiles: dict[str, DeviceProfile] = {}
    links: dict[str, LinkType] = {}
    switches: dict[str, DeviceProfile] = {}  # checked here; load_switches() returns them
    boots: dict[str, BootPhases] = {}  # [boot.NAME]: joined to profile NAME below
    sources = [(BUILTIN, *_read(BUILTIN))] + [(p, *_read(p)) for p in user_files()]
    if extra:
        sources.append((extra_where, extra, extra_text))
    declared: dict[str, tuple[str, str]] = {}  # where each profile was last defined
    for where, data, text in sources:
        for table_name in ("links", "profiles"):
            if not isinstance(data.get(table_name, {}), dict):
                from shoal.inputs import schema

                raise schema.locate(str(where), text, (table_name,), "must be a table of named tables")
        for name, table in (data.get("links") or {}).items():
            links[name] = link_from_table(name, table, str(where), text)
            declared[f"links.{name}"] = (str(where), text)
        for name, table in (data.get("switches") or {}).items():
            switches[name] = switch_from_table(name, table, str(where), text)
        for name, table in (data.get("profiles") or {}).items():
            profiles[name] = profile_from_table(name, table, str(where), text)
            declared[name] = (str(where), text)
        for name, table in (data.get("boot") or {}).items():
            boots[name] = boot_from_table(name, table, str(where))
    for link in links.values():
        if link.switch and link.switch not in switches:
            from shoal.inputs import schema

            raise schema.locate(*declared[f"links.{link.name}"], ("links", link.name, "switch"),
                                f"names switch {link.switch!r}, which is not defined; use one of "
                                f"{', '.join(sorted(switches))} or define it under "
                                f"[switches.{link.switch}]")
    for profile in profiles.values():
        if profile.link not in links:
            from shoal.inputs import schema

            raise schema.locate(*declared[profile.name], ("profiles", profile.name, "link"),
                                f"names link {profile.link!r}, which is not defined; use one of "
                                f"{', '.join(sorted(links))} or define it under [links.{profile.link}]")
    return _with_boots(profiles, boots), links


def _with_boots(profiles: dict[str, DeviceProfile], boots: dict[str, BootPhases]
                ) -> dict[str, DeviceProfile]:
    """Each [boot.NAME] becomes profile NAME's ``boot``; a boot table needs its device."""
    for name, phases in boots.items():
        if name not in profiles:
            raise ShoalError(f"boot profile {name!r} names no device profile; define "
                             f"[profiles.{name}] beside [boot.{name}] (known: {', '.join(sorted(profiles))})")
        profiles[name] = replace(profiles[name], boot=phases)
    return profiles


def load(extra: dict | None = None) -> dict[str, DeviceProfile]:
    """All device profiles: built-in, then user files, then ``extra`` (an inventory's tables)."""
    return load_all(extra)[0]


def load_switches(extra: dict | None = None) -> dict[str, DeviceProfile]:
    """Switches, access points and gateways, overridden in the same order as profiles."""
    switches: dict[str, DeviceProfile] = {}
    sources = [(BUILTIN, *_read(BUILTIN))] + [(p, *_read(p)) for p in user_files()]
    if extra:
        sources.append(("inventory", extra, ""))
    for where, data, text in sources:
        for name, table in (data.get("switches") or {}).items():
            switches[name] = switch_from_table(name, table, str(where), text)
    return switches


def switch_of(link: LinkType, extra: dict | None = None) -> DeviceProfile | None:
    """The switch a link type names (None when it names none)."""
    if not link.switch:
        return None
    switches = load_switches(extra)
    if link.switch not in switches:
        raise ShoalError(f"link {link.name!r} names switch {link.switch!r}, which is not defined "
                         f"(known: {', '.join(sorted(switches)) or 'none'})")
    return switches[link.switch]


@dataclass(frozen=True)
class OsNoise:
    """A distribution's background activity on a device: short-lived processes started per
    second of device time (forks, /proc/stat ``processes``) and the share of one device core
    its daemons keep busy. The ranks share the device's CPU budget with it."""

    name: str
    forks_per_s: float
    cpu_share: float
    description: str = ""
    sources: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "forks_per_s": self.forks_per_s, "cpu_share": self.cpu_share}


def load_os_noise() -> dict[str, OsNoise]:
    """``[os_noise.NAME]`` profiles: built-in, then user files."""
    from shoal.inputs import schema
    from shoal.profiles import tables

    found: dict[str, OsNoise] = {}
    for where, data, text in [(BUILTIN, *_read(BUILTIN))] + [(p, *_read(p)) for p in user_files()]:
        for name, table in (data.get("os_noise") or {}).items():
            checked = schema.validate(tables.OsNoiseTable, table, str(where), text, at=("os_noise", name))
            found[name] = OsNoise(name, checked.forks_per_s, checked.cpu_share, checked.description,
                                  checked.sources)
    return found


@dataclass(frozen=True)
class Background:
    """What a device keeps doing beside the ranks: CPU work in a frame rhythm (``fps`` frames
    a second, ``frame_work_s`` reference-core seconds each) and a stream of ``stream_bps``
    from the head-end, delivered ``multicast`` (one copy per programme on the link),
    ``unicast`` (one per device) or ``qam`` (carriers of its own: not on the link); or an
    ``upload``, a stream the device sends up its link to the head-end."""

    name: str
    fps: float
    frame_work_s: float
    stream_bps: float
    delivery: str
    description: str = ""
    sources: dict[str, str] = field(default_factory=dict)

    def share_of(self, profile: DeviceProfile) -> float:
        """The share of one of ``profile``'s cores its CPU work takes."""
        return self.frame_work_s * self.fps / profile.speed

    @property
    def decodes(self) -> bool:
        """Whether a decoder runs on the device's first core (work in a frame rhythm)."""
        return self.fps > 0

    @property
    def on_link(self) -> bool:
        """Whether its stream travels on the devices' link (not on carriers of its own)."""
        return self.delivery != "qam" and self.stream_bps > 0

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "fps": self.fps, "frame_work_s": self.frame_work_s,
                "stream_bps": self.stream_bps, "delivery": self.delivery}


def load_backgrounds() -> dict[str, Background]:
    """``[backgrounds.NAME]``: built-in, then user files."""
    from shoal.inputs import schema
    from shoal.profiles import tables

    found: dict[str, Background] = {}
    for where, data, text in [(BUILTIN, *_read(BUILTIN))] + [(p, *_read(p)) for p in user_files()]:
        for name, table in (data.get("backgrounds") or {}).items():
            checked = schema.validate(tables.BackgroundTable, table, str(where), text,
                                      at=("backgrounds", name))
            found[name] = Background(name, checked.fps, checked.frame_work_s, checked.stream_bps,
                                     checked.delivery, checked.description, checked.sources)
    return found


@dataclass(frozen=True)
class Storage:
    """A file server at the cluster's head (``[storage.NAME]``): it commits ``write_Bps`` and
    acknowledges each ``block_B`` block once committed, so its writer waits as an NFS client's
    synchronous writes do."""

    name: str
    write_Bps: float
    block_B: int
    description: str = ""
    sources: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "write_Bps": self.write_Bps, "block_B": self.block_B}


def load_storage() -> dict[str, Storage]:
    """``[storage.NAME]``: built-in, then user files."""
    from shoal.inputs import schema
    from shoal.profiles import tables

    found: dict[str, Storage] = {}
    for where, data, text in [(BUILTIN, *_read(BUILTIN))] + [(p, *_read(p)) for p in user_files()]:
        for name, table in (data.get("storage") or {}).items():
            checked = schema.validate(tables.StorageTable, table, str(where), text, at=("storage", name))
            found[name] = Storage(name, checked.write_Bps, checked.block_B, checked.description,
                                  checked.sources)
    return found


def load_links(extra: dict | None = None) -> dict[str, LinkType]:
    """All link types, overridden in the same order as profiles."""
    return load_all(extra)[1]


@functools.lru_cache(maxsize=None)
def _builtin() -> dict[str, DeviceProfile]:
    data = _read(BUILTIN)[0]
    return _with_boots({name: profile_from_table(name, table, str(BUILTIN))
                        for name, table in (data.get("profiles") or {}).items()},
                       {name: boot_from_table(name, table, str(BUILTIN))
                        for name, table in (data.get("boot") or {}).items()})


def builtin(name: str) -> DeviceProfile:
    """A profile as shipped with shoal (user files ignored): the defaults of the models."""
    return _builtin()[name]
