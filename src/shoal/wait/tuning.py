"""What a launch takes from the stored wait calibration of where its ranks run.

Every wait mode uses the calibration of its place (this host, or the device profile at
its quota) for each parameter the user did not set:

``linear``           without parameters: the calibrated d_min, d_max, d_step
``backoff``          without parameters, and ``auto``: the floor (SHOAL_WAIT_FLOOR_NS)
every sleeping mode  the timer slack, unless SHOAL_WAIT_SLACK_NS is set or the
                     launch gives its own (``seed003`` keeps the kernel's)

A calibration holds host time; on an emulated device (a key with a dilation D) the
library takes its durations as device time (SHOAL_WAIT_DILATION) and stretches them by
D, so a launch there passes the calibration's durations divided by D: the sleeps last
what was measured.

With no calibration stored (or SHOAL_WAIT_CALIBRATION=off) the library's fixed
defaults stand. A calibration of this host measured on another CPU or kernel is not
used: one line says so, and the host is measured again (a few seconds); a device's
is not used either, and the line says how to measure it again.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

from shoal import environment
from shoal.wait import calibration_store
from shoal.wait.calibration import Calibration
from shoal.wait.modes import WaitMode

# Modes that never sleep: nothing of a calibration applies.
_NEVER_SLEEP = ("busy", "yield")


@dataclass(frozen=True)
class Tuning:
    """The parameters a launch sets from a calibration, and which calibration."""

    mode: str                                   # the SHOAL_WAIT text (calibrated linear filled in)
    env: dict[str, str] = field(default_factory=dict)   # SHOAL_WAIT_* set from the calibration
    calibration: Calibration | None = None
    note: str = ""                              # why no calibration is used, if one was looked for

    def describe(self) -> dict[str, Any]:
        """What telemetry and manifests show: the mode as run, the variables the calibration
        set, and which calibration (None: the library's fixed defaults)."""
        return {"mode": self.mode, "set": dict(self.env),
                "calibration": self.calibration.label() if self.calibration else None,
                "note": self.note}

    def lines(self) -> list[str]:
        """The same for a terminal."""
        if self.calibration is None:
            why = f" ({self.note})" if self.note else " (no calibration stored: shoal wait calibrate)"
            return [f"wait parameters: libshoalwait's defaults{why}"]
        cal = self.calibration
        shown = [f"mode {self.mode}"] + [f"{k}={v}" for k, v in self.env.items()]
        return [f"wait parameters: {', '.join(shown)}",
                f"  from the calibration of {cal.label()} (floor {cal.floor_ns / 1e3:.1f} µs)"]


def in_device_time(cal: Calibration, dilation: float) -> Calibration:
    """``cal``'s durations as device time at ``dilation`` (each at least 1 ns where it was).
    The slack stays: it is a choice (1 ns, or 0: the kernel's), not a measure."""
    if dilation == 1.0:
        return cal
    step = max(1, round(cal.dstep_ns / dilation))
    return dataclasses.replace(cal, dmin_ns=round(cal.dmin_ns / dilation),
                               dmax_ns=max(step, round(cal.dmax_ns / dilation)), dstep_ns=step,
                               floor_ns=max(1, round(cal.floor_ns / dilation)) if cal.floor_ns else 0)


def apply(mode: WaitMode, cal: Calibration | None, slack_given: bool = False,
          given: Mapping[str, str] | None = None, dilation: float = 1.0) -> Tuning:
    """The mode text and SHOAL_WAIT_* variables ``cal`` gives ``mode``, leaving alone what the
    user set: the mode's own parameters, and SHOAL_WAIT_SLACK_NS or SHOAL_WAIT_FLOOR_NS in
    this environment or in ``given`` (the ranks' own environment). ``dilation``: the ranks'
    device runs that many times slower than real time (their durations are device time)."""
    if cal is None or mode.name in _NEVER_SLEEP:
        return Tuning(mode.text, {}, cal if mode.name not in _NEVER_SLEEP else None)
    given = given or {}

    def unset(variable: environment.Variable) -> bool:
        return not variable.is_set() and not given.get(variable.name)

    text, env = mode.text, {}
    explicit = ":" in mode.text
    device = in_device_time(cal, dilation)
    if mode.name == "linear" and not explicit:
        text = device.linear
    if (mode.name == "auto" or mode.name == "backoff" and not explicit) and unset(environment.WAIT_FLOOR_NS):
        env[environment.WAIT_FLOOR_NS.name] = str(device.floor_ns)
    if not slack_given and unset(environment.WAIT_SLACK_NS):
        env[environment.WAIT_SLACK_NS.name] = str(cal.slack_ns)
    return Tuning(text, env, cal)


_found: dict[str, tuple[Calibration | None, str]] = {}


def stored_for(key: dict[str, Any]) -> tuple[Calibration | None, str]:
    """The calibration a launch at ``key`` uses (once per command): the stored one; for this
    host, measured again when the stored one is another host's or kernel's."""
    import json

    path = calibration_store.store_file()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        stamp = 0
    # Once per command, and again only when the store or the switch changed.
    memo = json.dumps([key, environment.WAIT_CALIBRATION.get(), str(path), stamp], sort_keys=True)
    if memo in _found:
        return _found[memo]
    if environment.WAIT_CALIBRATION.get() == "off":
        found: tuple[Calibration | None, str] = (None, f"{environment.WAIT_CALIBRATION.name}=off")
    else:
        found = calibration_store.lookup(key)
        if found[1]:
            found = _measured_again(key, found[1])
    _found[memo] = found
    return found


def _measured_again(key: dict[str, Any], why: str) -> tuple[Calibration | None, str]:
    if key.get("profile") != "host":
        line = (f"{why}: not used; the defaults stand (measure it again with "
                f"'shoal wait calibrate --emulate 1x{key.get('profile')}')")
        print(f"shoal: {line}", file=sys.stderr)
        return None, line
    from shoal.wait import calibrate
    from shoal.wait.calibration import CannotCalibrate

    print(f"shoal: {why}: not used; measured again for this host", file=sys.stderr)
    try:
        cal = calibrate.host(load="idle")
    except CannotCalibrate as exc:
        print(f"shoal: {exc}", file=sys.stderr)
        return None, str(exc)
    return cal, ""


def for_launch(mode: WaitMode, key: dict[str, Any] | None = None, slack_given: bool = False,
               given: Mapping[str, str] | None = None) -> Tuning:
    """The tuning of a launch in ``mode`` at ``key`` (None: this host; ``{}``: nowhere shoal
    keeps a calibration of, such as real hosts, which keep the defaults)."""
    if mode.name in _NEVER_SLEEP:
        return Tuning(mode.text)
    if key == {}:
        return Tuning(mode.text, note="no calibration is kept for these ranks' hosts")
    cal, note = stored_for(key or calibration_store.host_key())
    tuning = apply(mode, cal, slack_given, given, float((key or {}).get("dilation", 1.0)))
    return Tuning(tuning.mode, tuning.env, tuning.calibration, note)

