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


def test_over_a_size_each_resample_gives_the_ratio_to_it():
    # 2 and 3 devices spread alike around energies 1.0 and 1.02: apart by less than their noise.
    noisy = [0.9, 1.1, 0.95, 1.05, 1.0, 1.0]
    samples = {"a": {1: [2.0] * 6, 2: noisy, 3: [1.02 * x for x in noisy], 4: [1.6] * 6}}
    vs = mix_ppw_intervals(samples, {"a": 1.0}, over=2)
    assert vs[2].value == 1.0 and (vs[2].lo, vs[2].hi) == (1.0, 1.0)   # itself, in every resample
    assert vs[3].value == pytest.approx(1 / 1.02) and vs[3].contains(1.0)
    assert vs[1].value == pytest.approx(0.5) and not vs[1].contains(1.0)
    assert mix_ppw_intervals(samples, {"a": 1.0}, over=7) == {}


def _i(lo: float, hi: float) -> Interval:
    return Interval((lo + hi) / 2, lo, hi, 400, 0)


def test_the_tied_range_is_the_best_and_the_neighbours_it_cannot_be_told_from_in_a_row():
    # perf/W over the best's (4): 3 holds 1, 2 does not.
    vs_best = {1: _i(0.7, 0.8), 2: _i(0.85, 0.97), 3: _i(0.93, 1.02), 4: _i(1.0, 1.0)}
    assert mix.tied_range(vs_best, 4) == (3, 4)
    # A size that holds 1 past one that does not is not in the range.
    gap = {1: _i(0.95, 1.05), 2: _i(0.8, 0.9), 3: _i(1.0, 1.0)}
    assert mix.tied_range(gap, 3) == (3, 3)
    assert mix.tied_range({1: _i(0.9, 1.1), 2: _i(1.0, 1.0), 3: _i(0.98, 1.01)}, 2) == (1, 3)
    assert mix.tied_range({}, 2) == (2, 2)
