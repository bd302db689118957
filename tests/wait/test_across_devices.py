"""Experiments A and B across two emulated boards: the sender on one device, the receiver on
the other over their link, the receiver's CPU also as a share of its device's core."""

from __future__ import annotations

import os

import pytest

from shoal import cluster as clusters
from shoal.errors import ShoalError
from shoal.runs.store import Run
from shoal.wait import lab


@pytest.mark.skipif(os.geteuid() != 0, reason="builds emulated devices in the host's namespaces, as root; the ordinary "
                    "user's `waitlab --emulate 2xrpi3` (A across the boards) runs in "
                    "tests/user/test_as_ordinary_user.py::test_waits_are_measured_across_two_emulated_boards_and_sleeps_inside_one")
def test_a_across_two_boards_reports_the_receivers_share_of_its_core(mpich, tmp_path):
    run = Run.create("waitlab", ["test"], tmp_path / "run")
    with clusters.open(emulate="2xrpi3", host_speed=1.0, calibrate=False) as where:
        devices = lab.Devices.of(where)
        assert devices.names == ("rpi31", "rpi32") and devices.label == "rpi31->rpi32"
        # A device core gets its profile's share of a host core, divided by the dilation.
        assert devices.receiver_quota == pytest.approx(
            where.emulated.host.core_share(where.nodes[1].profile) / where.emulated.dilation)
        assert devices.place["profile"] == "rpi3" and devices.place["quota"] == round(devices.receiver_quota, 4)
        (row,) = lab.run_lab(run, [mpich], ("A",), ("seed003",), quick=True, native=False, devices=devices)
    assert row["status"] == "ok" and row["place"] == "rpi31->rpi32" and row["messages"] == 30
    assert row["device_core_load"] == pytest.approx(row["cpu_load"] / devices.receiver_quota)
    assert set(run.read("load")["place"]) == {"rpi31->rpi32"}


def test_across_devices_needs_two_and_two_rank_experiments():
    with pytest.raises(ShoalError, match="at least two"):
        lab.plan(lab.LabRequest(experiments="A", emulate="1xrpi3", mpis=("mpich",)))
    with pytest.raises(ShoalError, match="not full"):
        lab.plan(lab.LabRequest(experiments="A,full", emulate="2xrpi3", mpis=("mpich",)))
    planned = lab.plan(lab.LabRequest(emulate="2xrpi3", mpis=("mpich",), modes="seed003", native=False))
    assert planned.experiments == ("C", "A") and planned.places == 2
    assert planned.total == 2 * 6 + 2   # C's six steps at each place; A on this host, then across
