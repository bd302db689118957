"""The energy-optimal (node count, clock) pair: the model at one clock is Woo-Lee's, and on a
made-up board whose P-states put the least energy per unit of work at the middle clock (by
construction: benchmarks/clockboard.toml) both the model and the measured pair find that clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shoal import profiles
from shoal.model import clockpair
from shoal.model.scaling import woo_lee_energy

CLOCKBOARD = Path(__file__).resolve().parents[2] / "benchmarks" / "clockboard.toml"


@pytest.fixture
def clockboard(monkeypatch):
    monkeypatch.setenv("SHOAL_PROFILES", str(CLOCKBOARD))
    board = profiles.load()["clockboard"]
    return {s.Hz: s for s in board.pstates}


@pytest.mark.parametrize("f, shared_W", [(0.9, 0.0), (0.97, 2.0), (0.5, 5.0)])
def test_at_one_clock_the_model_is_woo_lee_with_k_and_c_from_the_watts(f, shared_W):
    state = max(profiles.builtin("minnowboard").pstates, key=lambda s: s.Hz)
    k, c = state.idle_W / state.busy_W, shared_W / state.busy_W
    for n in (1, 2, 4, 6):
        ratio = clockpair.energy_per_work(n, f, state, shared_W) / clockpair.energy_per_work(1, f, state, shared_W)
        assert ratio == pytest.approx(float(woo_lee_energy(n, f, k, c)))


def test_a_slower_state_costs_its_busy_watts_over_its_speed(clockboard):
    fast, slow = clockboard[2e9], clockboard[1e9]
    # All parallel on one device: energy per unit is busy watts over speed.
    assert clockpair.energy_per_work(1, 1.0, slow, 0.0) / clockpair.energy_per_work(1, 1.0, fast, 0.0) == \
        pytest.approx((2.0 / 0.5) / 6.0)


def _pairs(states):
    return [(n, hz) for hz in sorted(states, reverse=True) for n in (1, 2, 3)]


def test_the_model_names_the_middle_clock_of_the_made_up_board(clockboard):
    pairs = _pairs(clockboard)
    ppw = clockpair.predicted_ppw(pairs, {"raytrace 512": 0.95, "msa S80-L150": 0.9},
                                  {"raytrace 512": 1.0, "msa S80-L150": 1.0}, clockboard, shared_W=2.0)
    best = pairs[int(np.argmax(ppw))]
    assert best[1] == 1.5e9 and best[0] == 3  # the switch's 2 W favour the most devices measured
    assert ppw[0] == pytest.approx(1.0)


def test_measured_repetitions_name_the_best_pair_its_interval_and_the_pairs_it_ties_with(clockboard):
    """Repetitions drawn around the model's energies with 3 % noise: the best pair is the
    model's, its interval holds its value, and a pair 1 % away ties with it where one 20 % away
    does not."""
    rng = np.random.default_rng(7)
    pairs = _pairs(clockboard)
    truth = {i: clockpair.energy_per_work(n, 0.95, clockboard[hz], 2.0) for i, (n, hz) in enumerate(pairs)}
    samples = {"raytrace 512": {i: list(e * rng.lognormal(0.0, 0.03, size=8)) for i, e in truth.items()}}
    answer = clockpair.measured_best(pairs, samples, {"raytrace 512": 1.0})
    assert answer.best == (3, 1.5e9)
    assert answer.best_ppw.lo <= answer.best_ppw.value <= answer.best_ppw.hi
    assert answer.best in answer.tied and (3, 2e9) not in answer.tied and (3, 1e9) not in answer.tied
    assert answer.vs_best[(1, 2e9)].hi < 1.0

    # A second workload that is the first within 1 % at the best pair's neighbour: tied.
    close = dict(truth)
    close[pairs.index((2, 1.5e9))] = truth[pairs.index((3, 1.5e9))] * 1.01
    samples = {"w": {i: list(e * rng.lognormal(0.0, 0.03, size=8)) for i, e in close.items()}}
    answer = clockpair.measured_best(pairs, samples, {"w": 1.0})
    assert {(2, 1.5e9), (3, 1.5e9)} <= set(answer.tied)
