"""`shoal dsm run` on an emulated cluster: a Table 1 preset's devices on the cluster's
nodes, or the ranks in equal blocks; each rank reports the host it ran on."""

from __future__ import annotations

import json
import subprocess
import sys

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


def test_without_a_preset_the_ranks_fill_the_nodes_in_equal_blocks():
    done = _dsm("full", "-n", "3", "--emulate", "2xnuc", "--wait", "event", "--json", *FULL)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["cluster"]["placement"] == [{"node": "nuc1", "ranks": 2}, {"node": "nuc2", "ranks": 1}]
    assert [r["host"] for r in out["time_split"]] == ["nuc1", "nuc1", "nuc2"]
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
