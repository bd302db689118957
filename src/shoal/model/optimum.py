"""The node count to run at, from fitted scaling models.

Two answers, both on the integer grid 1..n_max of the fitted model's
perf/W curve ``Q(n) = 1 / E(n)`` (see :mod:`shoal.model.scaling`):

* ``n_best_efficiency`` -- the n with the highest perf/W. With no shared
  power (c = 0) Woo-Lee perf/W only falls with n, so this is 1; with
  shared power it is the floor or ceiling of ``sqrt(c f / (k (1 - f)))``.
* ``n_recommended`` -- the largest n whose perf/W stays within
  ``tolerance`` (default 10%) of the best. Performance rises with n
  (f > 0), so this is the fastest configuration that costs at most that
  much efficiency: "maximise performance subject to perf/W within X% of
  its best".

If perf/W is still within tolerance at ``n_max`` the model sets no limit
in range and the status is ``unbounded`` (nothing is invented). Ranges are
the 16th-84th percentiles (about one standard deviation) of the same
answers over parameter sets drawn from the fit's covariance, with a fixed
seed so results are reproducible.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping

import numpy as np

from shoal.errors import ShoalError
from shoal.model.scaling import _LOWER, _UPPER, ScalingFit, _jsonable, best_nodes_closed_form, woo_lee_energy

OK = "ok"
CANNOT_TELL = "cannot_tell"
UNBOUNDED = "unbounded"
DEFAULT_TOLERANCE = 0.10
DEFAULT_SAMPLES = 2000
# Predictions reach this many times the largest measured node count.
EXTRAPOLATION_FACTOR = 4


@dataclass(frozen=True)
class Optimum:
    """Node-count answer for one benchmark (or overall); ``status != "ok"`` explains itself in ``reason``."""

    status: str
    reason: str
    tolerance: float
    n_max: int | None
    n_best_efficiency: int | None = None
    n_best_efficiency_range: tuple | None = None
    n_recommended: int | None = None
    n_recommended_range: tuple | None = None
    closed_form_n: float | None = None
    n_max_measured: int | None = None
    extrapolated: bool = False  # n_recommended lies beyond the measured node counts
    n_best_measured: int | None = None  # highest measured perf/W (mean of repeats), whatever the status
    members: dict = field(default_factory=dict)  # overall only: benchmark -> "used" or why it was left out

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


def _check(tolerance: float, n_max: int | None) -> None:
    if not 0 <= tolerance < 1:
        raise ShoalError(f"tolerance must be a fraction in [0, 1), got {tolerance}")
    if n_max is not None and n_max < 1:
        raise ShoalError(f"n_max must be >= 1, got {n_max}")


def _measured_best(fit: ScalingFit) -> int | None:
    values = fit.ppw if fit.ppw is not None else None
    if values is None:
        return None
    ok = np.isfinite(values)
    if not ok.any():
        return None
    nodes = np.unique(fit.nodes[ok])
    means = [np.mean(values[ok][fit.nodes[ok] == n]) for n in nodes]
    return int(nodes[int(np.argmax(means))])


def _choose(ppw: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise 1-based (best n, largest n within tolerance of the best) on the grid 1..G."""
    best = np.argmax(ppw, axis=-1)
    peak = np.max(ppw, axis=-1, keepdims=True)
    within = ppw >= (1.0 - tolerance) * peak * (1 - 1e-12)
    grid = np.arange(1, ppw.shape[-1] + 1)
    recommended = np.max(np.where(within, grid, 0), axis=-1)
    return best + 1, recommended


def _sample_params(fit: ScalingFit, samples: int, seed: int) -> dict | None:
    """Parameter draws (f, k, c arrays) from the fit's covariance, clipped to the bounds."""
    theta = fit.theta()
    cov = fit.covariance
    if samples <= 0 or theta.size == 0 or not np.all(np.isfinite(cov)):
        return None
    rng = np.random.default_rng(seed)
    draws = rng.multivariate_normal(theta, cov, size=samples, method="eigh", check_valid="ignore")
    out = {}
    for name in ("f", "k", "c"):
        if name in fit.free:
            i = fit.free.index(name)
            out[name] = np.clip(draws[:, i], _LOWER[name], _UPPER[name])[:, None]
        else:
            out[name] = np.full((samples, 1), fit.params[name], dtype=float)
    return out


def _range(values) -> tuple | None:
    if values is None:
        return None
    lo, hi = np.percentile(values, [16, 84])
    return (int(round(lo)), int(round(hi)))


def optimal_nodes(fit: ScalingFit, *, tolerance: float = DEFAULT_TOLERANCE, n_max: int | None = None,
                  samples: int = DEFAULT_SAMPLES, seed: int = 0) -> Optimum:
    """Best and recommended node counts for one fitted benchmark (see the module docstring)."""
    _check(tolerance, n_max)
    measured_max = int(np.max(fit.nodes)) if fit.nodes.size else None
    base = dict(tolerance=tolerance, n_max_measured=measured_max, n_best_measured=_measured_best(fit))
    if not fit.ok:
        return Optimum(CANNOT_TELL, fit.reason, n_max=n_max, **base)
    if not fit.has_efficiency:
        return Optimum(CANNOT_TELL, "no perf/W measurements and no idle fraction k: perf/W cannot be predicted",
                       n_max=n_max, **base)
    n_max = n_max or EXTRAPOLATION_FACTOR * measured_max
    grid = np.arange(1, n_max + 1, dtype=float)
    p = fit.params
    ppw = 1.0 / woo_lee_energy(grid, p["f"], p["k"], p["c"])
    best, rec = (int(v) for v in _choose(ppw, tolerance))
    draws = _sample_params(fit, samples, seed)
    best_range = rec_range = None
    if draws is not None:
        sampled = 1.0 / woo_lee_energy(grid[None, :], draws["f"], draws["k"], draws["c"])
        s_best, s_rec = _choose(sampled, tolerance)
        best_range, rec_range = _range(s_best), _range(s_rec)
    closed = best_nodes_closed_form(p["f"], p["k"], p["c"])
    result = dict(n_max=n_max, n_best_efficiency=best, n_best_efficiency_range=best_range, n_recommended=rec,
                  n_recommended_range=rec_range, closed_form_n=closed, extrapolated=rec > measured_max, **base)
    if rec >= n_max or best >= n_max:
        return Optimum(UNBOUNDED, f"perf/W stays within {tolerance:.0%} of its best up to n_max={n_max} "
                       f"(f = {p['f']:.3g}, k = {p['k']:.3g}, c = {p['c']:.3g}); the model sets no limit in range",
                       **result)
    return Optimum(OK, f"best perf/W at n={best}; up to n={rec} stays within {tolerance:.0%} of it", **result)


def overall_optimum(fits: Mapping[str, ScalingFit], *, tolerance: float = DEFAULT_TOLERANCE,
                    n_max: int | None = None, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> Optimum:
    """One node count for a set of benchmarks.

    Each usable fit's perf/W curve is divided by its own maximum (so units
    and magnitudes do not matter) and the curves are combined by their
    geometric mean; the same two answers are then read off the combined
    curve. Fits that cannot tell, or have no efficiency model, are left out
    and listed in ``members`` with the reason.
    """
    _check(tolerance, n_max)
    members, used = {}, []
    for name, fit in fits.items():
        if not fit.ok:
            members[name] = f"{fit.status}: {fit.reason}"
        elif not fit.has_efficiency:
            members[name] = "no efficiency model (no perf/W data and no idle fraction k)"
        else:
            members[name] = "used"
            used.append(fit)
    measured_max = max((int(np.max(f.nodes)) for f in fits.values() if f.nodes.size), default=None)
    if not used:
        return Optimum(CANNOT_TELL, "no benchmark has a usable efficiency fit", tolerance=tolerance, n_max=n_max,
                       n_max_measured=measured_max, members=members)
    n_max = n_max or EXTRAPOLATION_FACTOR * max(int(np.max(f.nodes)) for f in used)
    grid = np.arange(1, n_max + 1, dtype=float)
    log_sum = np.zeros(grid.size)
    sampled_sum = np.zeros((samples, grid.size)) if samples > 0 else None
    for i, fit in enumerate(used):
        p = fit.params
        ppw = 1.0 / woo_lee_energy(grid, p["f"], p["k"], p["c"])
        log_sum += np.log(ppw / ppw.max())
        draws = _sample_params(fit, samples, seed + i)
        if sampled_sum is not None:
            if draws is None:
                sampled_sum += np.log(ppw / ppw.max())
            else:
                s = 1.0 / woo_lee_energy(grid[None, :], draws["f"], draws["k"], draws["c"])
                sampled_sum += np.log(s / s.max(axis=1, keepdims=True))
    combined = np.exp(log_sum / len(used))
    best, rec = (int(v) for v in _choose(combined, tolerance))
    best_range = rec_range = None
    if sampled_sum is not None:
        s_best, s_rec = _choose(np.exp(sampled_sum / len(used)), tolerance)
        best_range, rec_range = _range(s_best), _range(s_rec)
    used_max = max(int(np.max(f.nodes)) for f in used)
    result = dict(tolerance=tolerance, n_max=n_max, n_best_efficiency=best, n_best_efficiency_range=best_range,
                  n_recommended=rec, n_recommended_range=rec_range, n_max_measured=measured_max,
                  extrapolated=rec > used_max, members=members)
    if rec >= n_max or best >= n_max:
        return Optimum(UNBOUNDED, f"combined perf/W of {len(used)} fitted curve(s) stays within {tolerance:.0%} of its "
                       f"best up to n_max={n_max}; the models set no limit in range", **result)
    return Optimum(OK, f"over {len(used)} fitted curve(s): best combined perf/W at n={best}; up to n={rec} stays within "
                   f"{tolerance:.0%} of it", **result)

