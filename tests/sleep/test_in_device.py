"""Experiment C inside an emulated device: the sweep runs in the device's namespace and CPU
cgroup; cyclictest, which the kernel refuses SCHED_FIFO there, is a skipped row saying so."""

from __future__ import annotations

import os

import pytest

from shoal import cluster as clusters
from shoal.runs.store import Run
from shoal.wait import cyclictest, experiment_c, sleepaccuracy
from shoal.wait.sleepaccuracy import Sweep


@pytest.mark.skipif(os.geteuid() != 0, reason="builds emulated devices in the host's namespaces, as root; the ordinary "
                    "user's `waitlab --emulate 2xrpi3` (C inside a board) runs in "
                    "tests/user/test_as_ordinary_user.py::test_waits_are_measured_across_two_emulated_boards_and_sleeps_inside_one")
def test_sweep_in_one_device_of_each_profile(tmp_path):
    run = Run.create("waitlab", ["test"], tmp_path / "run")
    with clusters.open(emulate="2xrpi3", host_speed=1.0, calibrate=False) as devices:
        places = sleepaccuracy.device_places(devices.emulated)
        assert [(p.device, p.profile, p.cores) for p in places] == [("rpi31", "rpi3", 4)]
        assert places[0].dilation == devices.emulated.dilation >= 1
        inside = places[0].run(["cat", "/proc/self/cgroup"], 30).stdout
        assert devices.emulated.id in inside      # in the device's own CPU cgroup
        rows = experiment_c.run_experiment(run, places, Sweep(100e-6, 100e-6, 2), quick=True, cyclictest_s=1)
    sweeps = [r for r in rows if r["source"] == "sweep"]
    assert [r["status"] for r in sweeps] == ["ok"] * 4
    assert {r["device"] for r in rows} == {"rpi31"} and {r["profile"] for r in rows} == {"rpi3"}
    assert [r["spinners"] for r in sweeps] == [0, 0, 4, 4]
    sleep = run.read("sleep")
    assert len(sleep) == 4 * 2 * 2 and (sleep["measured_s"] >= sleep["requested_s"]).all()
    for r in rows[4:]:
        if cyclictest.unavailable() is None:
            assert r["status"] == f"skipped: {cyclictest.IN_DEVICE}"
