"""One answer over several workloads: the node count that minimises the energy of a mix.

A mix runs each workload in proportion to its weight w (summing to 1), each
one's job counted by its energy on one device, so that no workload weighs
more because its job is bigger. Its energy per job relative to one device is

    E_mix(n) = sum_i w_i E_i(n),    E_i(n) = (c_i T_i(n) + 1 + (n - 1) k (1 - f_i)) / (1 + c_i)

(Woo-Lee with shared power, docs/model.md §2), a sum of convex functions of
n, so it has one minimum, n*_mix. The same sum over measured energies (each
workload's energy per unit of work at n over that at one device) gives the
measured best of the mix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from shoal.model.scaling import woo_lee_energy

# Beyond this many devices the mix's optimum counts as unbounded.
N_LIMIT = 1000.0


@dataclass(frozen=True)
class Member:
    name: str
    weight: float
    f: float
    k: float
    c: float


def mix_energy(n, members: list[Member]):
    """E_mix(n) relative to one device."""
    return sum(m.weight * woo_lee_energy(n, m.f, m.k, m.c) for m in members)


def mix_best(members: list[Member]) -> float:
    """The real n >= 1 minimising E_mix (inf when it lies beyond N_LIMIT devices)."""
    if not members:
        return math.nan
    result = optimize.minimize_scalar(lambda x: float(mix_energy(x, members)), bounds=(1.0, N_LIMIT),
                                      method="bounded", options={"xatol": 1e-3})
    n = float(result.x)
    return math.inf if n > 0.99 * N_LIMIT else max(1.0, n)


def measured_mix(relative_energy: dict[str, dict[int, float]], weights: dict[str, float]) -> dict[int, float]:
    """Measured E_mix per node count from each workload's energy per unit of work relative
    to one device (node counts every member measured)."""
    counts = set.intersection(*(set(e) for e in relative_energy.values())) if relative_energy else set()
    total = sum(weights[name] for name in relative_energy) or 1.0
    return {n: float(sum(weights[name] * e[n] for name, e in relative_energy.items()) / total)
            for n in sorted(counts)}


def best_measured(energy: dict[int, float]) -> int | None:
    """The node count with the least measured energy per job (highest perf/W)."""
    good = {n: e for n, e in energy.items() if np.isfinite(e)}
    return min(good, key=good.get) if good else None


def tied_range(vs_best: dict, best: int) -> tuple[int, int]:
    """The measured node counts on either side of ``best``, next to each other, whose perf/W
    over the best's has an interval (shoal.model.resample.Interval) that holds 1: sizes the
    measurements cannot tell apart from the best. (best, best) when its neighbours stand clear."""
    counts = sorted(vs_best)
    if best not in vs_best:
        return best, best
    at = counts.index(best)
    lo = hi = at
    while lo > 0 and vs_best[counts[lo - 1]].contains(1.0):
        lo -= 1
    while hi < len(counts) - 1 and vs_best[counts[hi + 1]].contains(1.0):
        hi += 1
    return counts[lo], counts[hi]
