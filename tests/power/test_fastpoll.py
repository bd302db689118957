"""The C poller used at 1 kHz: same readings as the Python loop, faults, fallback."""

from __future__ import annotations

import time

import numpy as np
import pytest

from shoal.power import open_session


def _energy(session, seconds):
    session.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    time.sleep(seconds)
    t1 = time.monotonic()
    result = session.energy_between(t0, t1)[0]  # the package zone
    session.stop()
    return result, t1 - t0


@pytest.mark.parametrize("engine", ["c", "python"])
def test_both_engines_measure_the_same_known_power(kernel, live_counter, monkeypatch, engine):
    if engine == "python":
        monkeypatch.setenv("SHOAL_POWER_FASTPOLL", "0")
    zone = kernel.rapl_zone("intel-rapl:0", "package-0", 0, max_power_uw=50_000_000)
    kernel.rapl_zone("intel-rapl:0:0", "core", 777)
    with live_counter(zone / "energy_uj", watts=8.0, modulus=262143328851):
        session = open_session("rapl", rate_hz=1000)
        result, seconds = _energy(session, 1.5)
    assert bool(session.sampler.recorders) and (len(session.recorders[0]) > 250)
    # the fake counter's writer thread may lag by tens of ms on a loaded machine
    assert result["energy_J"] == pytest.approx(8.0 * seconds, rel=0.03)
    t, (package, core) = session.recorders[0].snapshot()
    assert np.all(np.diff(t) > 0)
    assert np.all(core == 777)  # the constant subzone is read on every tick too


def test_c_poller_is_used_at_1khz_and_python_at_10hz(kernel):
    kernel.rapl_zone("intel-rapl:0", "package-0", 5)
    fast = open_session("rapl", rate_hz=1000)
    fast.start()
    slow = open_session("rapl", rate_hz=10)
    slow.start()
    try:
        assert len(fast.sampler._pollers) == 1 and fast.sampler._threads == []
        assert slow.sampler._pollers == [] and len(slow.sampler._threads) == 1
    finally:
        fast.stop()
        slow.stop()
    assert fast.sampler._pollers == []


def test_failed_reads_in_the_c_poller_are_nan_with_a_reason(kernel):
    zone = kernel.rapl_zone("intel-rapl:0", "package-0", 1000)
    session = open_session("rapl", rate_hz=500)
    session.start()
    time.sleep(0.2)
    (zone / "energy_uj").write_text("oops\n")
    time.sleep(0.2)
    (zone / "energy_uj").write_text("3000000\n")
    time.sleep(0.2)
    session.stop()
    _, (values,) = session.recorders[0].snapshot()
    assert np.isnan(values).sum() >= 20
    assert not np.any(values == 0)  # a failure is never a zero
    (fault,) = session.faults()
    assert "not an integer" in fault


def test_without_a_compiler_the_sampler_stays_in_python_and_says_so(kernel, monkeypatch, tmp_path):
    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    kernel.rapl_zone("intel-rapl:0", "package-0", 5)
    session = open_session("rapl", rate_hz=1000)
    session.start()
    time.sleep(0.1)
    session.stop()
    assert session.sampler._pollers == []
    assert any("no C compiler" in n for n in session.notes)
    assert len(session.recorders[0]) > 20
