"""Energy from readings: known integrals, windows, gaps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shoal.power import integrate
from shoal.power.base import ENERGY, MEASURED, POWER, Channel

POWER_CH = Channel(source="test", name="p", domain="board", kind=MEASURED, quantity=POWER, scale=1.0)
COUNTER_CH = Channel(source="test", name="e", domain="package", kind=MEASURED, quantity=ENERGY,
                     scale=1e-6, modulus=1e9, max_power_W=200.0)


def test_sine_power_at_1khz_integrates_within_half_a_percent():
    # P(t) = 5 + 3 sin(2 pi t / 0.7) over 2 s: exact integral known
    t = np.linspace(0.0, 2.0, 2001)
    p = 5.0 + 3.0 * np.sin(2 * np.pi * t / 0.7)
    exact = 5.0 * 2.0 + 3.0 * 0.7 / (2 * np.pi) * (1 - math.cos(2 * np.pi * 2.0 / 0.7))
    got = integrate.window(integrate.intervals(POWER_CH, t, p), 0.0, 2.0).energy_J
    assert abs(got - exact) / exact <= 0.005
    assert integrate.trapezoid_energy(t, p) == pytest.approx(got)


def test_square_wave_at_10hz_integrates_within_half_a_percent():
    # a 2 W / 6 W square wave of period 1 s sampled at 10 Hz: the trapezoid smears each
    # edge over one interval, rising and falling edges cancel over whole periods
    t = np.arange(0.0, 10.0001, 0.1)
    p = np.where((t % 1.0) < 0.5 - 1e-9, 2.0, 6.0)
    got = integrate.window(integrate.intervals(POWER_CH, t, p), 0.0, 10.0).energy_J
    assert abs(got - 40.0) / 40.0 <= 0.005
    ramp_t = np.linspace(0, 4, 9)
    assert integrate.window(integrate.intervals(POWER_CH, ramp_t, 3 * ramp_t), 0, 4).energy_J == pytest.approx(24.0)


def test_window_prorates_linear_power_exactly():
    iv = integrate.intervals(POWER_CH, [0.0, 1.0, 2.0], [0.0, 10.0, 10.0])
    w = integrate.window(iv, 0.5, 1.5)
    # 0.5..1: linear 5 -> 10 (3.75 J); 1..1.5: 10 W (5 J)
    assert w.energy_J == pytest.approx(8.75)
    assert w.coverage == pytest.approx(1.0) and not w.partial
    assert w.peak_power_W == pytest.approx(10.0)
    assert w.mean_power_W == pytest.approx(8.75)


def test_counter_window_and_coverage_beyond_the_data():
    t = np.arange(0.0, 1.01, 0.1)
    v = 1e6 * 4.0 * t  # 4 W
    iv = integrate.intervals(COUNTER_CH, t, v)
    assert integrate.window(iv, 0.25, 0.75).energy_J == pytest.approx(2.0)
    w = integrate.window(iv, 0.5, 1.5)  # half the window has no data yet
    assert w.energy_J == pytest.approx(2.0) and w.coverage == pytest.approx(0.5) and w.partial


def test_failed_reads_make_a_gap_in_power_but_not_in_counters():
    t = [0.0, 0.1, 0.2, 0.3, 0.4]
    p = [5.0, 5.0, math.nan, 5.0, 5.0]
    iv = integrate.intervals(POWER_CH, t, p)
    assert iv.ok.tolist() == [True, False, True]
    w = integrate.window(iv, 0.0, 0.4)
    assert w.energy_J == pytest.approx(1.0) and w.coverage == pytest.approx(0.5) and w.partial
    c = integrate.intervals(COUNTER_CH, t, [0.0, 5e5, math.nan, 1.5e6, 2e6])
    assert integrate.window(c, 0.0, 0.4).energy_J == pytest.approx(2.0)


def test_power_across_a_long_silence_is_not_interpolated():
    iv = integrate.intervals(POWER_CH, [0.0, 0.1, 30.0, 30.1], [5.0, 5.0, 50.0, 50.0], max_gap_s=1.0)
    assert iv.ok.tolist() == [True, False, True]
    assert iv.note[1] == integrate.NOTE_GAP


def test_empty_window_is_rejected_and_uncovered_window_is_none():
    iv = integrate.intervals(POWER_CH, [0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        integrate.window(iv, 1.0, 1.0)
    w = integrate.window(iv, 5.0, 6.0)
    assert w.energy_J is None and w.coverage == 0.0 and w.partial
