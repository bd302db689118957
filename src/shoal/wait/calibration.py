"""A place's wait parameters, derived from its Experiment C sweep.

Seed 003 (§3) concludes from Fig. 4 that the adaptive receive must follow each
device's sleep accuracy: "a coarse tuning". The sweep (shoal.wait.sleepaccuracy)
gives, per timer slack, how long each requested sleep really lasts; from it:

timer slack   1 ns where it shortens a sleep of 0 by more than a tenth (the
              seed's PR_SET_TIMERSLACK finding), else the kernel's own (0: left alone).
floor         what a sleep of 0 costs at that slack (median): the shortest
              sleep the place really sleeps. ``backoff`` and ``auto`` spin until
              1/8 of the time waited covers it and start their sleeps at it.
linear        003's Figure 3 ramp: d_min 0 (the seed's), d_step the floor (a
              step finer than what one wake-up costs is not seen), d_max the
              shortest requested sleep from which the median sleep stays within
              10 % of what was asked (the place keeps its sleeps there; below it
              a sleep mostly measures the wake-up).

A place whose sleeps stay more than 10 % late over the whole swept range cannot
sleep below its floor (how late its sleeps end whatever is asked: a loaded board
at a small quota waits for its next quota period): no parameter follows from the
sweep, and the defaults are kept (``CannotCalibrate`` names the floor in one line).

Pure arithmetic on arrays of requested and measured seconds: the tests feed it
made-up sweeps.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from shoal.errors import ShoalError

# A sleep is "kept" when its median lasts at most this much more than asked.
KEPT_WITHIN = 0.10
# ... and d_max is where at least this share of the longer steps are kept too.
KEPT_SHARE = 0.8
# Slack 1 ns is taken when it shortens a sleep of 0 by more than this.
SLACK_GAIN = 0.10
# libshoalwait's fixed defaults, the parameters an uncalibrated launch uses.
DEFAULTS = {"linear_ns": (1, 1000, 1), "slack_ns": 1, "floor_ns": 0}


class CannotCalibrate(ShoalError):
    """The sweep gives no parameters (the place cannot sleep below its floor)."""


@dataclass(frozen=True)
class Calibration:
    """The wait parameters of one place (this host, or a device profile at its quota)
    and what they came from."""

    dmin_ns: int
    dmax_ns: int
    dstep_ns: int
    slack_ns: int            # 1, or 0: the kernel's default left alone
    floor_ns: int
    # Provenance: which place, which host and kernel, when, from what.
    key: dict[str, Any] = field(default_factory=dict)
    load: str = "idle"
    floor_default_slack_s: float = 0.0    # a sleep of 0 at the kernel's slack
    floor_slack_1ns_s: float = 0.0        # ... and at 1 ns
    measures: int = 0
    measured_utc: str = ""

    @property
    def linear(self) -> str:
        """The ``linear`` mode these parameters make."""
        return f"linear:{self.dmin_ns},{self.dmax_ns},{self.dstep_ns}"

    @property
    def place(self) -> str:
        return str(self.key.get("profile", "host"))

    def describe(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Calibration":
        return cls(**{k: record[k] for k in cls.__dataclass_fields__ if k in record})

    def label(self) -> str:
        """One line: where and when it was measured."""
        key = self.key
        where = "this host" if self.place == "host" else f"device profile {self.place}"
        if "quota" in key:
            where += f" at {key['quota']:g} of a host core per device core"
        return f"{where} ({key.get('cpu_model', '?')}, kernel {key.get('kernel', '?')}), measured {self.measured_utc}"


def step_medians(requested: np.ndarray, measured: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each requested step, the median measured sleep at it), steps ascending."""
    steps = np.unique(requested)
    return steps, np.array([np.median(measured[requested == r]) for r in steps])


def floor_s(requested: np.ndarray, measured: np.ndarray) -> float:
    """What a sleep of 0 costs (median, s)."""
    at_zero = measured[requested == 0]
    if not len(at_zero):
        raise ShoalError("the sleep sweep holds no sleep of 0, so the floor is unknown; "
                         "run the sweep from 0")
    return float(np.median(at_zero))


def shortest_kept_s(requested: np.ndarray, measured: np.ndarray) -> float | None:
    """The shortest requested sleep (> 0) from which the sleeps are kept: its median within
    KEPT_WITHIN of what was asked, and so are at least KEPT_SHARE of the longer steps (one
    late step on a shared host does not move it). None: no such sleep in the range."""
    steps, medians = step_medians(requested, measured)
    kept = (steps > 0) & (medians <= steps * (1 + KEPT_WITHIN))
    for i in np.flatnonzero(kept):
        if kept[i:].mean() >= KEPT_SHARE:
            return float(steps[i])
    return None


def derive(sweeps: dict[str, tuple[np.ndarray, np.ndarray]], place: str = "host") -> dict[str, Any]:
    """The parameters from one place's sweeps: ``sweeps`` maps the slack ("default", "1ns")
    to (requested s, measured s). Raises CannotCalibrate naming the floor when the place
    keeps no sleep of the range."""
    if "default" not in sweeps:
        raise ShoalError("calibrating needs the sweep at the kernel's default timer slack")
    floors = {slack: floor_s(*arrays) for slack, arrays in sweeps.items()}
    slack = "1ns" if "1ns" in floors and floors["1ns"] < (1 - SLACK_GAIN) * floors["default"] else "default"
    requested, measured = sweeps[slack]
    floor = floors[slack]
    dmax = shortest_kept_s(requested, measured)
    if dmax is None:
        # Its floor in practice: how late its sleeps end whatever is asked (the median).
        late = float(np.median(measured - requested))
        raise CannotCalibrate(
            f"{place} cannot sleep below its floor of {late * 1e6:.1f} µs (its sleeps of 0 to "
            f"{requested.max() * 1e6:.0f} µs end a median of that late, none within {KEPT_WITHIN:.0%} "
            f"of what was asked; a sleep of 0 lasts {floor * 1e6:.1f} µs): the defaults are kept")
    floor_ns = max(1, round(floor * 1e9))
    return {"dmin_ns": 0, "dmax_ns": max(round(dmax * 1e9), floor_ns), "dstep_ns": floor_ns,
            "slack_ns": 1 if slack == "1ns" else 0, "floor_ns": floor_ns,
            "floor_default_slack_s": floors["default"], "floor_slack_1ns_s": floors.get("1ns", 0.0),
            "measures": int(sum(len(r) for r, _ in sweeps.values()))}
