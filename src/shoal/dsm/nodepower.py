"""Seed 003's Fig. 10 on a placement: each node's instantaneous power, its spread, its peak
and its energy, from the ranks' CPU timelines.

The seed read each RECS node's power every ~180 ms from the box's REST interface and
reports, per node and per receive mode, the standard deviation of those readings (10a)
and the energy over the run (10b), noting that the adaptive modes also lower the peak.
Here no meter reads the nodes: each device's power at each moment is modelled from its
profile (idle W + (busy W - idle W) x the share of its cores its ranks kept busy in that
interval), every row labelled "modelled". The intervals are the ranks' own CPU samples
(``--sample``, the seed's 180 ms), put on one grid over the span every rank covers (the
last interval ends with the span, so a run shorter than a period still has one reading).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal import profiles
from shoal.dsm.placement import Preset

PLATFORM = "platform"   # the sum of the placement's devices, as the seed's "platform" bars


def series(p: Preset, timelines: list[dict[str, Any]], period_s: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(the grid's interval lengths, s; device -> modelled W in each interval). ``timelines``:
    per rank ``{"rank", "t_s", "cpu_s"}`` (cumulative CPU seconds at each time, one clock).
    The intervals are ``period_s`` long but the last, which ends where the span does."""
    usable = [t for t in timelines if len(t["t_s"]) >= 2]
    if not usable:
        return np.empty(0), {}
    start = max(t["t_s"][0] for t in usable)
    end = min(t["t_s"][-1] for t in usable)
    if end - start <= 1e-9:
        return np.empty(0), {}
    edges = np.arange(start, end - 1e-9, period_s)
    edges = np.append(edges, end)   # a run shorter than a period still has one reading
    known = profiles.load()
    busy = {device: np.zeros(len(edges) - 1) for device in p.devices}
    for t in usable:
        device = p.ranks[t["rank"]][0]
        cpu = np.interp(edges, np.asarray(t["t_s"], float), np.asarray(t["cpu_s"], float))
        busy[device] += np.diff(cpu) / np.diff(edges)     # cores this rank kept busy
    watts = {}
    for device, cores_busy in busy.items():
        prof = known[p.devices[device]]
        share = np.clip(cores_busy / prof.cores, 0.0, 1.0)
        watts[device] = prof.idle_W + (prof.busy_W - prof.idle_W) * share
    return np.diff(edges), watts


def summary(p: Preset, timelines: list[dict[str, Any]], period_s: float) -> list[dict[str, Any]]:
    """Per device and for the platform: mean, standard deviation and peak of the modelled
    power, and the energy over the grid's span (SI units)."""
    lengths, watts = series(p, timelines, period_s)
    if not watts:
        return []
    span = float(lengths.sum())
    rows = []
    every = dict(watts)
    every[PLATFORM] = sum(watts.values())
    for device, w in every.items():
        energy = float((w * lengths).sum())
        rows.append({"device": device, "profile": p.devices.get(device, PLATFORM),
                     "mean_W": energy / span, "std_W": float(w.std()), "peak_W": float(w.max()),
                     "energy_J": energy, "span_s": span, "samples": int(len(w)), "kind": "modelled"})
    return rows
