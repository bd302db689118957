"""shoal-bench, built with each MPI's mpicc and run under real mpiexec.

Runs are kept tiny (1 B and 4 KiB, forced inner counts, few repetitions)
because four ranks on two busy-polling cores take milliseconds per
operation. Relations between results (round trip = 2 x half round trip,
big messages move more bytes per second) are checked on order statistics
of the samples, never against absolute times.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from shoal.bench.stats import summarize
from shoal.mpi import build
from shoal.mpi.launch import Job

ALL_TESTS = {
    "mpbench.bandwidth", "mpbench.latency", "mpbench.roundtrip", "mpbench.bibw", "mpbench.bcast",
    "mpbench.reduce", "mpbench.allreduce", "mpbench.alltoall",
    "imb.PingPong", "imb.Sendrecv", "imb.Exchange", "imb.Allreduce", "imb.Reduce", "imb.Reduce_scatter",
    "imb.Allgather", "imb.Gather", "imb.Scatter", "imb.Bcast", "imb.Alltoall", "imb.Barrier",
    "imb.Uniband",  # beyond the twelve asked for: the windowed bandwidth osu_bw also measures
}
# Tests of ranks 0 and 1 timed by the sender; all others by the slowest rank.
SENDER_TIMED = {"mpbench.bandwidth", "mpbench.latency", "mpbench.roundtrip", "mpbench.bibw", "imb.PingPong",
                "imb.Uniband"}
IMB_FLOAT_REDUCTIONS = {"imb.Allreduce", "imb.Reduce", "imb.Reduce_scatter"}
# Enough to exercise every code path, little enough for 4 ranks on 2 cores. A point also
# stops once it has run --budget seconds (1 by default, calibration and warm-up included),
# with as few as one sample: on a busy host a 4-rank point of 3 repetitions once took longer
# and kept 2. A budget beyond launch()'s timeout leaves --max-reps the only stop of a point
# in a job that ends in time, however slow the host.
QUICK = ["--inner", "2", "--warmup", "1", "--min-reps", "2", "--max-reps", "3", "--budget", "1000"]


@pytest.fixture(scope="module")
def programs():
    return {}


@pytest.fixture
def program(any_mpi, programs):
    if any_mpi.kind not in programs:
        programs[any_mpi.kind] = build.build("bench", any_mpi)
    return programs[any_mpi.kind]


def launch(mpi, program, ranks, args, rank_env=None, timeout=150):
    """Run shoal-bench under mpiexec; return (exit code, parsed records, stderr)."""
    job = Job(mpi=mpi, ranks=ranks, argv=[str(program), *args], rank_env=rank_env or {})
    argv, _ = job.command()
    proc = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True, timeout=timeout)
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, records, proc.stderr


def points(records):
    return [r for r in records if r["type"] == "point"]


def list_tests(program):
    proc = subprocess.run([str(program), "--list"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_list_describes_every_test_without_mpi(program):
    tests = list_tests(program)
    assert {t["name"] for t in tests} == ALL_TESTS
    assert len(tests) == 21
    for t in tests:
        assert t["suite"] == t["name"].split(".")[0]
        assert t["metric"] in ("bandwidth", "time", "rate")
        assert isinstance(t["min_ranks"], int) and t["min_ranks"] >= 1
        assert t["bytes_per_op"] and t["description"]
        assert t["timed_by"] == ("rank0" if t["name"] in SENDER_TIMED else "max")
    by_name = {t["name"]: t for t in tests}
    assert by_name["mpbench.bandwidth"]["metric"] == "bandwidth"
    assert by_name["mpbench.latency"]["metric"] == "time"
    assert by_name["mpbench.roundtrip"]["metric"] == "rate"
    assert by_name["imb.PingPong"]["min_ranks"] == 2
    assert by_name["imb.Exchange"]["bytes_per_op"] == "4*size"
    assert by_name["imb.Sendrecv"]["bytes_per_op"] == "2*size"
    assert by_name["mpbench.bibw"]["bytes_per_op"] == "2*size"


def expected_skip(test, size, ranks):
    if test == "imb.Barrier":
        return size != 0
    if test in IMB_FLOAT_REDUCTIONS:
        return size < 4
    if test == "mpbench.alltoall":
        return 0 < size < ranks
    return False


@pytest.mark.parametrize("ranks", [2, 4])
def test_every_test_verifies_its_data(any_mpi, program, ranks):
    wanted = [(t, s) for t in sorted(ALL_TESTS) for s in (0, 1, 4096)]
    spec = ",".join(f"{t}:{s}" for t, s in wanted)
    before = time.monotonic()
    code, records, err = launch(any_mpi, program, ranks, ["--points", spec, "--check", *QUICK])
    after = time.monotonic()
    assert code == 0, err

    hello = records[0]
    assert hello["type"] == "hello" and hello["ranks"] == ranks
    assert len(hello["hosts"]) == ranks and all(hello["hosts"])
    assert hello["timer"] == "CLOCK_MONOTONIC" and 0 < hello["timer_resolution_s"] <= 1e-3
    assert ("MPICH" if any_mpi.kind == "mpich" else "Open MPI") in hello["mpi_library"]
    assert records[-1] == {"type": "done"}

    body = records[1:-1]
    assert [(r["test"], r["size_B"]) for r in body] == wanted  # one record per point, in order
    for r in body:
        if expected_skip(r["test"], r["size_B"], ranks):
            assert r["type"] == "skip" and r["reason"], r
            continue
        assert r["type"] == "point", r
        assert r["check"] == "ok" and r["check_errors"] == 0, r
        assert r["ranks"] == ranks and r["inner"] == 2
        assert len(r["samples_s"]) == r["reps"] == 3
        assert all(x > 0 for x in r["samples_s"])
        assert len(r["rank_mean_s"]) == ranks
        # The timestamps are on Python's time.monotonic() clock.
        assert before <= r["t_start_mono_s"] <= r["t_end_mono_s"] <= after


def test_point_fields_and_byte_accounting(mpich):
    program = build.build("bench", mpich)
    code, records, err = launch(mpich, program, 4, [
        "--points", "imb.PingPong:8,imb.Exchange:100,mpbench.alltoall:4097,imb.Reduce_scatter:4100,"
                    "mpbench.roundtrip:8", *QUICK])
    assert code == 0, err
    got = {r["test"]: r for r in points(records)}
    assert got["imb.PingPong"]["ops_per_rep"] == 4  # two half round trips per iteration
    assert got["imb.PingPong"]["metric"] == "time" and got["imb.PingPong"]["bytes_per_op"] == 8
    assert got["imb.Exchange"]["bytes_per_op"] == 400
    assert got["mpbench.alltoall"]["bytes_per_op"] == 4 * (4097 // 4)
    assert got["imb.Reduce_scatter"]["bytes_per_op"] == 4100
    assert got["mpbench.roundtrip"]["metric"] == "rate" and got["mpbench.roundtrip"]["ops_per_rep"] == 2
    for r in got.values():
        # Three samples never define a CI (it needs 6) and the budget is out of reach, so
        # only --max-reps can stop.
        assert r["converged"] is False and r["stop"] == "max_reps" and r["ci_rel"] is None


def test_corrupted_sender_is_detected(any_mpi, program):
    """A flipped byte in rank 0's send data must turn every point's check to failed."""
    tests = sorted(ALL_TESTS - {"imb.Barrier"})
    spec = ",".join(f"{t}:4096" for t in tests)
    code, records, err = launch(any_mpi, program, 2, ["--points", spec, "--check", *QUICK],
                                rank_env={"SHOAL_BENCH_CORRUPT": "0"})
    assert code == 0, err  # a failed check is reported, not fatal
    got = points(records)
    assert [r["test"] for r in got] == tests
    for r in got:
        assert r["check"] == "failed" and r["check_errors"] > 0, r


def test_without_check_nothing_is_verified(mpich):
    program = build.build("bench", mpich)
    code, records, err = launch(mpich, program, 2, ["--points", "imb.PingPong:64", *QUICK],
                                rank_env={"SHOAL_BENCH_CORRUPT": "0"})
    assert code == 0, err
    (r,) = points(records)
    assert r["check"] == "off" and r["check_errors"] == 0


def test_impossible_ci_within_tiny_budget_is_not_converged(any_mpi, program):
    code, records, err = launch(any_mpi, program, 2, [
        "--points", "imb.PingPong:4096,mpbench.bcast:4096", "--ci", "0", "--budget", "0.05",
        "--rep-time", "1e-4"])
    assert code == 0, err
    for r in points(records):
        assert r["converged"] is False and r["stop"] == "budget"
        assert r["reps"] == len(r["samples_s"]) >= 1


def test_a_call_past_the_budget_is_calibrated_once_and_is_its_own_warm_up(mpich):
    """A repetition that alone outlasts the point's budget (a budget of 1 ns here; in a study a
    32 MiB call on a 100 Mbit/s link) is the calibration's last trial, and as it ran at the
    inner count measured it counts as the warm-up: one untimed call, then one measured. (A
    repetition time of 1 ns keeps the inner count at the one call a trial ran.)"""
    program = build.build("bench", mpich)
    code, records, err = launch(mpich, program, 2, [
        "--points", "mpbench.bandwidth:65536,mpbench.alltoall:65536", "--budget", "1e-9",
        "--rep-time", "1e-9", "--warmup", "1", "--min-reps", "1"])
    assert code == 0, err
    for r in points(records):
        assert (r["inner"], r["untimed_reps"], r["reps"], r["stop"]) == (1, 1, 1, "budget"), r
    # Two warm-ups asked for: the calibration's one trial at that count and one more.
    code, records, err = launch(mpich, program, 2, [
        "--points", "mpbench.bandwidth:65536", "--budget", "1e-9", "--rep-time", "1e-9",
        "--warmup", "2"])
    assert code == 0, err
    assert [(r["untimed_reps"], r["reps"]) for r in points(records)] == [(2, 1)]
    # A fixed inner count runs no calibration: the warm-ups asked for, no more.
    code, records, err = launch(mpich, program, 2, [
        "--points", "imb.PingPong:8", "--inner", "3", "--warmup", "2", "--min-reps", "4", "--max-reps", "4",
        "--budget", "1000"])
    assert code == 0, err
    assert [(r["untimed_reps"], r["reps"]) for r in points(records)] == [(2, 4)]


def test_max_reps_stops_without_convergence(mpich):
    program = build.build("bench", mpich)
    code, records, err = launch(mpich, program, 2, [
        "--points", "imb.Sendrecv:1024", "--ci", "0", "--budget", "100", "--max-reps", "12",
        "--inner", "4", "--flush", "1048576", "--check"])
    assert code == 0, err
    (r,) = points(records)
    assert (r["stop"], r["converged"], r["reps"], r["check"]) == ("max_reps", False, 12, "ok")


def test_ci_stop_uses_the_same_rule_as_stats(mpich):
    """The native stopping rule and shoal.bench.stats agree on the CI of the same samples."""
    program = build.build("bench", mpich)
    code, records, err = launch(mpich, program, 2, [
        "--points", "imb.PingPong:8,mpbench.allreduce:64", "--ci", "0.5", "--min-reps", "15",
        "--budget", "20"])
    assert code == 0, err
    for r in points(records):
        assert r["stop"] == "ci" and r["converged"] is True
        assert r["reps"] >= 15
        stats = summarize(r["samples_s"])
        assert r["ci_rel"] == pytest.approx(stats.ci_halfwidth_rel, rel=1e-6)
        assert r["ci_rel"] <= 0.5
        assert r["median_s"] == pytest.approx(stats.median, rel=1e-6)


def test_too_few_ranks_is_a_skip(mpich):
    program = build.build("bench", mpich)
    code, records, err = launch(mpich, program, 1, ["--points", "imb.PingPong:8,imb.Bcast:8", *QUICK])
    assert code == 0, err
    skip, bcast = records[1], records[2]
    assert skip["type"] == "skip" and "at least 2 ranks" in skip["reason"]
    assert bcast["type"] == "point" and bcast["ranks"] == 1


BAD_ARGS = [
    [],
    ["--points", "imb.PingPong"],
    ["--points", "nosuch.test:8"],
    ["--points", "imb.PingPong:-8"],
    ["--points", "imb.PingPong:8", "--ci", "-0.1"],
    ["--points", "imb.PingPong:8", "--budget", "0"],
    ["--points", "imb.PingPong:8", "--min-reps", "20", "--max-reps", "10"],
    ["--points", "imb.PingPong:8", "--inner"],
    ["--points", "imb.PingPong:8", "--rep-time", "nan"],
    ["--points", "imb.PingPong:8", "--settle", "-1"],
    ["--points", "imb.PingPong:8", "--warp", "9"],
]


@pytest.mark.parametrize("args", BAD_ARGS, ids=lambda a: " ".join(a) or "no-args")
def test_bad_arguments_one_line_exit_2(mpich, args):
    program = build.build("bench", mpich)
    proc = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shoal-bench: "), proc.stderr
    assert proc.stdout == ""


def test_bad_arguments_under_mpiexec_print_once(any_mpi, program):
    code, records, err = launch(any_mpi, program, 2, ["--points", "imb.PingPong:8", "--ci", "x"])
    assert code == 2
    assert records == []
    assert sum(line.startswith("shoal-bench: ") for line in err.splitlines()) == 1


def test_roundtrip_is_two_half_round_trips(mpich):
    """MPBench's round trip and IMB's half round trip share a kernel: their times differ by 2x.

    On a shared two-core machine other processes come and go within
    fractions of a second, and the samples become a mixture of quiet and
    contended moments. So the two tests alternate in twenty short points of
    equal length, their samples are pooled, and the pools are compared at
    their fastest sample, the quietest moment of each (the pooled medians flip
    between the two parts when the machine is busy about half of the time, and
    the 10th percentiles read 1.68 once under a load average of 6).
    """
    program = build.build("bench", mpich)
    spec = ",".join(["mpbench.roundtrip:8,imb.PingPong:8"] * 20)
    code, records, err = launch(mpich, program, 2, ["--points", spec, "--inner", "100", "--ci", "0",
                                                    "--budget", "0.05"])
    assert code == 0, err
    got = points(records)
    assert [r["test"] for r in got] == ["mpbench.roundtrip", "imb.PingPong"] * 20
    roundtrip = min(x for r in got[0::2] for x in r["samples_s"])
    half = min(x for r in got[1::2] for x in r["samples_s"])
    assert roundtrip / half == pytest.approx(2.0, rel=0.15), (roundtrip, half)


def test_bandwidth_grows_with_message_size(mpich):
    program = build.build("bench", mpich)
    code, records, err = launch(mpich, program, 2, [
        "--points", "mpbench.bandwidth:1024,mpbench.bandwidth:1048576", "--budget", "0.5"])
    assert code == 0, err
    small, big = points(records)
    assert big["bytes_per_op"] / big["median_s"] > small["bytes_per_op"] / small["median_s"]
