"""Amdahl and Woo-Lee models, and the least-squares fit of f and k (synthetic data, fixed seeds)."""

import json

import numpy as np
import pytest

from shoal.errors import ShoalError
from shoal.model import (
    amdahl_speedup,
    best_nodes_closed_form,
    fit_scaling,
    woo_lee_energy,
    woo_lee_perf_per_watt,
    woo_lee_power,
)
from shoal.model.scaling import DECLINING, FLAT, OK, TOO_FEW_POINTS


def test_models_by_hand():
    assert amdahl_speedup(4, 0.9) == pytest.approx(1 / (0.1 + 0.9 / 4))
    assert amdahl_speedup(1, 0.3) == pytest.approx(1.0)
    assert amdahl_speedup(8, 1.0) == pytest.approx(8.0)
    # Woo-Lee as printed in the thesis (eq. 3.4) when there is no shared power.
    assert woo_lee_perf_per_watt(5, 0.8, 0.4) == pytest.approx(1 / (1 + 4 * 0.4 * 0.2))
    # perf/W is speed-up over average power, at every n and with shared power.
    n = np.arange(1, 20)
    for c in (0.0, 1.5):
        ratio = amdahl_speedup(n, 0.9) / woo_lee_power(n, 0.9, 0.3, c)
        assert woo_lee_perf_per_watt(n, 0.9, 0.3, c) == pytest.approx(ratio)
        assert woo_lee_energy(1, 0.9, 0.3, c) == pytest.approx(1.0)
    # Perfectly parallel work on nodes with no shared power: power is n busy nodes.
    assert woo_lee_power(n, 1.0, 0.5) == pytest.approx(n)


def test_closed_form_optimum():
    assert best_nodes_closed_form(0.9, 0.3, 2.0) == pytest.approx(np.sqrt(2 * 0.9 / (0.3 * 0.1)))
    assert best_nodes_closed_form(0.9, 0.3, 0.0) == 1.0
    assert best_nodes_closed_form(1.0, 0.3, 1.0) == np.inf
    assert best_nodes_closed_form(0.9, 0.0, 1.0) == np.inf


def _synthetic(f, k, c=0.0, noise=0.02, seed=1, nodes=range(1, 7), reps=3, perf_scale=120.0, ppw_scale=8.0):
    rng = np.random.default_rng(seed)
    n = np.repeat(np.array(list(nodes)), reps)
    perf = perf_scale * amdahl_speedup(n, f) * (1 + noise * rng.standard_normal(n.size))
    ppw = ppw_scale * woo_lee_perf_per_watt(n, f, k, c) * (1 + noise * rng.standard_normal(n.size))
    return n, perf, ppw


def _within(fit, name, truth, z=3.0):
    value, se = fit.params[name], fit.stderr[name]
    assert se > 0
    assert abs(value - truth) <= z * se, f"{name} = {value} +/- {se}, truth {truth}"


def test_fit_recovers_f_and_k_with_noise():
    n, perf, ppw = _synthetic(0.9, 0.4)
    fit = fit_scaling(n, perf, ppw)
    assert fit.status == OK, fit.reason
    _within(fit, "f", 0.9)
    _within(fit, "k", 0.4)
    _within(fit, "perf_scale", 120.0)
    _within(fit, "ppw_scale", 8.0)
    assert fit.free == ("perf_scale", "f", "ppw_scale", "k")
    assert fit.params["c"] == 0.0 and fit.stderr["c"] == 0.0
    assert fit.dof == 2 * n.size - 4
    assert fit.r2_perf > 0.99
    assert 0.005 < fit.rmse_rel < 0.05  # the 2% noise put in


def test_fit_recovers_shared_power_fraction():
    n, perf, ppw = _synthetic(0.9, 0.3, c=1.0, noise=0.01, seed=7, nodes=range(1, 9))
    fit = fit_scaling(n, perf, ppw, shared_power_fraction=None)
    assert fit.status == OK, fit.reason
    for name, truth in (("f", 0.9), ("k", 0.3), ("c", 1.0)):
        _within(fit, name, truth)


def test_fit_normalized_data_fixes_the_scales():
    n, perf, ppw = _synthetic(0.75, 0.2, perf_scale=1.0, ppw_scale=1.0, seed=3)
    fit = fit_scaling(n, perf, ppw, normalized=True)
    assert fit.status == OK
    assert fit.free == ("f", "k")
    assert fit.params["perf_scale"] == 1.0 and fit.stderr["perf_scale"] == 0.0
    _within(fit, "f", 0.75)
    _within(fit, "k", 0.2)


def test_fit_with_given_standard_errors_is_chi_square_consistent():
    rng = np.random.default_rng(11)
    n = np.repeat(np.arange(1, 7), 4)
    sigma = 2.0
    perf = 100 * amdahl_speedup(n, 0.8) + sigma * rng.standard_normal(n.size)
    fit = fit_scaling(n, perf, perf_se=np.full(n.size, sigma))
    assert fit.status == OK
    _within(fit, "f", 0.8)
    assert 0.3 < fit.reduced_chi2 < 2.0
    assert fit.k is None and not fit.has_efficiency


def test_exact_data_recovered_exactly():
    n = np.arange(1, 6)
    fit = fit_scaling(n, 3.0 * amdahl_speedup(n, 0.6), 2.0 * woo_lee_perf_per_watt(n, 0.6, 0.5))
    assert fit.params["f"] == pytest.approx(0.6, abs=1e-6)
    assert fit.params["k"] == pytest.approx(0.5, abs=1e-6)


def test_known_idle_fraction_gives_efficiency_without_perf_per_watt():
    n = np.arange(1, 6)
    fit = fit_scaling(n, amdahl_speedup(n, 0.6), normalized=True, idle_fraction=0.4433)
    assert fit.status == OK and fit.has_efficiency
    assert fit.k == 0.4433 and fit.stderr["k"] == 0.0
    pred = fit.predict([1, 3])
    assert pred.perf_per_watt == pytest.approx(woo_lee_perf_per_watt(np.array([1, 3]), 0.6, 0.4433), rel=1e-6)


def test_prediction_beyond_measured_nodes():
    n, perf, ppw = _synthetic(0.9, 0.4)
    fit = fit_scaling(n, perf, ppw)
    grid = np.arange(1, 25)
    pred = fit.predict(grid)
    f, k = fit.params["f"], fit.params["k"]
    assert pred.perf == pytest.approx(fit.params["perf_scale"] * amdahl_speedup(grid, f))
    assert pred.perf_per_watt == pytest.approx(fit.params["ppw_scale"] * woo_lee_perf_per_watt(grid, f, k))
    assert pred.energy_rel == pytest.approx(woo_lee_energy(grid, f, k))
    assert np.all(pred.perf_se > 0)
    # Uncertainty grows when extrapolating far beyond the six measured counts.
    assert pred.perf_se[-1] > pred.perf_se[5]
    with pytest.raises(ShoalError, match=">= 1"):
        fit.predict([0])


def test_too_few_distinct_node_counts_says_so():
    fit = fit_scaling([1, 2, 1, 2, 1, 2], [1.0, 1.9, 1.1, 2.0, 1.0, 1.95])
    assert fit.status == TOO_FEW_POINTS and not fit.ok
    assert "2 distinct node count" in fit.reason
    assert fit.params["f"] is None


def test_fewer_points_than_parameters_plus_one_says_so():
    # Three perf values and one perf/W value: four values for four parameters.
    fit = fit_scaling([1, 2, 3], [1.0, 1.8, 2.4], [np.nan, np.nan, 0.5])
    assert fit.status == TOO_FEW_POINTS
    assert "4 measured values for 4 fitted parameters" in fit.reason


def test_flat_curve_says_so():
    rng = np.random.default_rng(5)
    n = np.repeat(np.arange(1, 7), 3)
    perf = 50.0 * (1 + 0.03 * rng.standard_normal(n.size))
    fit = fit_scaling(n, perf)
    assert fit.status == FLAT
    assert "not distinguishable from 0" in fit.reason


def test_declining_curve_says_so():
    rng = np.random.default_rng(6)
    n = np.repeat(np.arange(1, 7), 3)
    perf = 100.0 - 8.0 * n + rng.standard_normal(n.size)  # e.g. 1/latency getting worse with more nodes
    fit = fit_scaling(n, perf)
    assert fit.status == DECLINING
    assert "falls as nodes are added" in fit.reason


def test_missing_values_are_left_out():
    n = np.arange(1, 7)
    perf = 10 * amdahl_speedup(n, 0.7)
    perf[2] = np.nan
    fit = fit_scaling(n, perf)
    assert fit.status == OK and fit.n_points == 5
    assert fit.params["f"] == pytest.approx(0.7, abs=1e-6)


@pytest.mark.parametrize("args, kwargs, message", [
    (([1, 2, 3], [1.0, 2.0]), {}, "perf has 2 values but there are 3 node counts"),
    (([0, 1, 2], [1.0, 2.0, 3.0]), {}, "whole numbers >= 1"),
    (([1, 2.5, 3], [1.0, 2.0, 3.0]), {}, "whole numbers >= 1"),
    (([1, 2, 3], [1.0, -2.0, 3.0]), {}, "perf must be > 0"),
    (([1, 2, 3], [1.0, 2.0, 3.0]), {"shared_power_fraction": None}, "needs perf/W measurements"),
    (([1, 2, 3], [1.0, 2.0, 3.0]), {"idle_fraction": 1.5}, "between 0 and 1"),
    (([1, 2, 3], [1.0, 2.0, 3.0]), {"perf_se": [1.0, 0.0, 1.0]}, "finite and > 0"),
])
def test_bad_input_is_one_clear_error(args, kwargs, message):
    with pytest.raises(ShoalError, match=message):
        fit_scaling(*args, **kwargs)


def test_to_dict_is_strict_json():
    n, perf, ppw = _synthetic(0.9, 0.4)
    text = json.dumps(fit_scaling(n, perf, ppw).to_dict(), allow_nan=False)
    again = json.loads(text)
    assert again["status"] == "ok" and set(again["params"]) == {"perf_scale", "f", "ppw_scale", "k", "c"}
    flat = fit_scaling([1, 2], [1.0, 1.0])
    assert json.loads(json.dumps(flat.to_dict(), allow_nan=False))["params"]["f"] is None


def test_standard_errors_for_one_curve_only_rejected():
    n = np.arange(1, 5)
    with pytest.raises(ShoalError, match="for every fitted curve"):
        fit_scaling(n, amdahl_speedup(n, 0.5), woo_lee_perf_per_watt(n, 0.5, 0.3), perf_se=np.full(4, 0.01))


def test_standard_errors_are_calibrated():
    # Over many noisy data sets, the truth lies within one standard error about 68% of the time.
    trials, hits = 80, {"f": 0, "k": 0}
    for seed in range(trials):
        n, perf, ppw = _synthetic(0.9, 0.4, seed=100 + seed)
        fit = fit_scaling(n, perf, ppw)
        for name, truth in (("f", 0.9), ("k", 0.4)):
            hits[name] += abs(fit.params[name] - truth) <= fit.stderr[name]
    for name, count in hits.items():
        assert 0.5 <= count / trials <= 0.85, f"{name}: {count}/{trials} within one standard error"
