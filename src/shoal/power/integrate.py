"""From readings to energy: counter deltas, trapezoids, windows. Pure functions.

Readings of one channel are two arrays, monotonic times ``t`` (s) and raw
values ``v`` (NaN where the read failed). They become *intervals* between
consecutive valid readings:

* energy counters: ``(v1 - v0) x scale`` joules, corrected for one
  wraparound modulo ``modulus``; a failed read in between does not matter
  (the counter kept counting). Not counted (``ok`` false): a decrease on a
  counter without a modulus (a reset), and an interval so long that the
  counter could have wrapped more than once (``dt x max_power >= range``):
  two reads cannot tell one wrap from two.
* power readings: the trapezoid ``(p0 + p1) / 2 x dt``. Not counted: an
  interval with a failed read inside it, or longer than ``max_gap_s`` -
  drawing a line across a dead meter would invent energy.

Energy in a window [a, b] sums the parts of counted intervals inside it;
power inside an interval is taken as linear from p0 to p1 (constant for
counters, whose interval gives only the mean). ``coverage`` is the counted
fraction of the window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shoal.power.base import ENERGY, Channel

NOTE_START = "start"
NOTE_FAILED = "read failed"
NOTE_GAP = "gap"
NOTE_WRAP = "wrap"
NOTE_AMBIGUOUS = "ambiguous: could have wrapped more than once"
NOTE_RESET = "counter reset"


@dataclass
class Intervals:
    """Intervals between consecutive valid readings of one channel.

    ``end_index`` is the reading each interval ends at; ``p0``/``p1`` are
    the power (W) at its start and end; ``note`` says why one is special.
    """

    t0: np.ndarray
    t1: np.ndarray
    energy_J: np.ndarray
    p0: np.ndarray
    p1: np.ndarray
    ok: np.ndarray
    end_index: np.ndarray
    note: list[str]


def intervals(channel: Channel, t, v, max_gap_s: float = math.inf) -> Intervals:
    """Intervals of one channel's readings (see module doc for the rules)."""
    t = np.asarray(t, dtype=float)
    v = np.asarray(v, dtype=float)
    idx = np.flatnonzero(~np.isnan(v))
    tv, vv = t[idx], v[idx]
    dt = np.diff(tv)
    n = dt.size
    notes = [""] * n
    if channel.quantity == ENERGY:
        d = np.diff(vv)
        down = d < 0
        ok = dt > 0
        if channel.modulus:
            d = np.where(down, d + channel.modulus, d)
            for k in np.flatnonzero(down):
                notes[k] = NOTE_WRAP
            if channel.max_power_W:
                ambiguous = dt * channel.max_power_W >= channel.modulus * channel.scale
                for k in np.flatnonzero(ambiguous):
                    notes[k] = NOTE_AMBIGUOUS
                ok &= ~ambiguous
        else:
            for k in np.flatnonzero(down):
                notes[k] = NOTE_RESET
            ok &= ~down
        energy = d * channel.scale
        with np.errstate(divide="ignore", invalid="ignore"):
            power = np.where(dt > 0, energy / np.where(dt > 0, dt, 1.0), np.nan)
        p0 = p1 = power
    else:
        p = vv * channel.scale
        p0, p1 = p[:-1], p[1:]
        energy = (p0 + p1) / 2.0 * dt
        contiguous = np.diff(idx) == 1
        ok = contiguous & (dt <= max_gap_s) & (dt > 0)
        for k in np.flatnonzero(~ok):
            notes[k] = NOTE_GAP
    energy = np.where(ok, energy, np.nan)
    return Intervals(t0=tv[:-1], t1=tv[1:], energy_J=energy, p0=p0, p1=p1, ok=ok,
                     end_index=idx[1:], note=notes)


@dataclass(frozen=True)
class WindowEnergy:
    """Energy of one channel inside [a, b]."""

    energy_J: float | None
    mean_power_W: float | None
    peak_power_W: float | None
    covered_s: float
    coverage: float

    @property
    def partial(self) -> bool:
        return self.coverage < 0.999


def window(iv: Intervals, a: float, b: float) -> WindowEnergy:
    """Energy of the counted intervals' parts inside [a, b]."""
    if b <= a:
        raise ValueError(f"empty window [{a}, {b}]")
    sel = iv.ok & (iv.t1 > a) & (iv.t0 < b)
    if not sel.any():
        return WindowEnergy(None, None, None, 0.0, 0.0)
    t0, t1, p0, p1 = iv.t0[sel], iv.t1[sel], iv.p0[sel], iv.p1[sel]
    lo, hi = np.maximum(t0, a), np.minimum(t1, b)
    slope = (p1 - p0) / (t1 - t0)
    plo = p0 + slope * (lo - t0)
    phi = p0 + slope * (hi - t0)
    energy = float(np.sum((plo + phi) / 2.0 * (hi - lo)))
    covered = float(np.sum(hi - lo))
    peak = float(np.max(np.maximum(plo, phi)))
    mean = energy / covered if covered > 0 else None
    return WindowEnergy(energy, mean, peak, covered, min(1.0, covered / (b - a)))


def trapezoid_energy(t, p) -> float:
    """Energy (J) of power samples p (W) at times t (s), trapezoidal rule."""
    t = np.asarray(t, dtype=float)
    p = np.asarray(p, dtype=float)
    return float(np.sum((p[1:] + p[:-1]) / 2.0 * np.diff(t)))


def counter_delta(prev: float, now: float, modulus: float | None) -> float | None:
    """Counter increase between two reads, with at most one wrap.

    ``modulus`` is the number of distinct counter values (RAPL:
    max_energy_range_uj + 1). None when the counter went down and has no
    modulus (it was reset: the delta is unknown).
    """
    if now >= prev:
        return now - prev
    if modulus is None:
        return None
    return now + (modulus - prev)
