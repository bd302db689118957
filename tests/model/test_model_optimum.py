"""Best and recommended node counts from fitted models, per benchmark and overall."""

import json

import numpy as np
import pytest

from shoal.errors import ShoalError
from shoal.model import amdahl_speedup, fit_scaling, optimal_nodes, overall_optimum, woo_lee_perf_per_watt


def _exact_fit(f, k, c=0.0, nodes=range(1, 7), fit_c=False):
    n = np.array(list(nodes))
    perf = 40.0 * amdahl_speedup(n, f)
    ppw = 5.0 * woo_lee_perf_per_watt(n, f, k, c)
    return fit_scaling(n, perf, ppw, shared_power_fraction=None if fit_c else c)


def test_without_shared_power_one_node_is_most_efficient_and_the_tolerance_sets_the_count():
    fit = _exact_fit(0.9, 0.4)
    opt = optimal_nodes(fit, tolerance=0.10)
    assert opt.status == "ok", opt.reason
    assert opt.n_best_efficiency == 1
    # perf/W >= 0.9 * best  <=>  1 + (n-1) k (1-f) <= 1/0.9  <=>  n <= 1 + (1/0.9 - 1) / 0.04 = 3.78
    assert opt.n_recommended == 3
    assert opt.n_max == 24 and not opt.extrapolated
    assert optimal_nodes(fit, tolerance=0.20).n_recommended == 7  # 1 + 0.25 / 0.04 = 7.25
    assert optimal_nodes(fit, tolerance=0.20).extrapolated


def test_shared_power_gives_an_interior_optimum():
    # E(n) = (2 (0.1 + 0.9/n) + 1 + 0.03 (n - 1)) / 3: E(7) = 0.545714, E(8) = 0.545, E(9) = 0.545556
    fit = _exact_fit(0.9, 0.3, c=2.0, nodes=range(1, 11))
    opt = optimal_nodes(fit, tolerance=0.05)
    assert opt.status == "ok"
    assert opt.n_best_efficiency == 8
    assert opt.closed_form_n == pytest.approx(np.sqrt(60.0), rel=1e-5)
    # largest n with E(n) <= 0.545 / 0.95 = 0.573684: E(14) = 0.572857, E(15) = 0.58
    assert opt.n_recommended == 14
    assert opt.n_best_measured == 8


def test_ranges_cover_the_estimate_for_noisy_data():
    rng = np.random.default_rng(2)
    n = np.repeat(np.arange(1, 9), 3)
    perf = 40.0 * amdahl_speedup(n, 0.9) * (1 + 0.02 * rng.standard_normal(n.size))
    ppw = 5.0 * woo_lee_perf_per_watt(n, 0.9, 0.3, 1.0) * (1 + 0.02 * rng.standard_normal(n.size))
    fit = fit_scaling(n, perf, ppw, shared_power_fraction=None)
    opt = optimal_nodes(fit)
    lo, hi = opt.n_best_efficiency_range
    assert lo <= opt.n_best_efficiency <= hi
    lo, hi = opt.n_recommended_range
    assert lo <= opt.n_recommended <= hi
    assert optimal_nodes(fit) == opt  # same seed, same answer


def test_no_efficiency_loss_is_unbounded_not_invented():
    fit = _exact_fit(1.0, 0.4)  # perfectly parallel: k never bites
    opt = optimal_nodes(fit, n_max=50)
    assert opt.status == "unbounded"
    assert "no limit" in opt.reason


def test_cannot_tell_fits_give_no_optimum():
    flat = fit_scaling(np.repeat(np.arange(1, 5), 3), 10.0 + 0.1 * np.random.default_rng(0).standard_normal(12),
                       np.full(12, 2.0))
    opt = optimal_nodes(flat)
    assert flat.status == "flat"
    assert opt.status == "cannot_tell" and opt.n_recommended is None and opt.n_best_efficiency is None
    assert "not distinguishable" in opt.reason
    assert opt.n_best_measured in (1, 2, 3, 4)  # measured values are still reported

    few = fit_scaling([1, 2], [1.0, 2.0], [1.0, 0.9])
    assert optimal_nodes(few).status == "cannot_tell"

    perf_only = fit_scaling(np.arange(1, 5), amdahl_speedup(np.arange(1, 5), 0.8))
    opt = optimal_nodes(perf_only)
    assert opt.status == "cannot_tell" and "no perf/W" in opt.reason


def test_overall_combines_benchmarks_and_lists_the_left_out():
    a = _exact_fit(0.9, 0.3, c=2.0, nodes=range(1, 11))
    b = _exact_fit(0.8, 0.5, c=0.5, nodes=range(1, 11))
    flat = fit_scaling([1, 2], [1.0, 1.0], [1.0, 1.0])
    opt = overall_optimum({"allreduce": a, "bcast": b, "latency": flat}, tolerance=0.05)
    assert opt.members["allreduce"] == "used" and opt.members["bcast"] == "used"
    assert opt.members["latency"].startswith("too_few_points")
    # By hand: geometric mean of each curve over its own maximum on 1..40.
    grid = np.arange(1, 41)
    qa = woo_lee_perf_per_watt(grid, 0.9, 0.3, 2.0)
    qb = woo_lee_perf_per_watt(grid, 0.8, 0.5, 0.5)
    combined = np.sqrt(qa / qa.max() * qb / qb.max())
    assert opt.n_max == 40
    assert opt.n_best_efficiency == int(np.argmax(combined)) + 1
    assert opt.n_recommended == int(grid[combined >= 0.95 * combined.max()].max())
    assert optimal_nodes(b, tolerance=0.05).n_best_efficiency < opt.n_best_efficiency < \
        optimal_nodes(a, tolerance=0.05).n_best_efficiency
    json.dumps(opt.to_dict(), allow_nan=False)


def test_overall_with_nothing_usable_cannot_tell():
    opt = overall_optimum({"x": fit_scaling([1, 2], [1.0, 1.0])})
    assert opt.status == "cannot_tell" and opt.members["x"].startswith("too_few_points")


@pytest.mark.parametrize("kwargs, message", [({"tolerance": 1.0}, "tolerance"), ({"n_max": 0}, "n_max")])
def test_bad_options_rejected(kwargs, message):
    with pytest.raises(ShoalError, match=message):
        optimal_nodes(_exact_fit(0.9, 0.4), **kwargs)
