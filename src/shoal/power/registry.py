"""Which power sources this machine offers, as findings other commands can show.

``describe_sources()`` answers for every kind: available or not, what was
found (channels) or why not, and the one thing to do about it. `shoal
doctor` lists these; `shoal power sources` shows the same detection per
channel.
"""

from __future__ import annotations

from shoal.power import spec
from shoal.power.rapl import PERMISSION_HINT

_FIXES = {
    "rapl": "RAPL needs an Intel or AMD CPU on bare metal (not a VM); elsewhere use a meter or the model",
    "hwmon": "wire an INA219/INA226/INA3221 and load its driver (device tree overlay or "
             "echo ina219 0x40 > /sys/bus/i2c/devices/i2c-1/new_device)",
    "battery": "only battery-powered devices have one",
}


def describe_sources() -> list[dict]:
    """One dict per source kind: name, available (bool), detail, fix."""
    from shoal.power.model import ModelSource

    found, missing = spec.detect()
    entries = []
    for source in found:
        channels = ", ".join(f"{c.name} ({c.domain})" for c in source.channels)
        entries.append({"name": source.label, "available": True, "detail": f"measured: {channels}",
                        "fix": "; ".join(source.notes)})
        source.close()
    for kind, reason in missing.items():
        fix = PERMISSION_HINT if "CVE-2020-8694" in reason else _FIXES[kind]
        entries.append({"name": kind, "available": False, "detail": reason, "fix": fix})
    try:
        model = ModelSource()
        entries.append({"name": "model", "available": True, "detail": f"modelled: {model.describe}",
                        "fix": "give model:IDLE_W,BUSY_W (or a device profile) for your device"})
    except Exception as exc:  # the model is the last resort: say exactly why it cannot run
        entries.append({"name": "model", "available": False, "detail": str(exc),
                        "fix": "the model reads /proc/stat; check SHOAL_PROC_ROOT"})
    entries.append({"name": "auto", "available": True, "detail": auto_choice(found), "fix": ""})
    return entries


def auto_choice(found: list | None = None) -> str:
    """What ``--source auto`` picks here, in one sentence."""
    if found is None:
        found, _ = spec.detect()
        for source in found:
            source.close()
    if found:
        return f"auto uses {found[0].label} (measured)"
    return ("auto uses the MODEL (modelled, not measured): no RAPL, hwmon or battery sensor "
            "here; give --source model:IDLE_W,BUSY_W for your device or name a meter")
