"""Lifetime (eq. 3), boot profiles and the seed's tables."""

from __future__ import annotations

import json
import math

import pytest

from shoal import profiles
from shoal.model import lifetime
from shoal.pallex import boot, seedtables


def test_equation_3_battery_and_constant_draw():
    e = lifetime.battery_J(2400, 5)
    assert e == 43200.0
    assert lifetime.lifetime_h(e, 2.0 * 3600, 1) == pytest.approx(6.0)  # 2 W for an hour = 6 h (§I)


@pytest.mark.parametrize("device, config, expected", [
    ("rpi3", "EU", 70.9), ("rpi3", "EU-slow", 69.4), ("rpi3", "ALLU", 61.9),
    ("rpi0w", "EU", 74.5), ("rpi0w", "EU-slow", 72.7), ("rpi0w", "ALLU", 50.8)])
def test_boot_only_lifetimes_at_60_per_hour(device, config, expected):
    p = boot.load(device)
    energy = p.bootloader_kernel_J + p.config(config).energy_J
    assert lifetime.lifetime_h(43200, energy, 60) == pytest.approx(expected, abs=0.1)


def test_with_forced_forced_shutdown_and_sleep_draw():
    p = boot.load("rpi3")
    energy = p.bootloader_kernel_J + p.config("EU").energy_J + p.shutdown_J
    seconds = p.bootloader_kernel_s + p.config("EU").duration_s + p.shutdown_s
    assert lifetime.lifetime_h(43200, energy, 60) == pytest.approx(66.3, abs=0.1)
    assert lifetime.lifetime_h(43200, energy, 1, 0.005, seconds) == pytest.approx(1499, abs=1)
    assert lifetime.max_cycles_per_h(seconds) == pytest.approx(373, abs=1)


def test_gain_is_independent_of_cycle_rate_without_sleep_draw_and_shrinks_with_it():
    gains = [lifetime.gain(lifetime.lifetime_h(43200, 12.0, n), lifetime.lifetime_h(43200, 10.0, n))
             for n in (1, 12, 60)]
    assert max(gains) - min(gains) < 1e-12 and gains[0] == pytest.approx(0.2)
    slept = [lifetime.gain(lifetime.lifetime_h(43200, 12.0, n, 0.01, 10), lifetime.lifetime_h(43200, 10.0, n, 0.01, 8))
             for n in (1, 60)]
    assert slept[0] < slept[1] < 0.2


def test_cycles_that_do_not_fit_an_hour_are_refused():
    from shoal.errors import ShoalError

    with pytest.raises(ShoalError, match="do not fit in an hour"):
        lifetime.lifetime_h(43200, 10, 400, 0.0, 10.0)


def test_table_checker_flags_exactly_the_seeds_inconsistent_cells():
    found = {(p["cell"], p["problem"].split(":")[0]) for p in seedtables.check_tables()}
    assert found == {("rpi3 slow SDC 50 % ALLU", "energy"), ("rpi3 slow SDC AVG ALLU", "energy"),
                     ("rpi0w slow SDC AVG ALLU", "duration"),
                     ("rpi3 slow SDC 5 % ALLU", "missing from the text"),
                     ("rpi0w slow SDC 5 % ALLU", "missing from the text")}
    avg = next(p for p in seedtables.check_tables() if p["cell"] == "rpi3 slow SDC AVG ALLU")
    assert avg["implied_userspace"] == pytest.approx(7.41)


def test_implied_post_kernel_energy_reproduces_the_seeds_lifetime_gains():
    fixed = 4.51 + 0.7
    for scenario, (dur, energy, life) in seedtables.GAINS["rpi3"].items():
        if energy is None or life is None:
            continue
        ratio = seedtables.implied_post_kernel_ratio(energy / 100, life / 100)
        assert seedtables.lifetime_gain(energy / 100, ratio * fixed, fixed) == pytest.approx(life / 100)
        assert ratio * fixed >= 5.65  # at least the bare EU userspace energy: plausible


def test_profiles_carry_fixed_numbers_with_sources():
    devices = profiles.load()
    assert devices["rpi0w"].busy_W == 0.688 and "9.65 s" in devices["rpi0w"].sources["busy"]
    for name in ("rpi3", "rpi0w"):
        assert "bootloader+kernel power, not idle" in devices[name].sources["idle"]
        p = boot.load(name)
        assert p.bootloader_kernel_s == pytest.approx(6.5)
        assert all(p.sources.get(k) for k in ("bootloader_s", "kernel_s", "bootloader_kernel_J", "shutdown_J"))
        assert all(p.sources[f"units.{u}"] for u in p.units)
    assert boot.load("rpi3").bootloader_kernel_W == pytest.approx(0.694, abs=1e-3)
    assert boot.load("rpi0w").config("EU-slow").power_W == pytest.approx(0.688, abs=1e-3)


def test_lifetime_cli_json_and_figure(tmp_path, shoal):
    proc = shoal("pallex", "lifetime", "--profile", "rpi0w", "--json", "--plot", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    eu = next(r for r in out["boot_only"] if r["config"] == "EU")
    assert eu["lifetime_h_at_60"] == pytest.approx(71.9, abs=0.1)
    assert (tmp_path / "lifetime-rpi0w.png").stat().st_size > 10_000
    bad = shoal("pallex", "lifetime", "--capacity-mAh", "-1")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert not math.isnan(out["battery_J"])


def test_lifetimes_as_a_library_call():
    from shoal.pallex import lifetimes

    out = lifetimes.run("rpi0w", [1.0, 60.0])
    eu = next(r for r in out["boot_only"] if r["config"] == "EU")
    assert eu["lifetime_h_at_60"] == pytest.approx(71.9, abs=0.1) and eu["lifetime_h_at_1"] > eu["lifetime_h_at_60"]
    assert out["battery_J"] == pytest.approx(2.4 * 3600 * 5.0) and "figure" not in out
