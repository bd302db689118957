"""Telemetry files: what a rank that waited reports, and their summary."""

from __future__ import annotations

import json

import pytest

from shoal.errors import ShoalError
from shoal.wait import telemetry
from tests.wait.helpers import json_lines, run_scenario


def test_hist_quantile_upper_edges():
    hist = [0] * 40
    hist[10] = 98      # [1024, 2048) ns
    hist[20] = 2       # [~1 ms, ~2 ms)
    assert telemetry.hist_quantile(hist, 0.5) == pytest.approx(2048e-9)
    assert telemetry.hist_quantile(hist, 0.98) == pytest.approx(2048e-9)
    assert telemetry.hist_quantile(hist, 0.99) == pytest.approx(2 ** 21 * 1e-9)
    assert telemetry.hist_quantile([0] * 40, 0.5) == 0.0


@pytest.mark.parametrize("mode", ["backoff", "sleep:200", "sleep:0"])
def test_idle_receiver_telemetry(any_mpi, mode, tmp_path):
    proc = run_scenario(any_mpi, mode, 2, "idle", "--seconds", "0.4", telemetry=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = json_lines(proc.stdout)
    records = telemetry.read_dir(tmp_path)
    assert [r["rank"] for r in records] == [0, 1]
    rank1 = records[1]
    assert rank1["mode"] == mode and rank1["timer_slack_ns"] == 1
    assert rank1["timer_slack_error"] is None
    recv = rank1["calls"]["MPI_Recv"]
    assert recv["calls"] == 1 and recv["waits"] == 1
    assert 0.35 < recv["wait_s"] < line["wall_s"] + 0.01
    assert 0 < recv["sleep_s"] <= recv["wait_s"]
    assert recv["sleeps"] >= 1 and recv["notice_count"] == 1
    assert sum(recv["notice_hist_log2ns"]) == 1
    assert 0 < recv["notice_max_s"] <= recv["wait_s"]
    if mode.startswith("sleep"):
        # Two failed tests before every sleep (Open MPI matches a message only at the test
        # after the one that read it); the last one or two after the last sleep.
        assert 2 * recv["sleeps"] + 1 <= recv["tests"] <= 2 * recv["sleeps"] + 2
    if mode == "sleep:200":
        # 0.4 s in sleeps of 200 us (plus wake-up latency): about 1500-2000 sleeps.
        assert 400 < recv["sleeps"] < 2100
    if mode == "sleep:0":
        # Every pause is a real clock_nanosleep of 0 (it yields the core for
        # the kernel's wake-up latency), not a test loop without sleeps.
        assert recv["sleeps"] > 100 and recv["yields"] == 0
    rows = telemetry.summarize(records)
    p2p = [r for r in rows if r["rank"] == 1 and r["class"] == "p2p"][0]
    assert p2p["calls"] == 1 and p2p["sleeps"] == recv["sleeps"]
    assert p2p["notice_p99_s"] == pytest.approx(recv["notice_max_s"])   # capped at the max
    assert p2p["cpu_s"] == pytest.approx(rank1["utime_s"] + rank1["stime_s"])


def test_busy_mode_is_pass_through(mpich, tmp_path):
    proc = run_scenario(mpich, "busy", 2, "idle", "--seconds", "0.2", telemetry=tmp_path)
    assert proc.returncode == 0
    rank1 = telemetry.read_dir(tmp_path)[1]
    recv = rank1["calls"]["MPI_Recv"]
    assert recv["tests"] == 1 and recv["sleeps"] == 0 and recv["wait_s"] > 0.15
    # CPU is counted from MPI_Init's return, like the wall clock: a spinning
    # rank (one thread) uses much of it (a tenth even on a host crowded four
    # times over, where a sleeping rank uses under 1 %) and never more than all of it.
    cpu = rank1["utime_s"] + rank1["stime_s"]
    assert 0.1 * recv["wait_s"] < cpu <= 1.02 * rank1["wall_s"] + 0.005


def test_classes_switch_collectives_off(openmpi, tmp_path):
    proc = run_scenario(openmpi, "sleep:100", 2, "result", "--rounds", "5", telemetry=tmp_path,
                        env={"SHOAL_WAIT_CLASSES": "p2p"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls = telemetry.read_dir(tmp_path)[0]["calls"]
    assert json.loads((tmp_path / "rank-0.json").read_text())["classes"] == ["p2p"]
    # Collectives went straight to PMPI: one "test" per call, never a sleep.
    assert calls["MPI_Allreduce"]["tests"] == calls["MPI_Allreduce"]["calls"] == 5
    assert calls["MPI_Barrier"]["sleeps"] == 0


def test_unreadable_telemetry_is_one_line(tmp_path):
    (tmp_path / "rank-0.json").write_text("{not json")
    with pytest.raises(ShoalError, match="rank-0.json is unreadable"):
        telemetry.read_dir(tmp_path)


def test_seed003_contender_is_the_seed_s_adaptive_receive(any_mpi, tmp_path):
    """waitlab's seed003: linear from d_min = 0 (a real clock_nanosleep of 0 first, not a test
    loop) to 1 us in 1 ns steps, under the kernel's default timer slack, not the library's 1 ns."""
    from shoal.wait import lab

    (c,) = lab.contenders(any_mpi, ("seed003",), native=False)
    assert (c.label, c.mode, c.slack_ns) == ("seed003", "linear:0,1000,1", 0)
    data, _, _ = lab.run_program(any_mpi, c, 2, ["idle", "--seconds", "0.3"], telemetry_dir=tmp_path)
    rank1 = telemetry.read_dir(tmp_path)[1]
    assert rank1["mode"] == "linear:0,1000,1" and rank1["timer_slack_requested_ns"] == 0
    # The library never touched the slack (-1: it did not set one), and reported no refusal.
    assert rank1["timer_slack_ns"] == -1 and rank1["timer_slack_error"] is None
    recv = rank1["calls"]["MPI_Recv"]
    assert recv["waits"] == 1 and recv["sleeps"] > 10 and recv["yields"] == 0
    assert data["wall_s"] > 0.25
