"""The energy-optimal (node count, clock) pair: measured, with its interval, and the model's.

Measured: each workload's energy per unit of work at every (n, clock) pair, each point's own
repetitions, mixed as the study mixes node counts (``resample.mix_ppw_intervals``: a weighted
sum of each workload's energy over its energy at a fixed first pair), so a pair's perf/W and
its 95 % interval are relative to that first pair; the pairs whose perf/W over the best's has
an interval that holds 1 cannot be told apart from the best.

The model: Amdahl's parallel fraction f of each workload (fitted by its study) with the
P-state's speed r and watts. One unit of work takes T1 / r on one device; on n devices the
serial part (1 - f) T1 / r runs on one busy device while n - 1 idle, the parallel part
f T1 / (r n) on n busy devices, and the switch's W draws throughout, so the energy per unit is

    E(n, state) = T1 / r x [(1 - f)(B + (n - 1) I) + f B + W ((1 - f) + f / n)]

(B, I the device's busy and idle watts at that state): at W = 0 and one clock, Woo-Lee's
1 + (n - 1) k (1 - f) times f B. T1 cancels in every ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from shoal.model.resample import Interval, mix_ppw_intervals
from shoal.profiles.clock import PState


def energy_per_work(n: int, f: float, state: PState, shared_W: float) -> float:
    """The model's energy per unit of work at n devices on ``state``, in units of T1 (J per s of
    one nominal device's work): see the module docstring."""
    serial, parallel = 1.0 - f, f
    return (serial * (state.busy_W + (n - 1) * state.idle_W) + parallel * state.busy_W
            + shared_W * (serial + parallel / n)) / state.relative_speed


def predicted_ppw(pairs: Sequence[tuple[int, float]], f: dict[str, float], weights: dict[str, float],
                  states: dict[float, PState], shared_W: float) -> list[float]:
    """The model's perf/W at each pair relative to the first, mixed as the measurements are
    (a weighted sum of each workload's energy over its energy at the first pair)."""
    total = sum(weights[name] for name in f) or 1.0
    mixed = [0.0] * len(pairs)
    for name, fraction in f.items():
        energies = [energy_per_work(n, fraction, states[hz], shared_W) for n, hz in pairs]
        for i, e in enumerate(energies):
            mixed[i] += weights[name] / total * e / energies[0]
    return [1.0 / e for e in mixed]


@dataclass(frozen=True)
class PairAnswer:
    """The measured best pair, its perf/W (relative to the first pair) and interval, the pairs
    that tie with it, and each pair's numbers."""

    best: tuple[int, float] | None
    best_ppw: Interval | None
    tied: list[tuple[int, float]]
    ppw: dict[tuple[int, float], Interval]  # pair -> perf/W relative to the first pair
    vs_best: dict[tuple[int, float], Interval]  # pair -> perf/W over the best's


def measured_best(pairs: Sequence[tuple[int, float]], samples: dict[str, dict[int, list[float]]],
                  weights: dict[str, float]) -> PairAnswer:
    """``samples[workload][i]``: energy per unit of work of each repetition at ``pairs[i]``; the
    pairs every workload measured take part."""
    ppw = mix_ppw_intervals(samples, weights)
    if not ppw:
        return PairAnswer(None, None, [], {}, {})
    best_i = max(ppw, key=lambda i: ppw[i].value)
    vs_best = mix_ppw_intervals(samples, weights, over=best_i)
    tied = [pairs[i] for i, iv in sorted(vs_best.items()) if iv.hi is not None and iv.hi >= 1.0]
    return PairAnswer(pairs[best_i], ppw[best_i], tied, {pairs[i]: iv for i, iv in ppw.items()},
                      {pairs[i]: iv for i, iv in vs_best.items()})
