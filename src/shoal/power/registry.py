"""Which power sources this machine offers: detected once, shown two ways.

``survey()`` opens every sensor kind (through ``spec.detect``), notes the
channels of those that work, why the others do not and what to do about
it, whether the model can run, and what ``--source auto`` picks. `shoal
doctor` shows it per kind (``describe_sources()``); `shoal power sources`
per channel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal import environment
from shoal.power import kinds, spec
from shoal.power.rapl import PERMISSION_HINT


@dataclass(frozen=True)
class Found:
    """A sensor kind that works here, with its channels and notes."""

    kind: str
    channels: list[dict]   # name, domain, kind (measured/modelled), quantity
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Survey:
    found: list[Found]
    missing: dict[str, tuple[str, str]]   # kind -> (why not, what to do)
    model: str | None                     # what the model would use, or None
    model_error: str | None               # why the model cannot run
    auto: str                             # what --source auto picks, one sentence


def survey() -> Survey:
    from shoal.power.model import ModelSource

    sources, reasons = spec.detect()
    found = []
    for source in sources:
        found.append(Found(source.label, [{"name": c.name, "domain": c.domain, "kind": c.kind,
                                           "quantity": c.quantity} for c in source.channels],
                           list(source.notes)))
        source.close()
    missing = {kind: (reason, PERMISSION_HINT if "CVE-2020-8694" in reason else _fix(kind))
               for kind, reason in reasons.items()}
    try:
        model, model_error = ModelSource().describe, None
    except Exception as exc:  # the model is the last resort: say exactly why it cannot run
        model, model_error = None, str(exc)
    return Survey(found, missing, model, model_error, _auto([f.kind for f in found]))


def _fix(name: str) -> str:
    """What to do where a kind is missing, as the kind says (nothing said: nothing known)."""
    kind = kinds.get(name)
    return kind.fix if kind is not None and kind.fix else "no fix known; see docs/power.md"


def describe_sources() -> list[dict]:
    """One dict per source kind: name, available (bool), detail, fix."""
    found = survey()
    entries = []
    for f in found.found:
        channels = ", ".join(f"{c['name']} ({c['domain']})" for c in f.channels)
        entries.append({"name": f.kind, "available": True, "detail": f"measured: {channels}",
                        "fix": "; ".join(f.notes)})
    for kind, (reason, fix) in found.missing.items():
        entries.append({"name": kind, "available": False, "detail": reason, "fix": fix})
    if found.model is not None:
        entries.append({"name": "model", "available": True, "detail": f"modelled: {found.model}",
                        "fix": _fix("model")})
    else:
        entries.append({"name": "model", "available": False, "detail": found.model_error,
                        "fix": f"the model reads /proc/stat; check {environment.PROC_ROOT.name}"})
    entries.append({"name": "auto", "available": True, "detail": found.auto, "fix": ""})
    return entries


def _auto(found: list[str]) -> str:
    """What ``--source auto`` picks, given the sensor kinds found in detection order."""
    if found:
        return f"auto uses {found[0]} (measured)"
    tried = ", ".join(k.name for k in kinds.sensors())
    return (f"auto uses the MODEL (modelled, not measured): no sensor here ({tried}); give "
            "--source model:IDLE_W,BUSY_W for your device or name a meter")

