import math

import numpy as np
import pytest

from shoal.bench.stats import median_ci_indices, summarize


def test_summary_of_known_sample():
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.n, s.median, s.mean, s.min, s.max) == (5, 3.0, 3.0, 1.0, 5.0)
    assert s.p90 == pytest.approx(4.6)


def test_even_count_median_is_mean_of_middles():
    assert summarize([1.0, 2.0, 3.0, 10.0]).median == 2.5


def test_ci_indices_follow_binomial_normal_approximation():
    # n=100: 50 -/+ 1.96*10/2 = 40.2 .. 59.8 -> floor 40, ceil 60 (0-based)
    assert median_ci_indices(100) == (40, 60)
    lo, hi = median_ci_indices(10)
    assert lo == 1 and hi == 9


def test_ci_covers_true_median_about_95_percent():
    rng = np.random.default_rng(7)
    hits = 0
    trials = 2000
    for _ in range(trials):
        s = summarize(rng.exponential(1.0, size=60))
        hits += s.ci_low <= math.log(2) <= s.ci_high
    assert 0.93 <= hits / trials <= 0.985


def test_ci_halfwidth_undefined_for_tiny_samples():
    assert summarize([1.0, 1.1]).ci_halfwidth_rel == math.inf


def test_ci_shrinks_with_more_samples():
    rng = np.random.default_rng(1)
    small = summarize(rng.normal(10, 1, 20)).ci_halfwidth_rel
    large = summarize(rng.normal(10, 1, 2000)).ci_halfwidth_rel
    assert large < small / 4


def test_empty_sample_is_an_error():
    with pytest.raises(ValueError):
        summarize([])
