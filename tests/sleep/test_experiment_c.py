"""Experiment C on this host: the real sweep program, real cyclictest, the run's tables."""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

from shoal import proc
from shoal.cli import waitlab as waitlab_cli
from shoal.mpi import build
from shoal.runs.store import Run
from shoal.wait import cyclictest, experiment_c, plots, sleepaccuracy
from shoal.wait.sleepaccuracy import CONDITIONS, Place, Sweep

PR_GET_TIMERSLACK = 30


def test_summary_of_a_known_line():
    """Measured = 60 us + 1.0 x requested, one stall: offset, slope and quantiles come out as built."""
    requested = np.repeat(np.arange(0, 1e-3 + 1e-9, 1e-4), 5)
    measured = requested + 60e-6
    measured[7] += 20e-3                      # one 20 ms stall at 100 us: moves neither fit nor p50
    got = sleepaccuracy.summarize(requested, measured)
    assert got["measures"] == 55
    assert got["offset_zero_s"] == pytest.approx(60e-6) and got["lateness_p50_s"] == pytest.approx(60e-6)
    assert got["slope"] == pytest.approx(1.0) and got["intercept_s"] == pytest.approx(60e-6)
    assert got["lateness_longest_p50_s"] == pytest.approx(60e-6) and got["longest_s"] == pytest.approx(1e-3)
    assert got["lateness_p99_s"] > 1e-3      # the stall is in the tail


def test_cyclictest_verbose_lines_parse_to_seconds():
    out = ("WARN: not setting cpu_dma_latency from cyclictest\nMax CPUs = 2\nOnline CPUs = 2\n"
           "Thread 0 Interval: 1500\n       0:       0:   81000\n       0:       1:   70385\n"
           "       0:       2:   73364\nT: 0 (12737) P: 0 I:1000 C:      3 Min:  70385 Act:   73364 "
           "Avg:   74916 Max:   81000\n")
    assert cyclictest.latencies(out).tolist() == pytest.approx([70385e-9, 73364e-9])   # first cycle left out
    with pytest.raises(Exception, match="no latencies"):
        cyclictest.latencies("Unable to change scheduling policy!\n")


def test_the_program_refuses_bad_numbers_in_one_line():
    exe = str(build.build_host("sleepsweep"))
    for argv in (["--step", "0"], ["--repeats", "x"], ["--max", "-5"]):
        done = proc.run([exe, *argv])
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, argv


def test_a_budget_stops_the_sweep_with_the_range_covered_coarse_to_fine():
    exe = str(build.build_host("sleepsweep"))
    done = proc.run([exe, "--max", "2000", "--step", "1000", "--repeats", "100000", "--budget-ms", "5"])
    facts, requested, _ = sleepaccuracy.parse(done.stdout)
    assert facts["planned"] == 300000 and 1 <= facts["measures"] < 300000
    assert requested.tolist()[:6] == pytest.approx(([0, 2e-6, 1e-6] * 2)[:facts["measures"]])
    done = proc.run([exe, "--max", "7000", "--step", "1000", "--repeats", "1"])
    _, requested, _ = sleepaccuracy.parse(done.stdout)
    assert (1e6 * requested).round().tolist() == [0, 4, 2, 6, 1, 5, 3, 7]   # halves, quarters, eighths


def test_host_sweep_tables_resume_figure_and_table(tmp_path, monkeypatch, capsys):
    run = Run.create("waitlab", ["test"], tmp_path / "run")
    host = sleepaccuracy.host_place()
    sweep = Sweep(200e-6, 100e-6, 3)
    rows = experiment_c.run_experiment(run, [host], sweep, quick=True, cyclictest_s=1)
    assert [(r["source"], r["load"], r["slack"]) for r in rows] == \
        [("sweep", c.load, c.slack) for c in CONDITIONS] + \
        [("cyclictest", "idle", "default"), ("cyclictest", "loaded", "default")]

    sleep = run.read("sleep")
    assert len(sleep) == len(CONDITIONS) * 3 * 3
    assert sorted(set(sleep["requested_s"])) == pytest.approx([0, 100e-6, 200e-6])
    assert (sleep["measured_s"] >= sleep["requested_s"]).all()     # a sleep never ends early
    libc = ctypes.CDLL(None)
    own_slack = libc.prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) * 1e-9   # what the program inherits
    for r in rows[:4]:
        assert r["status"] == "ok" and r["measures"] == r["planned_measures"] == 9
        assert r["timer_slack_s"] == pytest.approx(1e-9 if r["slack"] == "1ns" else own_slack)
        assert r["spinners"] == (host.cores if r["load"] == "loaded" else 0)
        assert 0 < r["offset_zero_s"] <= r["offset_zero_p99_s"]
        # The sleeper's CPU per sleep: some, and (its own thread, not the spinners beside it)
        # no more than its sleeps lasted, give or take 1 ms of the kernel's accounting.
        lasted = sleep[(sleep["load"] == r["load"]) & (sleep["slack"] == r["slack"])]["measured_s"]
        assert 0 < r["wake_cpu_s"] * r["measures"] <= lasted.sum() + 1e-3
    why_not = cyclictest.unavailable()
    for r in rows[4:]:
        if why_not:
            assert r["status"] == f"skipped: {why_not}"
        else:   # about 1000 cycles of 1 ms in 1 s; a loaded shared host loses some
            assert r["status"] == "ok" and r["measures"] > 100, r
            assert 0 < r["lateness_longest_p50_s"] <= r["lateness_longest_p99_s"]

    assert experiment_c.run_experiment(run, [host], sweep, quick=True, cyclictest_s=1) == []   # resumed
    assert len(run.read("sleep")) == len(sleep)
    assert [p.name for p in plots.plot_all(run)][:2] == ["waitlab_C_sleep.png", "waitlab_C_sleep.svg"]
    assert (run.path / "waitlab_C_sleep.png").stat().st_size > 10000
    monkeypatch.setenv("COLUMNS", "80")
    waitlab_cli._sleep_table(run)
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if not line.startswith("cyclictest")]
    assert max(map(len, table)) <= 80 and "…" not in "".join(table)
    assert sum(line.split()[:1] == ["host"] for line in table) == 4
    assert sum(line.startswith("cyclictest on host") for line in lines) == 2


def test_a_place_that_fails_is_a_row_and_the_rest_go_on(tmp_path):
    run = Run.create("waitlab", ["test"], tmp_path / "run")
    broken = Place("board", "rpi3", 4, lambda argv, timeout: proc.run(["sh", "-c", "echo gone >&2; exit 3"]))
    rows = experiment_c.run_experiment(run, [broken], Sweep(0, 1e-6, 1), quick=True)
    sweeps = [r for r in rows if r["source"] == "sweep"]
    assert len(sweeps) == 4 and all(r["status"].startswith("failed") and "gone" in r["status"] for r in sweeps)
    assert run.read("sleep").empty
    assert len(run.rows("sleep_summary")) == 6


def test_cyclictest_without_root_or_rtprio_is_refused_as_unavailable_says():
    """The premise of cyclictest.unavailable(): cyclictest 2.x refuses an ordinary user
    without RLIMIT_RTPRIO even under --policy=other (its main thread asks for SCHED_FIFO)."""
    setpriv, prlimit = proc.tool("setpriv"), proc.tool("prlimit")
    argv = cyclictest.argv(1)[:1] + ["-l", "3", "-i", "1000", "-t", "1", "--policy=other",
                                     "--default-system", "-q"]
    # Root becomes uid 65534; an ordinary user already is one.
    user = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"] if os.geteuid() == 0 else []
    refused = proc.run([prlimit, "--rtprio=0:0", "--", *user, *argv])
    assert refused.returncode != 0 and "scheduling policy" in refused.stderr
