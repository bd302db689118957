"""RAPL through powercap: zones, subzones, wraparound, permissions, faults."""

from __future__ import annotations

import errno
import os
import time

import numpy as np
import pytest

from shoal.errors import ShoalError
from shoal.power import integrate, open_session, spec, sysfs
from shoal.power.base import SourceUnavailable
from shoal.power.rapl import PERMISSION_HINT, RaplSource
from shoal.power.sampler import wrap_warnings


def _client_machine(kernel):
    kernel.rapl_zone("intel-rapl:0", "package-0", 1000, max_power_uw=None)
    kernel.rapl_zone("intel-rapl:0:0", "core", 500)
    kernel.rapl_zone("intel-rapl:0:1", "uncore", 100)
    kernel.rapl_zone("intel-rapl:0:2", "dram", 50)
    kernel.rapl_zone("intel-rapl:1", "psys", 5000)


def test_zones_and_subzones_are_found_with_domains_and_containment(kernel):
    _client_machine(kernel)
    source = RaplSource(node="n1")
    by_name = {c.name: c for c in source.channels}
    assert set(by_name) == {"package-0", "package-0/core", "package-0/uncore", "package-0/dram", "psys"}
    assert by_name["package-0"].domain == "package"
    assert by_name["package-0/dram"].domain == "dram"
    assert by_name["psys"].domain == "board"
    # core and uncore are inside the package; package and dram inside psys; dram is not in package
    assert by_name["package-0/core"].part_of == "package-0"
    assert by_name["package-0/dram"].part_of == ""
    assert by_name["package-0"].part_of == "psys"
    assert all(c.kind == "measured" and c.quantity == "energy" and c.node == "n1" for c in source.channels)
    assert by_name["package-0"].modulus == 262143328850 + 1
    # no max_power: twice the largest power limit (25 W short term) bounds the wrap check
    assert by_name["package-0"].max_power_W == pytest.approx(50.0)
    assert source.read() == [1000, 500, 100, 50, 5000]  # zone, its subzones, next zone
    source.close()


def test_amd_naming_and_mmio_duplicate_is_skipped(kernel):
    kernel.rapl_zone("amd-rapl:0", "package-0", 42, prefix="amd-rapl", max_power_uw=120000000)
    kernel.rapl_zone("intel-rapl-mmio:0", "package-0", 42, prefix="intel-rapl-mmio")
    source = RaplSource()
    assert [c.name for c in source.channels] == ["package-0"]
    assert source.channels[0].max_power_W == pytest.approx(120.0)
    source.close()


def test_no_powercap_says_so(kernel):
    with pytest.raises(SourceUnavailable, match="no RAPL: .*powercap does not exist"):
        RaplSource()


def test_single_wrap_is_corrected_with_the_kernel_modulus():
    # values run 0..max, so one wrap adds max + 1 - prev + now
    maximum = 262143328850
    assert integrate.counter_delta(maximum - 1000, 500, maximum + 1) == 1501
    assert integrate.counter_delta(maximum, 0, maximum + 1) == 1
    assert integrate.counter_delta(10, 20, maximum + 1) == 10
    assert integrate.counter_delta(20, 10, None) is None  # no modulus: a reset, unknown


def test_wrap_in_readings_counts_the_interval(kernel):
    kernel.rapl_zone("intel-rapl:0", "package-0", 0, max_range_uj=999_999, max_power_uw=100_000_000)
    ch = RaplSource().channels[0]
    t = [0.0, 0.005, 0.01, 0.015]  # shorter than the 10 ms wrap time
    v = [999_000, 999_900, 400, 1_400]  # wraps between 2nd and 3rd read
    iv = integrate.intervals(ch, t, v)
    assert iv.ok.all()
    assert iv.note == ["", integrate.NOTE_WRAP, ""]
    assert np.allclose(iv.energy_J, [900e-6, 500e-6, 1000e-6])


def test_double_wrap_cannot_be_seen_so_long_intervals_are_flagged(kernel):
    # range 1 J, max 100 W: the counter can wrap every 10 ms
    kernel.rapl_zone("intel-rapl:0", "package-0", 0, max_range_uj=999_999, max_power_uw=100_000_000)
    ch = RaplSource().channels[0]
    assert ch.wrap_time_s() == pytest.approx(0.01)
    # 2.5 J really flowed in 25 ms (two wraps); two reads show only 0.5 J
    iv = integrate.intervals(ch, [0.0, 0.025], [0, 500_000])
    assert not iv.ok[0] and iv.note[0] == integrate.NOTE_AMBIGUOUS
    assert np.isnan(iv.energy_J[0])
    w = integrate.window(iv, 0.0, 0.025)
    assert w.energy_J is None and w.partial
    # the same reads 5 ms apart are a plain single-wrap-free interval
    assert integrate.intervals(ch, [0.0, 0.005], [0, 500_000]).ok[0]


def test_sampling_period_that_could_miss_a_wrap_is_warned(kernel):
    kernel.rapl_zone("intel-rapl:0", "package-0", 0, max_range_uj=999_999, max_power_uw=100_000_000)
    source = RaplSource()
    assert wrap_warnings(source, 0.001) == []
    (warning,) = wrap_warnings(source, 0.008)
    assert "could miss a wrap" in warning and "rate above 200 Hz" in warning
    source.close()


def _deny(paths):
    real = sysfs.opener

    def opener(path, flags, *args):
        if any(path.endswith(p) for p in paths):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real(path, flags, *args)

    return opener


def test_root_only_energy_file_names_the_cve_and_the_fix(kernel, monkeypatch):
    # Tests run as root, and root reads mode-000 files: the denial is injected
    # at the single place sysfs files are opened.
    kernel.rapl_zone("intel-rapl:0", "package-0", 1000)
    monkeypatch.setattr(sysfs, "opener", _deny(["energy_uj"]))
    with pytest.raises(SourceUnavailable) as info:
        RaplSource()
    assert "CVE-2020-8694" in str(info.value) and "chmod" in str(info.value)
    # named explicitly: one ShoalError line; auto: falls back to the model and says why
    with pytest.raises(ShoalError, match="power source rapl: RAPL present but .*CVE-2020-8694"):
        spec.build(spec.parse("rapl"))
    kernel.proc_stat(user=10, idle=90)
    sources, notes = spec.build(spec.parse("auto"))
    assert [s.label for s in sources] == ["model"]
    assert any("CVE-2020-8694" in n for n in notes) and any("MODEL" in n for n in notes)


def test_one_unreadable_subzone_is_noted_not_fatal(kernel, monkeypatch):
    kernel.rapl_zone("intel-rapl:0", "package-0", 1000)
    kernel.rapl_zone("intel-rapl:0:2", "dram", 50)
    monkeypatch.setattr(sysfs, "opener", _deny(["intel-rapl:0:2/energy_uj"]))
    source = RaplSource()
    assert [c.name for c in source.channels] == ["package-0"]
    assert any(PERMISSION_HINT in n for n in source.notes)


def test_read_error_mid_run_is_nan_never_zero(kernel):
    zone = kernel.rapl_zone("intel-rapl:0", "package-0", 5_000_000)
    source = RaplSource()
    (zone / "energy_uj").write_text("garbage\n")
    values = source.read()
    assert np.isnan(values[0])
    assert "not an integer" in source.faults["package-0"][0]
    # a failed read between two good ones does not break a counter's interval
    ch = source.channels[0]
    iv = integrate.intervals(ch, [0.0, 0.1, 0.2], [5_000_000, values[0], 6_000_000])
    assert iv.ok.tolist() == [True] and iv.energy_J[0] == pytest.approx(1.0)
    source.close()


def test_session_measures_a_known_power_through_wraps(kernel, live_counter):
    # 20 W into a counter of range 1 J: it wraps 20 times a second; 200 Hz sampling sees each wrap.
    zone = kernel.rapl_zone("intel-rapl:0", "package-0", 0, max_range_uj=999_999, max_power_uw=40_000_000)
    with live_counter(zone / "energy_uj", watts=20.0, modulus=1_000_000):
        session = open_session("rapl", rate_hz=200, node="dev0")
        assert not any("could miss" in n for n in session.notes)
        session.start()
        time.sleep(0.1)
        t0 = time.monotonic()
        time.sleep(2.0)
        t1 = time.monotonic()
        (result,) = session.energy_between(t0, t1)
        session.stop()
    assert result["kind"] == "measured" and result["node"] == "dev0"
    rows = session.samples()
    assert any(r["note"] == integrate.NOTE_WRAP for r in rows)
    # A busy host can hold the sampler 25 ms (the range at the zone's 40 W maximum): that
    # interval could hold two wraps, so it is left out, said so, and the window is partial.
    ambiguous = [r for before, r in zip(rows, rows[1:])
                 if r["note"] == integrate.NOTE_AMBIGUOUS and r["t_mono_s"] > t0 and before["t_mono_s"] < t1]
    assert result["partial"] == (result["coverage"] < 0.999)
    assert result["coverage"] == pytest.approx(1.0) if not ambiguous else 0.5 < result["coverage"] < 1.0
    # the fake counter's writer thread may lag by tens of ms on a loaded machine
    assert result["energy_J"] == pytest.approx(20.0 * (t1 - t0) * result["coverage"], rel=0.03)
    assert all(r["energy_J"] == "" or r["energy_J"] >= 0 for r in rows)
