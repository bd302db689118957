"""Carrying a measured cycle over to a device: schedule, CPU scaling, contention and energy."""

from __future__ import annotations

import dataclasses

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
