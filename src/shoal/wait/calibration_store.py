"""Where wait calibrations are kept: per host, and per emulated device profile at its quota.

One JSON file in shoal's cache root (beside the host speed's), one entry per place.
A place's key holds what its sleeps depend on: the CPU model, the kernel release and
the machine, and for an emulated device its profile and the share of a host core each
of its cores gets (its quota: the profile's share divided by the cluster's dilation).
A calibration stored for the same place on another CPU or kernel (a copied cache, a
kernel upgrade) is never used: ``lookup`` says so, and the caller measures again or
keeps the defaults.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

from shoal import jsonfile
from shoal.hostfacts import cpu_model
from shoal.wait.calibration import Calibration

CACHE_NAME = "wait-calibration.json"
# What a sleep's accuracy depends on, beside the place itself.
HOST_FIELDS = ("cpu_model", "kernel", "machine")
# What a place's key also says but does not choose the calibration by: the cluster's
# dilation (a calibration is host time at the quota; a launch turns it into device time).
LAUNCH_FIELDS = ("dilation",)


def host_key() -> dict[str, str]:
    return {"profile": "host", "cpu_model": cpu_model(), "kernel": platform.release(),
            "machine": platform.machine()}


def device_key(profile: str, quota: float, dilation: float = 1.0) -> dict[str, Any]:
    """An emulated device of ``profile`` whose cores each get ``quota`` of a host core, on a
    cluster ``dilation`` times slower than real time."""
    return {**host_key(), "profile": profile, "quota": round(float(quota), 4),
            "dilation": float(dilation)}


def store_file() -> Path:
    from shoal.mpi.build import cache_root

    return cache_root() / CACHE_NAME


def _place(key: dict[str, Any]) -> str:
    """The entry's place without the host: the same profile and quota on any host."""
    return json.dumps({k: v for k, v in key.items() if k not in HOST_FIELDS + LAUNCH_FIELDS},
                      sort_keys=True)


def _entries() -> dict[str, Any]:
    try:
        entries = json.loads(store_file().read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def lookup(key: dict[str, Any]) -> tuple[Calibration | None, str]:
    """(the calibration stored for ``key``, "") or (None, why none is used: "" when none
    was ever stored for this place, else which host or kernel the stored one is from)."""
    entry = _entries().get(_place(key))
    if not isinstance(entry, dict):
        return None, ""
    try:
        found = Calibration.from_record(entry)
    except (TypeError, ValueError):
        return None, ""
    theirs = {k: found.key.get(k) for k in HOST_FIELDS}
    ours = {k: key.get(k) for k in HOST_FIELDS}
    if theirs != ours:
        moved = [f"{k} {theirs[k]!r}, not this host's {ours[k]!r}" for k in HOST_FIELDS if theirs[k] != ours[k]]
        return None, f"the stored wait calibration of {found.place} was measured with {'; '.join(moved)}"
    return found, ""


def store(calibration: Calibration) -> None:
    """Keep ``calibration`` for its place (replacing any earlier one, from any host)."""
    _write(_place(calibration.key), calibration.describe())


def forget(key: dict[str, Any]) -> None:
    """Drop what is kept for ``key``'s place: it keeps the defaults from now on."""
    if _place(key) in _entries():
        _write(_place(key), None)


def _write(place: str, record: dict[str, Any] | None) -> None:
    path = store_file()
    entries = _entries()
    if record is None:
        entries.pop(place, None)
    else:
        entries[place] = record
    try:
        jsonfile.replace(path, entries)
    except OSError as exc:
        from shoal import environment
        from shoal.errors import ShoalError

        raise ShoalError(f"cannot store the wait calibration in {path}: {exc.strerror}; check that "
                         f"the cache directory ({environment.CACHE.name}) is writable") from exc
