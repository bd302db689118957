"""A host's clock as chrony sees it (``chronyc -c tracking``), for a cluster's record.

A cluster spread over hosts does not need the hosts' clocks to agree: its forwarders measure
each other's clock offsets themselves (``crosslinks``). chrony's view is recorded beside them,
so that a user comparing stamps from several hosts (logs, traces) knows how far apart the
clocks may be, and from whom they take their time.
"""

from __future__ import annotations

from shoal import proc

# Fields of `chronyc -c tracking` (CSV), in its order (chronyc(1), "tracking").
_FIELDS = ("reference_id", "reference_name", "stratum", "reference_time_s", "system_offset_s",
           "last_offset_s", "rms_offset_s", "frequency_ppm", "residual_frequency_ppm", "skew_ppm",
           "root_delay_s", "root_dispersion_s", "update_interval_s", "leap_status")
_TEXT = {"reference_id", "reference_name", "leap_status"}
TIMEOUT_S = 5.0


def parse(line: str) -> dict:
    """One ``chronyc -c tracking`` line as named fields (numbers as numbers)."""
    values = line.strip().split(",")
    if len(values) != len(_FIELDS):
        raise ValueError(f"chronyc tracking gave {len(values)} fields, not {len(_FIELDS)}")
    return {name: value if name in _TEXT else float(value) for name, value in zip(_FIELDS, values)}


def tracking() -> dict:
    """This host's chrony view, or why there is none: {"chrony": false, "why": ...}."""
    chronyc = proc.find("chronyc")
    if chronyc is None:
        return {"chrony": False, "why": "chronyc is not installed"}
    try:
        done = proc.run([chronyc, "-c", "tracking"], timeout=TIMEOUT_S)
    except proc.CommandTimeout:
        return {"chrony": False, "why": f"chronyc tracking gave no answer within {TIMEOUT_S:g} s"}
    if not done.ok:
        return {"chrony": False, "why": done.tail(1) or f"chronyc exited {done.returncode}"}
    try:
        return {"chrony": True, **parse(done.stdout)}
    except ValueError as exc:
        return {"chrony": False, "why": str(exc)}
