"""Statistics of one benchmark point from its repetition times.

The confidence interval of the median is distribution-free: the order
statistics at ranks n/2 -/+ z*sqrt(n)/2 bound the median with ~95%
confidence (normal approximation to the binomial). The native benchmark
program uses exactly this rule to decide when a point has converged, so the
table and the stopping decision agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
MIN_SAMPLES_FOR_CI = 6


def median_ci_indices(n: int, z: float = Z95) -> tuple[int, int]:
    """0-based indices (lower, upper) into the sorted sample bounding the median."""
    half = z * math.sqrt(n) / 2.0
    lower = max(0, math.floor(n / 2.0 - half))
    upper = min(n - 1, math.ceil(n / 2.0 + half))
    return lower, upper


@dataclass(frozen=True)
class PointStats:
    n: int
    median: float
    mean: float
    min: float
    max: float
    p90: float
    ci_low: float
    ci_high: float

    @property
    def ci_halfwidth_rel(self) -> float:
        """Half the CI width relative to the median (inf when undefined)."""
        if self.n < MIN_SAMPLES_FOR_CI or self.median <= 0:
            return math.inf
        return (self.ci_high - self.ci_low) / (2.0 * self.median)


def summarize(samples) -> PointStats:
    """Median, mean, min, max, p90 and the 95% CI of the median."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = int(x.size)
    if n == 0:
        raise ValueError("no samples")
    lo, hi = median_ci_indices(n)
    if n < MIN_SAMPLES_FOR_CI:
        ci_low, ci_high = float(x[0]), float(x[-1])
    else:
        ci_low, ci_high = float(x[lo]), float(x[hi])
    return PointStats(
        n=n,
        median=float(np.median(x)),
        mean=float(x.mean()),
        min=float(x[0]),
        max=float(x[-1]),
        p90=float(np.percentile(x, 90)),
        ci_low=ci_low,
        ci_high=ci_high,
    )
