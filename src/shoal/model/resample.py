"""How far n* can be trusted: a bootstrap over repetitions, refitting per resample.

Each resample draws, at every node count, as many repetitions as were
measured, with replacement, from that node count's own repetitions; f is
refitted to the resample exactly as to the data (``fit_scaling`` on
performance), and n* follows from f with k and c as given. The 2.5th and
97.5th percentiles of the resampled n* are its 95 % interval. Unlike f ± one
standard error (kept as a cross-check), this needs no assumption about the
shape of the noise, and an n* that grows without bound as f nears 1 shows
as an open upper end instead of a symmetric range.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from scipy import optimize

from shoal.model.scaling import _jsonable, amdahl_speedup, best_nodes_closed_form

RESAMPLES = 400
# Beyond this many devices n* counts as unbounded (as shoal.model.mix.N_LIMIT).
N_LIMIT = 1000.0
SEED = 0
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """A statistic's point value and its bootstrap interval (``hi`` None: unbounded above)."""

    value: float | None
    lo: float | None
    hi: float | None
    resamples: int
    failed: int  # resamples whose fit did not hold (left out)

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))

    def contains(self, x: float) -> bool:
        return self.lo is not None and x >= self.lo and (self.hi is None or x <= self.hi)

    def overlaps(self, other: "Interval") -> bool:
        if self.lo is None or other.lo is None:
            return False
        return (self.hi is None or other.lo <= self.hi) and (other.hi is None or self.lo <= other.hi)


def fitted_f(nodes, perf) -> float | None:
    """Amdahl's f fitted to performance per repetition, by the objective of ``fit_scaling``
    (relative residuals, a free one-node scale) but profiled: for a given f the best scale
    is closed-form, leaving a one-dimensional search over f in [0, 1] (a thousand times
    faster than the general fit, which a bootstrap repeats hundreds of times)."""
    n = np.asarray(nodes, dtype=float)
    y = np.asarray(perf, dtype=float)
    keep = np.isfinite(y) & (y > 0)
    n, y = n[keep], y[keep]
    if np.unique(n).size < 3:
        return None

    def cost(f: float) -> float:
        a = amdahl_speedup(n, f) / y
        scale = a.sum() / (a * a).sum()
        return float(((scale * a - 1.0) ** 2).sum())

    result = optimize.minimize_scalar(cost, bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-7})
    return float(result.x)


def resampled(nodes, values, statistic: Callable[[np.ndarray, np.ndarray], float | None],
              resamples: int = RESAMPLES, seed: int = SEED) -> list[float | None]:
    """``statistic(nodes, values)`` over bootstrap resamples drawn within each node count."""
    nodes = np.asarray(nodes, dtype=float)
    values = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(nodes == n) for n in np.unique(nodes)]
    out = []
    for _ in range(resamples):
        pick = np.concatenate([rng.choice(g, size=g.size, replace=True) for g in groups])
        out.append(statistic(nodes[pick], values[pick]))
    return out


def f_samples(nodes, perf, resamples: int = RESAMPLES, seed: int = SEED) -> list[float | None]:
    """Amdahl's f refitted to each resample of the repetitions."""
    return resampled(nodes, perf, fitted_f, resamples, seed)


def interval(value: float | None, samples: list[float | None], level: float = LEVEL) -> Interval:
    """Percentile interval of the finite-or-infinite samples (None samples are failed fits)."""
    good = np.array([s for s in samples if s is not None], dtype=float)
    failed = len(samples) - good.size
    if good.size == 0:
        return Interval(value, None, None, len(samples), failed)
    tail = (1.0 - level) / 2.0
    lo = float(np.quantile(good, tail, method="lower"))
    top = float(np.quantile(good, 1.0 - tail, method="higher"))
    hi = top if math.isfinite(top) else None
    return Interval(value, float(lo) if math.isfinite(lo) else None, hi, len(samples), failed)


def _bounded(n: float) -> float:
    """n* beyond N_LIMIT devices is unbounded: f is then 1 within what repetitions can tell."""
    return n if n <= N_LIMIT else math.inf


def n_star_interval(f: float | None, f_boot: list[float | None], k: float, c: float,
                    level: float = LEVEL) -> Interval:
    """n* = sqrt(c f / (k (1 - f))) at the fitted f, and its interval over the resampled f."""
    value = _bounded(best_nodes_closed_form(f, k, c)) if f is not None else None
    samples = [_bounded(best_nodes_closed_form(x, k, c)) if x is not None else None for x in f_boot]
    out = interval(value, samples, level)
    if value is not None and not math.isfinite(value):
        out = Interval(None, out.lo, out.hi, out.resamples, out.failed)
    return out


def mix_ppw_intervals(samples: dict[str, dict[int, list[float]]], weights: dict[str, float],
                      over: int | None = None, resamples: int = RESAMPLES, seed: int = SEED,
                      level: float = LEVEL) -> dict[int, Interval]:
    """A mix's measured perf/W at each node count relative to its smallest, with a 95 % interval;
    or, with ``over``, relative to its own perf/W at ``over`` devices within each resample: the
    interval of that ratio holds 1 where the measurements cannot tell the two sizes apart.

    ``samples[name][n]``: one member's energy per unit of work in each repetition at n devices.
    The value is the inverse of shoal.model.mix.measured_mix over the medians. Each resample
    draws every point's repetitions with replacement from its own, independently of the others,
    and repeats the same weighted sum with each member's measured median at its smallest node
    count as the fixed unit, so a size's interval carries the noise of its own points only (not
    that of the smallest size, which every size would otherwise share). Node counts every
    member measured."""
    clean = {name: {n: np.array([v for v in values if math.isfinite(v)], dtype=float)
                    for n, values in by_n.items()} for name, by_n in samples.items()}
    clean = {name: {n: v for n, v in by_n.items() if v.size} for name, by_n in clean.items()}
    counts = sorted(set.intersection(*(set(by_n) for by_n in clean.values()))) if clean else []
    if not counts or (over is not None and over not in counts):
        return {}
    total = sum(weights[name] for name in clean) or 1.0
    rng = np.random.default_rng(seed)
    value = np.zeros(len(counts))
    drawn = np.zeros((resamples, len(counts)))
    for name in sorted(clean):
        by_n = clean[name]
        base_n = min(by_n)
        medians = {n: float(np.median(v)) for n, v in by_n.items()}
        boot = {n: np.median(v[rng.integers(0, v.size, size=(resamples, v.size))], axis=1)
                for n, v in sorted(by_n.items())}
        w = weights[name] / total
        value += w * np.array([medians[n] / medians[base_n] for n in counts])
        drawn += w * np.stack([boot[n] / medians[base_n] for n in counts], axis=1)
    if over is not None:  # perf/W at n over perf/W at ``over`` = E(over) / E(n)
        at = counts.index(over)
        value, drawn = value[at] / value, drawn[:, [at]] / drawn
    else:
        value, drawn = 1.0 / value, 1.0 / drawn
    tail = (1.0 - level) / 2.0
    return {n: Interval(float(value[i]), float(np.quantile(drawn[:, i], tail, method="lower")),
                        float(np.quantile(drawn[:, i], 1.0 - tail, method="higher")), resamples, 0)
            for i, n in enumerate(counts)}
