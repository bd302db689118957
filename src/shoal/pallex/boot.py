"""Boot profiles: a device's boot phases (``DeviceProfile.boot``), by device name or from a file.

The phases are part of the device's profile: ``shoal.profiles`` reads the
``[boot.DEVICE]`` tables of the profile files (built-in, then the user's)
into ``BootPhases``. A file that ``shoal pallex profile`` wrote holds one
such table and is read here.
"""

from __future__ import annotations

from pathlib import Path

from shoal import profiles as device_profiles
from shoal.errors import ShoalError
from shoal.profiles import BootPhases, boot_from_table

def _read(path: Path) -> dict:
    from shoal.inputs import schema

    return schema.read_toml(path, "boot profile file", "--profile")[0]


def load_all() -> dict[str, BootPhases]:
    """Every device's boot phases: built-in profiles first, then the user's profile files."""
    return {name: p.boot for name, p in device_profiles.load().items() if p.boot is not None}


def load(name: str) -> BootPhases:
    """A device's boot profile by name, or the single profile in a TOML file path."""
    if name.endswith(".toml") or "/" in name:
        tables = _read(Path(name)).get("boot") or {}
        if len(tables) != 1:
            raise ShoalError(f"{name}: expected exactly one [boot.DEVICE] table, found {len(tables)}")
        device, table = next(iter(tables.items()))
        return boot_from_table(device, table, name)
    known = load_all()
    if name not in known:
        raise ShoalError(f"no boot profile {name!r} (known: {', '.join(sorted(known))}); "
                         "give a device name or a file written by 'shoal pallex profile'")
    return known[name]
