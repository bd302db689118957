"""Carrying a measured cycle over to a device: schedule, CPU scaling, contention and energy."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from shoal import profiles
from shoal.pallex import boot, project, stagefile

APP = stagefile.parse({"app": {"name": "p"}, "stages": {"cap": {"command": ["/bin/true"]}}})
DEMAND = {"cap": project.StageDemand(work_s=1.2, cpu_s=0.2)}


def test_baseline_energy_is_the_sum_of_its_phases():
    b, d = boot.load("rpi3"), profiles.load()["rpi3"]
    p = project.project(APP, DEMAND, b, d, "baseline")
    cpu_dev = 0.2 / d.speed
    t_app = 1.0 + cpu_dev
    assert p.userspace_end_s == pytest.approx(2.95) and p.app_end_s == pytest.approx(2.95 + t_app)
    expected = (4.51 + 5.65 + d.idle_W * t_app + (d.busy_W - d.idle_W) * cpu_dev / d.cores + 0.7)
    assert p.energy_J == pytest.approx(expected)
    assert p.duration_s == pytest.approx(6.5 + 2.95 + t_app + 0.2)


def test_pallex_ends_the_cycle_when_the_application_is_done():
    b, d = boot.load("rpi3"), profiles.load()["rpi3"]
    p = project.project(APP, DEMAND, b, d, "pallex")
    assert p.app_end_s == pytest.approx(0.75 + 1.0 + 0.2 / d.speed)
    assert p.post_kernel_J == pytest.approx(b.config("EU").power_W * p.app_end_s)  # inside userspace init


def test_a_busy_single_core_stretches_cpu_work_inside_userspace_init():
    b, d = boot.load("rpi0w"), profiles.load()["rpi0w"]
    assert b.userspace_cpu_share == 1.0
    shared = project.project(APP, DEMAND, b, d, "pallex")
    free = project.project(APP, DEMAND, dataclasses.replace(b, userspace_cpu_share=0.0), d, "pallex")
    cpu_dev = 0.2 / d.speed
    assert shared.app_end_s == pytest.approx(free.app_end_s + cpu_dev)  # half a core: twice as long
    assert shared.userspace_end_s == pytest.approx(9.45 + cpu_dev)  # initialisation waited as long
    assert project.project(APP, DEMAND, b, d, "baseline").userspace_end_s == pytest.approx(9.45)


def test_network_bytes_cross_the_link():
    b, d = boot.load("rpi3"), profiles.load()["rpi3"]
    dem = {"cap": project.StageDemand(1.0, 0.0, 2_500_000)}
    slow = project.project(APP, dem, b, d, "baseline", link_bps=40e6)
    fast = project.project(APP, dem, b, d, "baseline")
    assert slow.app_end_s - fast.app_end_s == pytest.approx(0.5)


# -- what a cold start reads off the SD card ------------------------------------------

TWO = stagefile.parse({"app": {"name": "q"}, "stages": {"cap": {"command": ["/bin/true"]},
                                                        "load": {"command": ["/bin/true"]}}})


def test_a_cold_start_reads_its_files_at_the_card_rate_after_boot():
    b, d = boot.load("rpi3"), profiles.load()["rpi3"]
    assert b.storage_read_Bps == 25e6
    dem = {"cap": project.StageDemand(1.0, 0.0, 0, {"python3.11 standard library": 5_000_000})}
    bare = project.project(APP, {"cap": project.StageDemand(1.0, 0.0)}, b, d, "baseline")
    read = project.project(APP, dem, b, d, "baseline")
    assert read.storage_B == {"cap": 5_000_000}
    assert read.app_end_s - bare.app_end_s == pytest.approx(0.2)   # 5 MB at 25 MB/s, the card alone


def test_inside_userspace_init_a_stage_gets_half_the_card():
    b, d = boot.load("rpi3"), profiles.load()["rpi3"]
    big = {"cap": project.StageDemand(1.0, 0.0, 0, {"lib": 100_000_000})}
    p = project.project(APP, big, b, d, "pallex")
    # From 0.75 s to EU's 2.95 s at 12.5 MB/s (27.5 MB), the other 72.5 MB at 25 MB/s.
    assert p.app_end_s == pytest.approx(0.75 + 2.2 + 72.5 / 25 + 1.0)


def test_a_package_is_read_once_per_cycle_by_the_stage_that_starts_first():
    b, d = boot.load("rpi3"), profiles.load()["rpi3"]
    dem = {"cap": project.StageDemand(1.0, 0.0, 0, {"site-packages/numpy": 10_000_000, "libc": 2_000_000}),
           "load": project.StageDemand(0.5, 0.0, 0, {"site-packages/numpy": 12_000_000, "libc": 2_000_000})}
    p = project.project(TWO, dem, b, d, "baseline")
    assert p.storage_B == {"cap": 12_000_000, "load": 2_000_000}   # only what load loads beyond cap
    assert project.storage_bytes(["load", "cap"], dem) == {"load": 14_000_000, "cap": 0}


def test_a_profile_without_a_card_rate_reads_nothing():
    b, d = boot.load("rpi3"), profiles.load()["rpi3"]
    dem = {"cap": project.StageDemand(1.0, 0.0, 0, {"lib": 100_000_000})}
    off = project.project(APP, dem, dataclasses.replace(b, storage_read_Bps=0.0), d, "baseline")
    assert off.storage_B == {"cap": 0}
    bare = project.project(APP, {"cap": project.StageDemand(1.0, 0.0)}, b, d, "baseline")
    assert off.app_end_s == pytest.approx(bare.app_end_s)


def test_the_virtual_boards_card_is_held_to_its_read_and_write_rates(tmp_path):
    from shoal.pallex import vmboard, vmimage

    b = boot.load("rpi3")
    assert (b.storage_read_Bps, b.storage_write_Bps) == (25e6, 10e6)  # the bus; the U1 card's minimum write
    assert "speed class 1" in b.sources["storage_write_Bps"]
    img = vmimage.Image(tmp_path, tmp_path / "root.img", tmp_path / "vmlinuz", tmp_path / "initrd", tmp_path / "u")
    argv = vmboard.argv(img, vmboard.BoardSpec(4, 2 ** 30, b.storage_read_Bps, write_Bps=b.storage_write_Bps))
    drive = argv[argv.index("-drive") + 1]
    assert "throttling.bps-read=25000000" in drive and "throttling.bps-write=10000000" in drive
    free = vmboard.argv(img, vmboard.BoardSpec(4, 2 ** 30))
    assert "throttling" not in free[free.index("-drive") + 1]


def test_the_faster_card_writes_at_the_bus_and_the_choice_is_refused_in_one_line(tmp_path):
    from shoal.pallex import vmboard

    b = boot.load("rpi3")
    # No card given: the profile's (U1). U1: its 10 MB/s minimum; U3: 30 MB/s, held to the 25 MB/s bus.
    assert vmboard.card_rates(None, b.storage_read_Bps, b.storage_write_Bps) == (25e6, 10e6)
    assert vmboard.card_rates("u1", b.storage_read_Bps, b.storage_write_Bps) == (25e6, 10e6)
    assert vmboard.card_rates("u3", b.storage_read_Bps, b.storage_write_Bps) == (25e6, 25e6)
    assert vmboard.card_rates("u3", None, None) == (None, 30e6)  # no bus modelled: the class's own
    proc = subprocess.run([sys.executable, "-m", "shoal", "pallex", "cycle", "--card", "u2"],
                          capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "--card" in lines[0] and "u3" in lines[0], proc.stderr
