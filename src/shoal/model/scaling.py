"""How performance and performance per watt change with the node count.

The models (n nodes, parallel fraction f, idle fraction k, shared power
fraction c; every curve equals 1 at n = 1):

* Amdahl speed-up           ``S(n) = 1 / ((1 - f) + f / n)``
* relative energy per work  ``E(n) = (c * T(n) + 1 + (n - 1) k (1 - f)) / (1 + c)``
  with ``T(n) = 1 / S(n)`` the relative run time
* perf per watt             ``Q(n) = 1 / E(n)`` -- Woo and Lee's
  ``1 / (1 + (n - 1) k (1 - f))`` when ``c = 0``
* average power             ``W(n) = E(n) * S(n)``

Woo-Lee charges a busy node 1 and an idle node k; during the serial part
one node works and n - 1 wait. ``c`` adds power that does not scale with
the node count (a switch, a head node), in units of one busy node; it is
what makes perf/W rise before it falls (the thesis' Figure 1.2). With
``c = 0``, perf/W can only fall as nodes are added.

:func:`fit_scaling` fits f (and k, and optionally c) to measurements with
bounded least squares and reports standard errors from the covariance,
goodness of fit and a status that says when the data cannot tell.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from shoal.errors import ShoalError

PARAMS = ("perf_scale", "f", "ppw_scale", "k", "c")
_LOWER = {"perf_scale": 0.0, "f": 0.0, "ppw_scale": 0.0, "k": 0.0, "c": 0.0}
_UPPER = {"perf_scale": np.inf, "f": 1.0, "ppw_scale": np.inf, "k": 1.0, "c": 1000.0}

OK = "ok"
TOO_FEW_POINTS = "too_few_points"
FLAT = "flat"
DECLINING = "declining"
UNDETERMINED = "undetermined"
FIT_FAILED = "fit_failed"
STATUSES = (OK, TOO_FEW_POINTS, FLAT, DECLINING, UNDETERMINED, FIT_FAILED)

# f must exceed Z_DISTINCT standard errors to count as "more nodes help".
Z_DISTINCT = 1.96


def amdahl_speedup(n, f):
    """Amdahl speed-up ``1 / ((1 - f) + f / n)`` on n nodes."""
    n = np.asarray(n, dtype=float)
    return 1.0 / ((1.0 - f) + f / n)


def woo_lee_energy(n, f, k, c=0.0):
    """Energy per unit of work on n nodes relative to one node."""
    n = np.asarray(n, dtype=float)
    t = (1.0 - f) + f / n
    return (c * t + 1.0 + (n - 1.0) * k * (1.0 - f)) / (1.0 + c)


def woo_lee_perf_per_watt(n, f, k, c=0.0):
    """Woo-Lee perf/W relative to one node: ``1 / (1 + (n - 1) k (1 - f))`` for c = 0."""
    return 1.0 / woo_lee_energy(n, f, k, c)


def woo_lee_power(n, f, k, c=0.0):
    """Average power on n nodes relative to one node: energy per work times speed-up."""
    return woo_lee_energy(n, f, k, c) * amdahl_speedup(n, f)


def best_nodes_closed_form(f: float, k: float, c: float) -> float:
    """Real-valued n minimising ``E(n)``: ``sqrt(c f / (k (1 - f)))``.

    From ``dE/dn = (-c f / n^2 + k (1 - f)) / (1 + c) = 0``; E is convex in
    n, so the best integer is the floor or ceiling. Returns inf when nothing
    bounds it (k = 0 or f = 1 with c > 0) and 1 when c = 0 or f = 0.
    """
    if c <= 0 or f <= 0:
        return 1.0
    if k <= 0 or f >= 1:
        return math.inf
    return max(1.0, math.sqrt(c * f / (k * (1.0 - f))))


@dataclass(frozen=True)
class Prediction:
    """Model curves at the requested node counts, with delta-method standard errors."""

    nodes: np.ndarray
    speedup: np.ndarray
    perf: np.ndarray
    perf_se: np.ndarray
    perf_per_watt: np.ndarray | None  # in the units of the fitted perf/W (relative when normalised)
    perf_per_watt_se: np.ndarray | None
    energy_rel: np.ndarray | None  # E(n)
    power_rel: np.ndarray | None  # W(n)


@dataclass(frozen=True)
class ScalingFit:
    """Result of :func:`fit_scaling`. ``status != "ok"`` means the data cannot tell; ``reason`` says why.

    Parameters that were fixed rather than fitted have standard error 0;
    parameters that do not apply (no perf/W data and no known k) are None.
    """

    status: str
    reason: str
    params: dict  # name -> value (None when not part of the model)
    stderr: dict  # name -> standard error (0 when fixed, None when not part of the model)
    free: tuple  # names of the fitted parameters, in covariance order
    covariance: np.ndarray  # of the free parameters
    normalized: bool
    n_points: int
    n_distinct: int
    dof: int
    r2_perf: float | None
    r2_ppw: float | None
    rmse_rel: float | None  # root mean square of relative residuals, both curves together
    reduced_chi2: float | None  # only when standard errors of the data were given
    nodes: np.ndarray = field(repr=False)
    perf: np.ndarray = field(repr=False)
    ppw: np.ndarray | None = field(repr=False)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def f(self) -> float | None:
        return self.params["f"]

    @property
    def k(self) -> float | None:
        return self.params["k"]

    @property
    def has_efficiency(self) -> bool:
        """True when k is known (fitted from perf/W or given), so perf/W can be predicted."""
        return self.params["k"] is not None

    def theta(self) -> np.ndarray:
        """Values of the free parameters, in covariance order."""
        return np.array([self.params[name] for name in self.free], dtype=float)

    def with_theta(self, theta) -> dict:
        """All parameters with the free ones replaced by ``theta`` (clipped to their bounds)."""
        params = dict(self.params)
        for name, value in zip(self.free, theta):
            params[name] = float(np.clip(value, _LOWER[name], _UPPER[name]))
        return params

    def predict(self, nodes) -> Prediction:
        """Model curves at any node counts (inside or beyond the measured ones)."""
        n = np.asarray(nodes, dtype=float)
        if np.any(~np.isfinite(n)) or np.any(n < 1):
            raise ShoalError("node counts to predict at must be finite and >= 1")
        p = self.params
        theta = self.theta()

        def perf_of(th):
            q = self.with_theta(th)
            return q["perf_scale"] * amdahl_speedup(n, q["f"])

        perf = perf_of(theta)
        perf_se = _delta_se(perf_of, theta, self.covariance)
        ppw = ppw_se = energy = power = None
        if self.has_efficiency:

            def ppw_of(th):
                q = self.with_theta(th)
                return (q["ppw_scale"] if q["ppw_scale"] is not None else 1.0) * woo_lee_perf_per_watt(
                    n, q["f"], q["k"], q["c"])

            ppw = ppw_of(theta)
            ppw_se = _delta_se(ppw_of, theta, self.covariance)
            energy = woo_lee_energy(n, p["f"], p["k"], p["c"])
            power = woo_lee_power(n, p["f"], p["k"], p["c"])
        return Prediction(n, amdahl_speedup(n, p["f"]), perf, perf_se, ppw, ppw_se, energy, power)

    def to_dict(self) -> dict:
        """JSON-ready summary (NaN and inf become None)."""
        return _jsonable({
            "status": self.status,
            "reason": self.reason,
            "params": self.params,
            "stderr": self.stderr,
            "free": list(self.free),
            "normalized": self.normalized,
            "n_points": self.n_points,
            "n_distinct": self.n_distinct,
            "dof": self.dof,
            "r2_perf": self.r2_perf,
            "r2_ppw": self.r2_ppw,
            "rmse_rel": self.rmse_rel,
            "reduced_chi2": self.reduced_chi2,
            "nodes": self.nodes.tolist(),
            "perf": self.perf.tolist(),
            "perf_per_watt": None if self.ppw is None else self.ppw.tolist(),
        })


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (np.floating, float)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def _delta_se(func, theta, cov) -> np.ndarray:
    """First-order standard error of ``func(theta)`` from the parameter covariance."""
    base = np.asarray(func(theta), dtype=float)
    if theta.size == 0:
        return np.zeros_like(base)
    if not np.all(np.isfinite(cov)):
        return np.full_like(base, np.nan)
    jac = np.empty(base.shape + (theta.size,))
    for i in range(theta.size):
        h = 1e-6 * max(abs(theta[i]), 1e-3)
        up, down = theta.copy(), theta.copy()
        up[i] += h
        down[i] -= h
        jac[..., i] = (np.asarray(func(up)) - np.asarray(func(down))) / (2 * h)
    var = np.einsum("...i,ij,...j->...", jac, cov, jac)
    return np.sqrt(np.maximum(var, 0.0))


def _clean(nodes, perf, ppw, perf_se, ppw_se):
    n = np.asarray(nodes, dtype=float).ravel()
    y = np.asarray(perf, dtype=float).ravel()
    arrays = {"perf": y}
    if ppw is not None:
        arrays["perf_per_watt"] = np.asarray(ppw, dtype=float).ravel()
    if perf_se is not None:
        arrays["perf_se"] = np.asarray(perf_se, dtype=float).ravel() * np.ones(n.size)
    if ppw_se is not None:
        if ppw is None:
            raise ShoalError("perf/W standard errors were given without perf/W values")
        arrays["ppw_se"] = np.asarray(ppw_se, dtype=float).ravel() * np.ones(n.size)
    for name, arr in arrays.items():
        if arr.size != n.size:
            raise ShoalError(f"{name} has {arr.size} values but there are {n.size} node counts; give one per point")
    if np.any(~np.isfinite(n)) or np.any(n < 1) or np.any(n != np.round(n)):
        raise ShoalError("node counts must be whole numbers >= 1")
    for name, arr in arrays.items():
        bad = np.isfinite(arr) & (arr <= 0) if not name.endswith("_se") else np.isfinite(arr) & (arr < 0)
        if np.any(bad):
            i = int(np.argmax(bad))
            what = "must be >= 0" if name.endswith("_se") else "must be > 0 (higher is better: use 1/time for times)"
            raise ShoalError(f"{name} {what}; got {arr[i]:g} at n={n[i]:g}")
    return n, arrays


def fit_scaling(nodes, perf, perf_per_watt=None, *, normalized: bool = False, perf_se=None, ppw_se=None,
                idle_fraction: float | None = None, shared_power_fraction: float | None = 0.0) -> ScalingFit:
    """Fit Amdahl's f (and Woo-Lee's k) to measurements over node counts.

    ``nodes``, ``perf`` and optionally ``perf_per_watt`` are one value per
    measured point (repeated node counts are fine; NaN marks a missing
    value and is left out). ``perf`` is "higher is better" (B/s, 1/s).
    With ``normalized=True`` the values are already relative to one node
    and the scales are fixed to 1; otherwise a scale (the one-node value)
    is fitted for each curve.

    Both curves are fitted together so f, k and the scales share one
    covariance. Without ``perf_se``/``ppw_se`` residuals are relative
    (equal relative noise assumed, its size estimated from the scatter);
    with them, residuals are weighted by them and taken as absolute.

    ``idle_fraction`` fixes k (e.g. idle/busy watts of a device) instead
    of fitting it; it is required to predict perf/W without perf/W data.
    ``shared_power_fraction`` is c, the node-count-independent power in
    units of one busy node (0 by default); ``None`` fits it (needs perf/W).
    """
    n, arrays = _clean(nodes, perf, perf_per_watt, perf_se, ppw_se)
    y_perf = arrays["perf"]
    y_ppw = arrays.get("perf_per_watt")
    if shared_power_fraction is None and y_ppw is None:
        raise ShoalError("fitting the shared power fraction c needs perf/W measurements")
    if shared_power_fraction is not None and shared_power_fraction < 0:
        raise ShoalError(f"shared power fraction must be >= 0, got {shared_power_fraction}")
    if idle_fraction is not None and not 0 <= idle_fraction <= 1:
        raise ShoalError(f"idle fraction k must be between 0 and 1, got {idle_fraction}")

    use_perf = np.isfinite(y_perf)
    use_ppw = np.isfinite(y_ppw) if y_ppw is not None else np.zeros(n.size, bool)
    n_perf, n_ppw = n[use_perf], n[use_ppw]

    has_ppw = bool(use_ppw.any())
    # Without perf/W data or a known k there is no efficiency model at all.
    absent = set() if has_ppw or idle_fraction is not None else {"ppw_scale", "k", "c"}
    fixed = {"perf_scale": 1.0 if normalized else None, "f": None,
             "ppw_scale": 1.0 if normalized or not has_ppw else None,
             "k": idle_fraction, "c": shared_power_fraction}
    base = {name: None if name in absent else fixed[name] for name in PARAMS}
    free = tuple(name for name in PARAMS if name not in absent and fixed[name] is None)

    def params_from(theta) -> dict:
        out = dict(base)
        out.update(zip(free, (float(v) for v in theta)))
        return out

    m = int(use_perf.sum() + use_ppw.sum())
    n_distinct = int(np.unique(n_perf).size)
    p = len(free)
    common = dict(normalized=normalized, n_points=m, n_distinct=n_distinct, nodes=n, perf=y_perf, ppw=y_ppw)

    def cannot(status, reason):
        cov = np.full((p, p), np.nan)
        return ScalingFit(status, reason, dict(base), _stderr(base, free, cov), free, cov, dof=max(m - p, 0),
                          r2_perf=None, r2_ppw=None, rmse_rel=None, reduced_chi2=None, **common)

    if n_distinct < 3:
        return cannot(TOO_FEW_POINTS, f"performance measured at {n_distinct} distinct node count(s); "
                                      "a scaling fit needs at least 3")
    if m < p + 1:
        return cannot(TOO_FEW_POINTS, f"{m} measured values for {p} fitted parameters; need at least {p + 1}")

    ydata = np.concatenate([y_perf[use_perf], y_ppw[use_ppw] if has_ppw else []])
    given_se = perf_se is not None or ppw_se is not None
    if given_se:
        if perf_se is None or (has_ppw and ppw_se is None):
            raise ShoalError("give standard errors for every fitted curve (perf_se and ppw_se), or for none")
        sigma = np.concatenate([arrays["perf_se"][use_perf], arrays["ppw_se"][use_ppw] if has_ppw else []])
        if np.any(~np.isfinite(sigma)) or np.any(sigma <= 0):
            raise ShoalError("standard errors of the data must be finite and > 0 for every point used in the fit")
    else:
        sigma = np.abs(ydata)

    def model(_x, *theta):
        q = params_from(theta)
        out = [q["perf_scale"] * amdahl_speedup(n_perf, q["f"])]
        if has_ppw:
            out.append(q["ppw_scale"] * woo_lee_perf_per_watt(n_ppw, q["f"], q["k"], q["c"]))
        return np.concatenate(out)

    best = None
    for start in _starts(free, n_perf, y_perf[use_perf], n_ppw, y_ppw[use_ppw] if has_ppw else None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optimize.OptimizeWarning)
            try:
                popt, pcov = optimize.curve_fit(
                    model, np.arange(m), ydata, p0=start, sigma=sigma, absolute_sigma=given_se,
                    bounds=([_LOWER[k] for k in free], [_UPPER[k] for k in free]), method="trf", maxfev=20000)
            except (RuntimeError, ValueError):
                continue
        cost = float(np.sum(((model(None, *popt) - ydata) / sigma) ** 2))
        if best is None or cost < best[0]:
            best = (cost, popt, pcov)
    if best is None:
        return cannot(FIT_FAILED, "least-squares fit did not converge from any starting point")
    cost, popt, pcov = best
    params = params_from(popt)
    dof = m - p
    fitted = model(None, *popt)
    rel = (fitted - ydata) / ydata
    gof = {
        "r2_perf": _r2(y_perf[use_perf], fitted[: n_perf.size]),
        "r2_ppw": _r2(y_ppw[use_ppw], fitted[n_perf.size:]) if has_ppw else None,
        "rmse_rel": float(np.sqrt(np.mean(rel**2))),
        "reduced_chi2": cost / dof if given_se else None,
    }
    se = _stderr(params, free, pcov)
    f, f_se = params["f"], se["f"]
    if f_se is None or not math.isfinite(f_se):
        return ScalingFit(UNDETERMINED, "the data do not pin down f (singular covariance); measure more node counts",
                          params, se, free, pcov, dof=dof, **gof, **common)
    if f - Z_DISTINCT * f_se <= 0:
        slope = stats.linregress(n_perf, y_perf[use_perf]) if np.ptp(y_perf[use_perf]) > 0 else None
        if slope is not None and slope.slope < 0 and slope.pvalue < 0.05:
            return ScalingFit(DECLINING, f"performance falls as nodes are added (slope {slope.slope:.3g} per node, "
                              f"p={slope.pvalue:.2g}); Amdahl cannot describe it and no optimum is inferred",
                              params, se, free, pcov, dof=dof, **gof, **common)
        return ScalingFit(FLAT, f"performance does not change with n beyond its noise (f = {f:.3g} +/- {f_se:.2g} "
                          "is not distinguishable from 0); no optimum is inferred",
                          params, se, free, pcov, dof=dof, **gof, **common)
    return ScalingFit(OK, f"f = {f:.3g} +/- {f_se:.2g}" + (
        f", k = {params['k']:.3g} +/- {se['k']:.2g}" if params["k"] is not None else ""),
        params, se, free, pcov, dof=dof, **gof, **common)


def _stderr(params, free, cov) -> dict:
    se = {}
    diag = np.diag(cov) if cov.size else np.array([])
    for name in PARAMS:
        if params[name] is None:
            se[name] = None
        elif name in free:
            v = float(diag[free.index(name)])
            se[name] = math.sqrt(v) if math.isfinite(v) and v >= 0 else math.inf
        else:
            se[name] = 0.0
    return se


def _r2(y, fitted) -> float | None:
    ss_tot = float(np.sum((y - np.mean(y)) ** 2))
    if ss_tot == 0:
        return None
    return 1.0 - float(np.sum((y - fitted) ** 2)) / ss_tot


def _starts(free, n_perf, y_perf, n_ppw, y_ppw):
    """A few starting points; the fit keeps the lowest cost (the surface has flat valleys)."""
    first = np.argmin(n_perf)
    seen = set()
    for f0 in (0.2, 0.6, 0.95):
        for k0 in (0.1, 0.5):
            for c0 in (0.2, 2.0):
                start = {
                    "perf_scale": y_perf[first] / float(amdahl_speedup(n_perf[first], f0)),
                    "f": f0,
                    "ppw_scale": None if y_ppw is None else float(y_ppw[np.argmin(n_ppw)]),
                    "k": k0,
                    "c": c0,
                }
                point = tuple(start[name] for name in free)
                if point not in seen:
                    seen.add(point)
                    yield list(point)


def fit_table(df, *, perf_col: str, by=(), nodes_col: str = "nodes", ppw_col: str | None = None,
              **options) -> dict:
    """:func:`fit_scaling` for every group of a results table (one fit per benchmark, or per benchmark and size).

    ``by`` names the grouping columns; the result maps each group key (a
    tuple of the ``by`` values, ``()`` without grouping) to its fit.
    ``options`` go to :func:`fit_scaling` unchanged.
    """
    by = [by] if isinstance(by, str) else list(by)
    needed = by + [nodes_col, perf_col] + ([ppw_col] if ppw_col else [])
    missing = [col for col in needed if col not in df.columns]
    if missing:
        raise ShoalError(f"results table has no column(s) {', '.join(missing)} "
                         f"(columns: {', '.join(map(str, df.columns))})")
    groups = df.groupby(by, sort=True) if by else [((), df)]
    fits = {}
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        fits[key] = fit_scaling(part[nodes_col].to_numpy(), part[perf_col].to_numpy(),
                                part[ppw_col].to_numpy() if ppw_col else None, **options)
    return fits
