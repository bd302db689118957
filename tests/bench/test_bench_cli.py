"""`shoal bench` end to end: real MPI jobs, the run directory, resume, errors."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bench_cli import shoal
from tests.interrupts import as_foreground

QUICK = ["--budget", "0.2", "--ci", "0.1", "--min-reps", "6", "--rep-time", "2e-4"]


@pytest.mark.parametrize("kind", ["mpich", "openmpi"])
def test_bench_writes_tidy_results_with_checked_bytes(tmp_path, kind):
    out = tmp_path / "run"
    proc = shoal("bench", "--mpi", kind, "--tests", "imb.PingPong,mpbench.bandwidth,imb.Allreduce",
                 "--sizes", "8,4K", "--ranks", "2", "--check", "--out", str(out), "--json", *QUICK)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["run"] == str(out)
    # Numbers are JSON numbers, lists JSON arrays, flags JSON booleans (not their CSV text).
    for row in payload["results"]:
        assert type(row["nodes"]) is int and type(row["ranks"]) is int and type(row["size_B"]) is int
        assert type(row["time_median_s"]) is float and row["time_median_s"] > 0
        assert type(row["converged"]) is bool and type(row["reps"]) is int
        assert isinstance(row["rank_mean_s"], list) and len(row["rank_mean_s"]) == 2
        assert all(type(t) is float for t in row["rank_mean_s"])
        assert row["energy_J"] is None and type(row["test"]) is str
    results = pd.read_csv(out / "results.csv")
    assert sorted(results["test"].unique()) == ["imb.Allreduce", "imb.PingPong", "mpbench.bandwidth"]
    assert len(results) == 6 and results["point_id"].is_unique
    assert (results["check"] == "ok").all() and (results["check_errors"] == 0).all()
    samples = pd.read_csv(out / "samples.csv")
    counts = samples.groupby("point_id").size()
    assert (counts[results["point_id"]].values == results["reps"].values).all()
    # Statistics in the table are those of the raw samples.
    for _, row in results.iterrows():
        times = samples[samples["point_id"] == row["point_id"]]["time_s"]
        assert row["time_median_s"] == pytest.approx(times.median())
        assert row["time_ci_low_s"] <= row["time_median_s"] <= row["time_ci_high_s"]
    bw = results[results["test"] == "mpbench.bandwidth"].set_index("size_B")
    assert bw.loc[4096, "bandwidth_median_Bps"] == pytest.approx(4096 / bw.loc[4096, "time_median_s"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["mpi"]["kind"] == kind
    assert manifest["jobs"]["local/1/2"]["ranks"] == 2
    assert manifest["host"]["cpus"] >= 1
    # The stack it ran on: kernel, the MPI's build, the program's compiler, the system's activity.
    stack = manifest["stack"]
    assert stack["kernel"] == Path("/proc/sys/kernel/osrelease").read_text().strip()
    assert stack["mpi_build"]["name"] == manifest["mpi"]["name"] and len(stack["mpi_build"]) > 1
    assert "-O2" in stack["native"]["shoal-bench"]["cflags"] and stack["native"]["shoal-bench"]["compiler"]
    assert manifest["stack_during"]["forks"] >= 1 and manifest["stack_during"]["background_cpu_s"] >= 0


def test_four_ranks_collectives(tmp_path, mpich):
    out = tmp_path / "run"
    tests = ["mpbench.allreduce", "imb.Alltoall", "imb.Exchange", "imb.Reduce_scatter"]
    proc = shoal("bench", "--tests", ",".join(tests), "--sizes", "64",
                 "--ranks", "4", "--check", "--out", str(out), *QUICK, env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    results = pd.read_csv(out / "results.csv")
    assert set(results["ranks"]) == {4} and len(results) == 4
    assert (results["check"] == "ok").all()
    assert all(len(json.loads(v)) == 4 for v in results["rank_mean_s"])
    # The summary fits an 80-column terminal with every cell whole on one line (the lines
    # that name the run's directory are as long as its path).
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines if str(out) not in line) <= 80
    for test in tests:
        row = next(line for line in lines if line.split()[:1] == [test])
        assert "64 B..64 B" in row and "…" not in row



def test_inner_fixes_the_operations_of_one_repetition(tmp_path, mpich):
    """--inner 1 with no warm-up and one repetition makes a point of exactly one call, as a
    call that takes minutes needs (no calibration trials)."""
    out = tmp_path / "run"
    proc = shoal("bench", "--tests", "imb.Alltoall,imb.PingPong", "--sizes", "1K", "--ranks", "2",
                 "--inner", "1", "--warmup", "0", "--min-reps", "1", "--max-reps", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    results = pd.read_csv(out / "results.csv")
    assert list(results["inner"]) == [1, 1] and list(results["reps"]) == [1, 1]
    # A ping-pong's repetition is two half round trips, each counted as an operation.
    assert dict(zip(results["test"], results["ops_per_rep"])) == {"imb.Alltoall": 1, "imb.PingPong": 2}
    assert json.loads((out / "manifest.json").read_text())["request"]["options"]["inner"] == 1

def test_interrupted_run_keeps_points_and_resume_finishes_it(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "shoal", "bench", "--tests", "imb.PingPong,imb.Sendrecv",
           "--sizes", "1..64K:4", "--ranks", "2", "--out", str(out), "--budget", "0.3",
           "--ci", "0.0", "--min-reps", "6"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_foreground)
    results = out / "results.csv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not results.exists() or
                                           len(results.read_text().splitlines()) < 3):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    errors = [ln for ln in err.splitlines() if ln.startswith("shoal:")]
    assert len(errors) == 1 and "--resume" in errors[0] and "Traceback" not in err
    first = pd.read_csv(results)
    assert 2 <= len(first) < 18
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"

    again = shoal("bench", "--resume", str(out))
    assert again.returncode == 0, again.stderr
    final = pd.read_csv(results)
    assert len(final) == 18 and final["point_id"].is_unique
    # Points measured before the interruption are kept as they were.
    kept = final.set_index("point_id").loc[first["point_id"], "time_median_s"]
    assert list(kept) == list(first["time_median_s"])
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def test_point_that_exceeds_its_timeout_is_recorded_and_sweep_goes_on(tmp_path):
    out = tmp_path / "run"
    # Each point runs until its 30 s budget is spent, whatever the host's speed: no CI can stop
    # it before its last repetition (min = max; --ci 0 alone stops a point once the samples
    # that bound its median tie, which a fast quiet host's can), and 10^5 repetitions of 10^5
    # round trips each take longer than that on any host.
    proc = shoal("bench", "--tests", "imb.PingPong", "--sizes", "8,16", "--ranks", "2",
                 "--ci", "0", "--budget", "30", "--inner", "100000", "--min-reps", "100000",
                 "--max-reps", "100000", "--timeout", "2", "--out", str(out))
    assert proc.returncode == 1
    failures = pd.read_csv(out / "failures.csv")
    assert list(failures["reason"]) == ["timeout", "timeout"]
    assert list(failures["size_B"]) == [8, 16]
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete-with-failures"


def test_crashed_point_keeps_the_first_error_of_a_rank_not_only_the_launchers_last(tmp_path):
    # Every rank fails in MPI_Init (no such transport): the failure began in a rank, whose
    # error stack comes first; the launcher's last lines follow.
    out = tmp_path / "run"
    proc = shoal("bench", "--mpi", "mpich", "--tests", "imb.Bcast", "--sizes", "64", "--ranks", "2",
                 "--out", str(out), env={"UCX_TLS": "no-such-transport"})
    assert proc.returncode == 1
    detail = pd.read_csv(out / "failures.csv")["detail"][0]
    first, last = detail.split("; last: ")
    assert first.startswith("first: ") and "MPI_Init" in first and "No such device" in first
    assert first.count("Fatal error in internal_Init") == 1  # two ranks said it: kept once
    assert last


@pytest.mark.parametrize("kind", ["mpich", "openmpi"])
def test_a_rank_killed_without_a_word_is_named_with_its_signal(tmp_path, kind):
    # Rank 0 of 3 dies of SIGSEGV as the second point starts and writes nothing: the detail names
    # it, where it ran and how, from the launcher's own report (Hydra names only a pid and
    # a host; the pids the job sent at its start name the rank). Rank 0, because Hydra's
    # report names the first rank that ended badly, which after another rank's crash can be
    # one Hydra killed (test_mpi_kinds covers that report).
    out = tmp_path / "run"
    proc = shoal("bench", "--mpi", kind, "--tests", "imb.Bcast", "--sizes", "64,128", "--ranks", "3",
                 "--out", str(out), env={"SHOAL_BENCH_CRASH": "0"})
    assert proc.returncode == 1
    failure = pd.read_csv(out / "failures.csv").iloc[0]
    assert failure["reason"] == "crashed"
    first = failure["detail"].split(" | ")[0]
    assert first.startswith(f"first: rank 0 on {socket.gethostname()} (pid "), failure["detail"]
    assert first.endswith(") killed by SIGSEGV"), failure["detail"]


@pytest.mark.parametrize("args, expected", [
    (["--tests", "pingpang"], "unknown test 'pingpang'"),
    (["--tests", "allreduce"], "ambiguous"),
    (["--sizes", "4Q"], "malformed size '4Q'"),
    (["--ranks", "two"], "argument -n/--ranks: 'two' is not a whole number"),
    (["--ranks", "0"], "argument -n/--ranks: counts start at 1"),
    (["--budget", "0"], "argument --budget: must be above 0"),
    (["--budget", "nan"], "argument --budget: must be a finite number"),
    (["--flush=-1M"], "argument --flush: malformed size"),
    (["--out", ""], "argument --out: is empty"),
    (["--out", "x" * 256], "argument --out: has a name of 256 bytes"),
    (["--tests", "imb.PingPong", "--ranks", "1"], "need(s) at least 2 ranks"),
    (["--mpi", "/nonexistent/mpi"], "--mpi /nonexistent/mpi"),
    (["--ci", "-1"], "argument --ci: must be at least 0"),
    (["--resume", "/nonexistent/run"], "not a shoal run directory"),
])
def test_bad_input_gives_one_line_and_nonzero_exit(tmp_path, args, expected):
    proc = shoal("bench", "--out", str(tmp_path / "r"), *args)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0] and "Traceback" not in proc.stderr


def test_compiler_failure_is_one_line(tmp_path):
    fake = tmp_path / "fakempi" / "bin"
    fake.mkdir(parents=True)
    (fake / "mpiexec").write_text("#!/bin/sh\nexit 1\n")
    (fake / "mpichversion").write_text("#!/bin/sh\necho 'MPICH Version:      9.9'\necho 'MPICH ABI: 1:0:0'\n")
    (fake / "mpicc").write_text("#!/bin/sh\necho 'bench.c:1: error: no compiler here' >&2\nexit 1\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    proc = shoal("bench", "--mpi", str(fake), "--out", str(tmp_path / "r"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "building bench with MPICH 9.9 failed" in lines[0]
    assert "build.log" in lines[0]


def test_plot_writes_png_and_svg_per_test(tmp_path):
    out = tmp_path / "run"
    assert shoal("bench", "--tests", "imb.PingPong,mpbench.roundtrip", "--sizes", "8,1K,64K",
                 "--out", str(out), *QUICK).returncode == 0
    proc = shoal("plot", str(out), str(out))
    assert proc.returncode == 0, proc.stderr
    for test in ("imb.PingPong", "mpbench.roundtrip"):
        png = out / "figures" / f"{test}.png"
        svg = out / "figures" / f"{test}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert test in svg.read_text()
    bad = shoal("plot", str(out), "--format", "gif")
    assert bad.returncode == 2 and "unknown figure format" in bad.stderr
    # A crash mid-append tears the last row: plotting leaves it out, nothing else.
    table = out / "results.csv"
    data = table.read_bytes()
    table.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 30])
    torn = shoal("plot", str(out), "--out", str(tmp_path / "torn"))
    assert torn.returncode == 0 and "Traceback" not in torn.stderr, torn.stderr
    assert (tmp_path / "torn" / "imb.PingPong.png").exists()


def test_resume_after_a_torn_row_measures_only_that_point(tmp_path):
    out = tmp_path / "run"
    assert shoal("bench", "--tests", "imb.PingPong,mpbench.roundtrip", "--sizes", "8,1K,64K",
                 "--out", str(out), *QUICK).returncode == 0
    table = out / "results.csv"
    complete = pd.read_csv(table)
    data = table.read_bytes()
    table.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 25])  # the last row torn
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    again = shoal("bench", "--resume", str(out))
    assert again.returncode == 0, again.stderr
    final = pd.read_csv(table)
    assert len(final) == len(complete) == 6 and final["point_id"].is_unique
    # Every complete row is kept as it was; only the torn point was measured again.
    kept = final.set_index("point_id").loc[complete["point_id"].iloc[:-1], "time_median_s"]
    assert list(kept) == list(complete["time_median_s"].iloc[:-1])
    assert final["point_id"].iloc[-1] == complete["point_id"].iloc[-1]
    # The torn point's first samples are gone: one set of repetitions per point.
    samples = pd.read_csv(out / "samples.csv")
    assert not samples.duplicated(["point_id", "rep"]).any()
    assert set(samples["point_id"]) == set(final["point_id"])
    reps = samples.groupby("point_id").size()
    assert (reps == final.set_index("point_id")["reps"].loc[reps.index]).all()


def test_power_model_gives_energy_per_point(tmp_path):
    out = tmp_path / "run"
    proc = shoal("bench", "--tests", "imb.PingPong,mpbench.bandwidth", "--sizes", "8,64K",
                 "--power", "model:2,10", "--idle", "0.5", "--out", str(out), *QUICK)
    assert proc.returncode == 0, proc.stderr
    results = pd.read_csv(out / "results.csv")
    assert (results["power_kind"] == "modelled").all()
    assert results["power_mean_W"].between(2.0 - 1e-9, 10.0 + 1e-9).all()  # idle..busy watts
    duration = results["t_end_mono_s"] - results["t_start_mono_s"]
    assert ((results["energy_J"] - results["power_mean_W"] * duration).abs()
            <= 0.02 * results["energy_J"]).all()
    ops = results["reps"] * results["ops_per_rep"]
    pingpong = results[results["test"] == "imb.PingPong"]
    assert (pingpong["ops_per_rep"] == 2 * pingpong["inner"]).all()
    assert results["energy_per_op_J"].values == pytest.approx((results["energy_J"] / ops).values)
    bw = results[results["metric"] == "bandwidth"]
    assert bw["bandwidth_per_W"].values == pytest.approx(
        (bw["bandwidth_median_Bps"] / bw["power_mean_W"]).values)
    assert results["idle_power_W"].between(2.0 - 1e-9, 10.0 + 1e-9).all()
    assert (results["energy_net_J"] <= results["energy_J"]).all()
    assert len(pd.read_csv(out / "power.csv")) > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["power"]["spec"] == "model:2,10"


def test_power_spec_errors_before_anything_runs(tmp_path):
    proc = shoal("bench", "--power", "rapl:x", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "takes no argument" in proc.stderr
    assert not (tmp_path / "r").exists()
    proc = shoal("bench", "--idle", "1", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and "--idle measures a power baseline" in proc.stderr
