"""MPI semantics are unchanged under every wait mode, with MPICH and Open MPI.

shoal-waittest semantics checks ANY_SOURCE/ANY_TAG statuses, STATUS(ES)_IGNORE,
MPI_REQUEST_NULL in Waitall/Waitany/Waitsome, inactive persistent requests,
Mprobe/Mrecv, PROC_NULL, Ssend and sends above the eager limit with a late
receiver, Sendrecv(_replace), error classes under MPI_ERRORS_RETURN and every
wrapped collective; each rank prints a digest of what it saw.
"""

from __future__ import annotations

import json

import pytest

from tests.wait.helpers import MODES, json_lines, run_scenario


def _digests(proc) -> dict[int, str]:
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = json_lines(proc.stdout)
    assert sorted(d["rank"] for d in lines) == [0, 1]
    assert all(d["failures"] == 0 for d in lines), proc.stderr[-2000:]
    return {d["rank"]: d["digest"] for d in lines}


@pytest.fixture(scope="module")
def reference(request):
    """Digests without the library at all, per MPI kind."""
    cache = {}

    def get(mpi):
        if mpi.kind not in cache:
            cache[mpi.kind] = _digests(run_scenario(mpi, None, 2, "semantics", preload=False))
        return cache[mpi.kind]
    return get


@pytest.mark.parametrize("mode", MODES)
def test_semantics_identical_in_every_mode(any_mpi, mode, reference):
    digests = _digests(run_scenario(any_mpi, mode, 2, "semantics"))
    assert digests == reference(any_mpi)
    assert "recv_any=0,7,3" in digests[1] and "waitany_null=1" in digests[0]


@pytest.fixture(scope="module")
def plain_result():
    """rank 0's checksum of the 3-rank computation without the library."""
    cache = {}

    def get(mpi):
        if mpi.kind not in cache:
            proc = run_scenario(mpi, None, 3, "result", "--rounds", "25", preload=False)
            assert proc.returncode == 0, proc.stderr[-2000:]
            cache[mpi.kind] = json_lines(proc.stdout)
        return cache[mpi.kind]
    return get


@pytest.mark.parametrize("mode", ["busy", "yield", "sleep:20", "linear", "backoff", "auto"])
def test_results_identical_with_three_ranks(any_mpi, mode, plain_result):
    proc = run_scenario(any_mpi, mode, 3, "result", "--rounds", "25")
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json_lines(proc.stdout)
    assert len(got) == 1 and got[0]["ranks"] == 3 and got[0]["rounds"] == 25
    assert got == plain_result(any_mpi)


@pytest.mark.parametrize("mode", ["backoff", "linear", "auto"])
def test_thread_multiple_two_receiving_threads(any_mpi, mode, tmp_path):
    proc = run_scenario(any_mpi, mode, 2, "threads", telemetry=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = json_lines(proc.stdout)
    assert line == {"threads": 2, "received": 400, "sum": 60039800, "bad": 0}
    rank1 = json.loads((tmp_path / "rank-1.json").read_text())
    assert rank1["calls"]["MPI_Recv"]["calls"] == 400
    # The sender pauses every 50 messages: the receiving threads did sleep.
    if mode != "busy":
        assert rank1["calls"]["MPI_Recv"]["sleeps"] > 0


def test_fortran_entry_points(any_mpi):
    proc = run_scenario(any_mpi, "backoff", 2, "fortran")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = json_lines(proc.stdout)
    assert sorted(d["rank"] for d in lines) == [0, 1]
    assert all(d["fortran_failures"] == 0 for d in lines)
