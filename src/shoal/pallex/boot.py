"""Boot profiles: a device's boot phases, per unit configuration, with sources.

Read from the ``[boot.DEVICE]`` tables of the device-profile files (the
built-in ``shoal/data/profiles.toml``, then the user's files, as
:mod:`shoal.profiles` finds them), or from a file that
``shoal pallex profile`` wrote. This module is the only reader of those
tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from shoal import profiles as device_profiles
from shoal.errors import ShoalError

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
class BootProfile:
    """Phases of one boot: bootloader+kernel, userspace per configuration, forced shutdown."""

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
                "userspace_cpu_share": self.userspace_cpu_share,
                "userspace": {k: {"duration_s": u.duration_s, "energy_J": u.energy_J, "source": u.source}
                              for k, u in self.userspace.items()},
                "units": dict(self.units), "sources": dict(self.sources)}


def from_table(device: str, table: dict, where: str) -> BootProfile:
    """A boot profile from one ``[boot.DEVICE]`` table; ``where`` names it in errors."""
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
    return BootProfile(device=device, userspace=userspace, units=units, sources=sources, **values)


def _read(path: Path) -> dict:
    from shoal.inputs import schema

    return schema.read_toml(path, "boot profile file", "--profile")[0]


def load_all() -> dict[str, BootProfile]:
    """Every boot profile: built-in first, then the user's profile files."""
    out: dict[str, BootProfile] = {}
    for path in [device_profiles.BUILTIN, *device_profiles.user_files()]:
        for device, table in (_read(path).get("boot") or {}).items():
            out[device] = from_table(device, table, str(path))
    return out


def load(name: str) -> BootProfile:
    """A device's boot profile by name, or the single profile in a TOML file path."""
    if name.endswith(".toml") or "/" in name:
        tables = _read(Path(name)).get("boot") or {}
        if len(tables) != 1:
            raise ShoalError(f"{name}: expected exactly one [boot.DEVICE] table, found {len(tables)}")
        device, table = next(iter(tables.items()))
        return from_table(device, table, name)
    known = load_all()
    if name not in known:
        raise ShoalError(f"no boot profile {name!r} (known: {', '.join(sorted(known))}); "
                         "give a device name or a file written by 'shoal pallex profile'")
    return known[name]
