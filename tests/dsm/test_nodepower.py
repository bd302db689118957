"""Fig. 10's per-node power from made-up CPU timelines on the RECS placement: each node's
modelled power per interval, its spread, peak and energy, and the platform's sum."""

from __future__ import annotations

import numpy as np
import pytest

from shoal import profiles
from shoal.dsm import nodepower, placement

PERIOD = 0.18


def _timeline(rank: int, busy_per_interval: list[float], t0: float = 100.0) -> dict:
    """Cumulative CPU at each sample: ``busy_per_interval`` cores kept busy in each interval."""
    t = t0 + PERIOD * np.arange(len(busy_per_interval) + 1)
    cpu = np.concatenate([[0.0], np.cumsum(np.asarray(busy_per_interval) * PERIOD)])
    return {"rank": rank, "t_s": t.tolist(), "cpu_s": cpu.tolist()}


def test_each_node_its_ranks_busy_share_every_interval():
    p = placement.preset("video-recs")
    i7, a15 = profiles.load()["core-i7"], profiles.load()["cortex-a15"]
    n = 10
    timelines = [_timeline(0, [1.0] * n),                       # the server, always busy (i7-b)
                 _timeline(1, [0.0] * n), _timeline(2, [0.0] * n),  # input and output idle (i7-a)
                 _timeline(3, [1.0, 0.0] * (n // 2))]             # a task busy every other interval
    timelines += [_timeline(r, [0.0] * n) for r in (4, 5, 6)]
    rows = {r["device"]: r for r in nodepower.summary(p, timelines, PERIOD)}
    assert set(rows) == {"i7-b", "i7-a", "a15-1", "a15-2", "a15-3", "a15-4", nodepower.PLATFORM}
    one_core = lambda prof: (prof.busy_W - prof.idle_W) / prof.cores   # noqa: E731
    server = rows["i7-b"]
    assert server["mean_W"] == pytest.approx(i7.idle_W + one_core(i7)) and server["std_W"] == pytest.approx(0)
    task = rows["a15-1"]
    assert task["peak_W"] == pytest.approx(a15.idle_W + one_core(a15))
    assert task["std_W"] == pytest.approx(one_core(a15) / 2)          # alternating: half the step
    assert task["energy_J"] == pytest.approx((a15.idle_W + one_core(a15) / 2) * n * PERIOD)
    assert rows["i7-a"]["peak_W"] == pytest.approx(i7.idle_W)
    platform = rows[nodepower.PLATFORM]
    assert platform["energy_J"] == pytest.approx(sum(r["energy_J"] for d, r in rows.items()
                                                     if d != nodepower.PLATFORM))
    assert platform["samples"] == n and {r["kind"] for r in rows.values()} == {"modelled"}


def test_only_the_span_every_rank_covers_counts():
    """A rank that started later shortens the grid to the common span; none usable: no rows."""
    p = placement.preset("video-recs")
    timelines = [_timeline(r, [0.5] * 10) for r in range(7)]
    timelines[6] = _timeline(6, [0.5] * 6, t0=100.0 + 4 * PERIOD)
    rows = nodepower.summary(p, timelines, PERIOD)
    assert {r["samples"] for r in rows} == {6}
    assert nodepower.summary(p, [{"rank": 0, "t_s": [1.0], "cpu_s": [0.0]}], PERIOD) == []
    # A run shorter than one period: one reading over the whole of it.
    short = [{"rank": r, "t_s": [5.0, 5.1], "cpu_s": [0.0, 0.1 if r == 0 else 0.0]} for r in range(7)]
    server = next(r for r in nodepower.summary(p, short, PERIOD) if r["device"] == "i7-b")
    i7 = profiles.load()["core-i7"]
    assert server["samples"] == 1 and server["span_s"] == pytest.approx(0.1)
    assert server["energy_J"] == pytest.approx((i7.idle_W + (i7.busy_W - i7.idle_W) / i7.cores) * 0.1)
