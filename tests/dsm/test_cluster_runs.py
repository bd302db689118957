"""`shoal dsm run` on an emulated cluster: a Table 1 preset's devices on the cluster's
nodes, or the ranks in equal blocks; each rank reports the host it ran on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shoal import profiles
from shoal.cluster.hostspeed import HostSpeed

FULL = ["--", "--writes", "200", "--sample", "0"]


def _dsm(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "shoal", "dsm", "run", *args], capture_output=True,
                          text=True, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_preset_puts_each_device_on_a_node_of_its_own():
    done = _dsm("full", "--preset", "exp-e", "--emulate", "1xcore-i7+1xrpi3bplus+1xodroid-xu4",
                "--json", *FULL)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    nodes = ["core-i71", "rpi3bplus1", "odroid-xu41"]
    assert out["cluster"]["placement"] == [{"node": n, "ranks": 1} for n in nodes]
    assert out["cluster"]["mode"] == "emulated" and out["cluster"]["dilation"] >= 1
    assert [r["host"] for r in out["time_split"]] == nodes
    # The run is whole (no lost update: the program checks the final datum) and its power
    # is modelled per preset device.
    assert out["report"]["messages"] > 0
    assert [d["device"] for d in out["devices"]] == ["i7", "rpi", "xu4"]
    assert all(d["kind"] == "modelled" and d["power_W"] > 0 for d in out["devices"])
    # CPU seconds are the devices': the host's over the share of a host core each device's
    # core is held to, its profile's speed over the host core's on the profile's kernel.
    host, known = HostSpeed.from_record(out["cluster"]["host_speed"]), profiles.load()
    shares = [host.core_share(known[name]) for name in ("core-i7", "rpi3bplus", "odroid-xu4")]
    assert shares[1] < 1.0   # a Raspberry Pi's core is a fraction of any host's
    for r, share in zip(out["report"]["ranks"], shares):
        assert r["cpu_host_s"] / r["cpu_s"] == pytest.approx(share, rel=1e-9)


def test_without_a_preset_the_ranks_fill_the_nodes_in_equal_blocks():
    done = _dsm("full", "-n", "3", "--emulate", "2xnuc", "--wait", "event", "--json", *FULL)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["cluster"]["placement"] == [{"node": "nuc1", "ranks": 2}, {"node": "nuc2", "ranks": 1}]
    assert [r["host"] for r in out["time_split"]] == ["nuc1", "nuc1", "nuc2"]
    assert [r["device_core"] for r in out["time_split"]] == [0, 1, 0]
    assert out["devices"] == []


def test_cluster_choices_that_cannot_work_are_refused_in_one_line():
    apart = _dsm("hough", "--preset", "hough-hetero",
                 "--emulate", "1xcore-i7+1xparallella+2xrpi3bplus+1xodroid-xu4")
    assert apart.returncode == 2
    assert apart.stderr.strip().splitlines() == [
        "shoal: preset hough-hetero puts ranks of i7 apart (MPI launchers place each host's ranks "
        "together); run it on this machine, without --emulate or --cluster"]
    small = _dsm("video", "--preset", "video-recs", "--emulate", "2xnuc")
    assert small.returncode == 2 and "needs 6 devices but the cluster has 2" in small.stderr
    loose = _dsm("full", "--dilation", "2")
    assert loose.returncode == 2 and "add --emulate SPEC" in loose.stderr


def test_the_lab_runs_fig_10_on_an_emulated_recs(tmp_path):
    """Experiment G on the RECS's devices emulated (two Core i7, four Cortex-A15): Table 1's
    placement on them, and each node's power from its ranks' CPU in device CPU seconds."""
    done = subprocess.run([sys.executable, "-m", "shoal", "dsm", "lab", "--experiments", "G", "--quick",
                           "--modes", "busy", "--mpi", "mpich", "--emulate", "2xcore-i7+4xcortex-a15",
                           "--out", str(tmp_path / "lab"), "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [r["status"] for r in out["results"]] == ["ok"]
    from shoal.runs.store import Run

    run = Run.open(tmp_path / "lab")
    assert run.manifest["cluster"]["mode"] == "emulated" and run.manifest["cluster"]["dilation"] >= 1
    split = run.rows("split")
    assert [r["host"] for r in split] == [
        "core-i71", "core-i72", "core-i72", "cortex-a151", "cortex-a152", "cortex-a153", "cortex-a154"]
    # Each rank on a core of its device: the input and output tasks on two of i7-a's.
    assert [r["device_core"] for r in split] == ["0", "0", "1", "0", "0", "0", "0"]
    known = profiles.load()
    fig10 = {r["device"]: r for r in out["fig10"][next(iter(out["fig10"]))]}
    assert set(fig10) == {"i7-b", "i7-a", "a15-1", "a15-2", "a15-3", "a15-4", "platform"}
    for device, name in (("i7-b", "core-i7"), ("a15-1", "cortex-a15")):
        # The busy-waiting rank on each keeps one of its device's cores busy: above idle.
        assert known[name].idle_W < fig10[device]["peak_W"] <= known[name].busy_W
