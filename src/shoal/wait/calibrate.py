"""`shoal wait calibrate` as a call: sweep each place, derive its parameters, store them.

A place is this host, and with an emulated cluster one device of each profile, swept
inside the device at its CPU quota (shoal.wait.sleepaccuracy). Each place sweeps twice,
at the kernel's timer slack and at 1 ns, idle or loaded (one spinning thread per core
of the place: ranks computing beside the waiting one), 0 to 1 ms in 10 µs steps, 10
measures each: about a second per sweep on an idle host. The parameters
(shoal.wait.calibration) are stored per place (shoal.wait.calibration_store); a place
that cannot sleep below its floor keeps the defaults, and its outcome says so in one line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from shoal.errors import ShoalError
from shoal.wait import calibration, calibration_store, sleepaccuracy
from shoal.wait.calibration import Calibration, CannotCalibrate
from shoal.wait.sleepaccuracy import Condition, Place, Sweep

SWEEP = Sweep(1e-3, 10e-6, 10)   # 101 steps x 10 measures per slack
SLACKS = ("default", "1ns")
LOADS = ("idle", "loaded")


@dataclass(frozen=True)
class Outcome:
    """One place: its stored calibration, or why the defaults are kept."""

    device: str
    profile: str
    calibration: Calibration | None
    note: str = ""     # the refusal (floor), or the stale calibration measured again

    def row(self) -> dict[str, Any]:
        cal = self.calibration
        row: dict[str, Any] = {"device": self.device, "profile": self.profile,
                               "status": "calibrated" if cal else "defaults kept", "note": self.note}
        if cal:
            row.update({k: v for k, v in cal.describe().items() if k != "key"},
                       quota=cal.key.get("quota"), linear=cal.linear, calibration=cal.label())
        return row


def measure(place: Place, key: dict[str, Any], load: str = "idle", sweep: Sweep | None = None) -> Calibration:
    """Sweep ``place`` at both slacks (``sweep``, else SWEEP) and derive its calibration
    (CannotCalibrate: the floor)."""
    from shoal.mpi import build

    sweep = sweep or SWEEP
    exe = str(build.build_host("sleepsweep"))
    sweeps = {}
    for slack in SLACKS:
        _, requested, measured = sleepaccuracy.measure(place, sweep, Condition(load, slack), exe)
        sweeps[slack] = (requested, measured)
    params = calibration.derive(sweeps, place.device)
    return Calibration(**params, key=key, load=load,
                       measured_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def _one(place: Place, key: dict[str, Any], load: str, say: Callable[[str], None]) -> Outcome:
    _, stale = calibration_store.lookup(key)
    note = ""
    if stale:
        note = f"{stale}: measured again"
        say(note)
    try:
        cal = measure(place, key, load)
    except CannotCalibrate as exc:
        say(str(exc))
        calibration_store.forget(key)   # an earlier calibration no longer holds either
        return Outcome(place.device, place.profile, None, str(exc))
    calibration_store.store(cal)
    return Outcome(place.device, place.profile, cal, note)


def host(load: str = "idle") -> Calibration:
    """This host's calibration, measured now and stored (CannotCalibrate: the floor, and
    nothing is kept for the host any more)."""
    key = calibration_store.host_key()
    try:
        cal = measure(sleepaccuracy.host_place(), key, load)
    except CannotCalibrate:
        calibration_store.forget(key)
        raise
    calibration_store.store(cal)
    return cal


def device_quota(emulated, profile: str) -> float:
    """The share of a host core each core of a ``profile`` device gets in ``emulated``."""
    node = next(n for n in emulated.inventory.nodes if n.profile.name == profile)
    return emulated.host.core_share(node.profile) / emulated.dilation


def device_key(emulated, profile: str) -> dict:
    """The calibration key of a ``profile`` device of ``emulated``: its quota and dilation."""
    return calibration_store.device_key(profile, device_quota(emulated, profile), emulated.dilation)


def check_load(load: str) -> str:
    if load not in LOADS:
        raise ShoalError(f"--load {load!r}: use idle or loaded")
    return load


def run(emulate: str | None = None, inventory: str | None = None, load: str = "idle",
        say: Callable[[str], None] = print, on_done: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Calibrate this host, then one device of each profile of ``emulate`` (or of the emulated
    ``inventory``): one outcome per place, each stored as it finishes."""
    check_load(load)
    done = []

    def keep(outcome: Outcome) -> None:
        done.append(outcome)
        if on_done:
            on_done(outcome)

    keep(_one(sleepaccuracy.host_place(), calibration_store.host_key(), load, say))
    if not (emulate or inventory):
        return done
    from shoal import cluster as clusters
    from shoal.cluster.session import emulated_inventory

    inv = emulated_inventory(emulate, inventory, None, None)
    if not inv.runs_here:
        raise ShoalError(f"--cluster {inventory}: its hosts are real machines, not devices emulated "
                         "here; run 'shoal wait calibrate' on each of them (a calibration is kept per host)")
    alone = [(name,) for name in sleepaccuracy.one_of_each_profile(inv)]
    with clusters.open(emulate=emulate, inventory=inventory, at_once=alone) as devices:
        emulated = devices.emulated
        for place in sleepaccuracy.device_places(emulated):
            key = device_key(emulated, place.profile)
            keep(_one(place, key, load, say))
    return done
