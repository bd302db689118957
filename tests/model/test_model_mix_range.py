"""The measured mix's perf/W per node count with its interval, and the sizes that tie with the best."""

from __future__ import annotations

import pytest

from shoal.model import mix
from shoal.model.resample import Interval, mix_ppw_intervals


def test_each_size_carries_only_its_own_points_noise():
    # One member: energy per unit at 1, 2 and 3 devices, 2 at 1 device with no spread at all.
    samples = {"a": {1: [2.0] * 6, 2: [1.0, 1.1, 0.9, 1.0, 1.05, 0.95], 3: [1.6, 1.6, 1.6, 1.6, 1.6, 1.6]}}
    out = mix_ppw_intervals(samples, {"a": 1.0})
    assert sorted(out) == [1, 2, 3]
    # perf/W relative to one device = its energy per unit over the one device's (the medians).
    assert out[1].value == pytest.approx(1.0) and out[2].value == pytest.approx(2.0)
    assert out[3].value == pytest.approx(2.0 / 1.6)
    # Sizes without spread have none in their interval, whatever the others' spread.
    assert (out[1].lo, out[1].hi) == (pytest.approx(1.0), pytest.approx(1.0))
    assert (out[3].lo, out[3].hi) == (pytest.approx(1.25), pytest.approx(1.25))
    # The spread one's interval holds its value and lies within its repetitions' range.
    assert 2.0 / 1.1 <= out[2].lo < 2.0 < out[2].hi <= 2.0 / 0.9
    assert out[2].resamples == 400
    # The same samples give the same intervals (a fixed seed).
    assert mix_ppw_intervals(samples, {"a": 1.0}) == out


def test_members_are_weighted_and_only_common_node_counts_kept():
    samples = {"a": {1: [1.0] * 3, 2: [0.5] * 3, 3: [0.5] * 3},
               "b": {1: [4.0] * 3, 2: [4.0] * 3}}
    out = mix_ppw_intervals(samples, {"a": 0.75, "b": 0.25})
    assert sorted(out) == [1, 2]   # b did not measure 3
    # E_mix(2) = 0.75 * 0.5 + 0.25 * 1 = 0.625 of one device's energy: perf/W 1.6x.
    assert out[2].value == pytest.approx(1.6)
    assert mix_ppw_intervals({}, {}) == {}


def _i(lo: float, hi: float) -> Interval:
    return Interval((lo + hi) / 2, lo, hi, 400, 0)


def test_the_tied_range_is_the_best_and_its_overlapping_neighbours_in_a_row():
    intervals = {1: _i(0.9, 1.1), 2: _i(1.2, 1.3), 3: _i(1.28, 1.4), 4: _i(1.35, 1.45)}
    assert mix.tied_range(intervals, 4) == (3, 4)
    assert mix.tied_range(intervals, 3) == (2, 4)
    # A size that overlaps the best's but lies past one that does not is not in the range.
    gap = {1: _i(1.3, 1.5), 2: _i(0.9, 1.0), 3: _i(1.35, 1.45)}
    assert mix.tied_range(gap, 3) == (3, 3)
    assert mix.tied_range({}, 2) == (2, 2)
