"""`shoal bench` over node counts of an emulated cluster (real namespaces, real MPI)."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from shoal import profiles

from bench_cli import shoal
from shoal import profiles

LINK_RATE_Bps = 100e6 / 8  # ethernet-100m


def _shoal_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("shoal-")}


def test_node_count_sweep_on_emulated_minnowboards(tmp_path):
    out = tmp_path / "run"
    proc = shoal("bench", "--emulate", "3xminnowboard", "--nodes", "1..3",
                 "--tests", "mpbench.bandwidth,mpbench.allreduce", "--sizes", "1K,1M",
                 "--budget", "1.5", "--ci", "0.1", "--min-reps", "3", "--rep-time", "0.4", "--check",
                 "--power", "model",
                 "--out", str(out), timeout=900)
    assert proc.returncode == 0, proc.stderr
    results = pd.read_csv(out / "results.csv")
    assert sorted(set(zip(results["nodes"], results["ranks"]))) == [(2, 2), (3, 3)]
    assert (results["check"] == "ok").all()
    # One rank on one device cannot communicate: recorded as skipped, with the reason.
    skipped = pd.read_csv(out / "skipped.csv")
    assert set(skipped["nodes"]) == {1} and len(skipped) == 4
    assert skipped["reason"].str.contains("needs 2 ranks").all()
    # Messages cross the shaped 100 Mbit/s links: the bandwidth cannot exceed them
    # (repetitions of ~0.4 s amortise the token bucket's 128 KiB burst).
    big = results[(results["test"] == "mpbench.bandwidth") & (results["size_B"] == 1 << 20)]
    assert (big["bandwidth_median_Bps"] < 1.05 * LINK_RATE_Bps).all()
    assert (big["bandwidth_median_Bps"] > 0.5 * LINK_RATE_Bps).all()
    # Each device's power is its profile model driven by its cgroup's CPU time:
    # between all-idle and all-busy watts of the devices used, and labelled modelled;
    # the switch every configuration shares is charged once, at its idle draw.
    minnow = profiles.load()["minnowboard"]
    idle_W, busy_W = minnow.idle_W, minnow.busy_W
    switch_W = profiles.load_switches()["fast-ethernet-8"].idle_W
    assert (results["power_kind"] == "modelled").all()
    assert (results["power_mean_W"] >= results["nodes"] * idle_W * 0.999 + switch_W).all()
    assert (results["power_mean_W"] <= results["nodes"] * busy_W * 1.001 + switch_W).all()
    duration = results["t_end_mono_s"] - results["t_start_mono_s"]
    assert ((results["energy_J"] - results["power_mean_W"] * duration).abs()
            <= 0.02 * results["energy_J"]).all()
    power = pd.read_csv(out / "power.csv")
    assert set(power["node"]) == {"minnowboard1", "minnowboard2", "minnowboard3",
                                  "switch:fast-ethernet-8"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["clusters"]["3xminnowboard"]["mode"] == "emulated"
    # A MinnowBoard's budget is half a host CPU: one polling rank would spend its quota
    # waiting and stall until the next period, so with no --wait given its ranks sleep
    # until their sockets have something. Without CPU limits (neither a cgroup quota nor the
    # user-space throttle) they poll.
    limited = manifest["clusters"]["3xminnowboard"]["emulation"]["cpu_limit"] != "none"
    if limited:
        assert (results["wait_mode"] == "event").all()
    else:
        assert results["wait_mode"].isna().all()   # libshoalwait not loaded: the column is empty
    assert [n["profile"] for n in manifest["clusters"]["3xminnowboard"]["nodes"]] == ["minnowboard"] * 3
    hosts = manifest["jobs"]["3xminnowboard/3/3"]["hosts"]
    assert hosts[0].startswith("minnowboard")
    # The cluster is gone when the command ends.
    cluster_id = manifest["clusters"]["3xminnowboard"]["id"]
    assert not {n for n in _shoal_namespaces() if n.startswith(f"shoal-{cluster_id}-")}


def test_per_node_share_of_collective_time(tmp_path):
    out = tmp_path / "run"
    proc = shoal("bench", "--emulate", "2xnuc+1xrpi0w", "--nodes", "3",
                 "--tests", "mpbench.allreduce,mpbench.bcast,imb.Barrier,imb.PingPong", "--sizes", "8,4K",
                 "--budget", "0.4", "--ci", "0.1", "--min-reps", "3", "--out", str(out), timeout=900)
    assert proc.returncode == 0, proc.stderr
    shares = pd.read_csv(out / "heterogeneity.csv")
    assert sorted(shares["node"]) == ["nuc1", "nuc2", "rpi0w1"]
    assert shares["points"].eq(5).all()  # the collective points only, not PingPong
    assert shares["mean_share"].sum() == pytest.approx(1.0)
    assert shares["largest_share_in"].sum() == 5
    assert list(shares["share_vs_equal"]) == pytest.approx(list(3 * shares["mean_share"]))


@pytest.mark.parametrize("mpi, crash", [("mpich", "1"), ("openmpi", "1:fault")])
def test_a_crashed_rank_on_a_device_is_named_with_its_device_and_signal(tmp_path, mpi, crash):
    # MPICH's Hydra reports every process killed by a signal, by pid and device: the crash of
    # rank 1 on nuc2 (without a word) is named whatever the other rank's proxy says after it.
    # Open MPI's launcher often reports only the rank that aborted after the crash (its socket
    # closed); the faulting rank's own signal report (its handler in place) names it.
    out = tmp_path / "run"
    proc = shoal("bench", "--emulate", "2xnuc", "--mpi", mpi, "--tests", "imb.Bcast",
                 "--sizes", "64,128", "--out", str(out), env={"SHOAL_BENCH_CRASH": crash}, timeout=600)
    assert proc.returncode == 1
    detail = pd.read_csv(out / "failures.csv")["detail"][0]
    first = detail.split(" | ")[0]
    assert first.startswith("first: rank 1 on nuc2 (pid ") and first.endswith(") killed by SIGSEGV"), detail
