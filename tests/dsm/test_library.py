"""libshoalsdsm on real MPI: mutual exclusion, randomized stress against a
sequential model, defined error codes, the watchdog, and how it waits."""

import json
import re
from pathlib import Path

import pytest

from shoal.dsm import apps
from shoal.mpi import build
from tests.dsm.helpers import last_json, launch

SOURCES = Path(build.NATIVE_DIR) / "sdsm"


@pytest.mark.parametrize("mode, seeds", [("backoff", 50), ("busy", 10), ("linear:0,1000,1", 5)])
def test_stress_seeds_match_the_sequential_model(any_mpi, mode, seeds):
    # 50 seeds under the default mode; fewer under busy and linear, whose
    # ping-pong is slow on a crowded 2-core machine (MPICH spinning ranks)
    proc = launch(any_mpi, 3, ["stress", "--seeds", str(seeds), "--ops", "120"], mode)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = last_json(proc.stdout)
    assert out["seeds"] == seeds and out["clients"] == 2
    assert out["violations"] == 0, f"first failing seed {out['first_failed_seed']}"


def test_stress_two_homes_more_ranks_than_cores(any_mpi):
    # 2 servers + 3 clients on a 2-core machine, chunks homed on both servers
    proc = launch(any_mpi, 5, ["stress", "--seeds", "10", "--ops", "100"], "backoff")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = last_json(proc.stdout)
    assert out["servers"] == 2 and out["clients"] == 3
    assert out["violations"] == 0


# 10 000 increments per client where a round trip is cheap; MPICH's oversubscribed
# round trips cost milliseconds on a crowded 2-core machine, so fewer there
@pytest.mark.parametrize("kind, mode, writes", [("openmpi", "backoff", 10000),
                                                ("openmpi", "busy", 10000),
                                                ("mpich", "backoff", 2000),
                                                ("mpich", "busy", 1000)])
def test_increments_are_never_lost(request, kind, mode, writes):
    any_mpi = request.getfixturevalue(kind)
    # 3 clients x N increments of one datum; the program dies on a lost update
    res = apps.run(any_mpi, "full", ["--writes", str(writes), "--sample", "0"], 4, mode)
    assert res.report["final_value"] == 3 * writes
    assert res.report["clients"] == 3
    # three messages per write (request, grant, release) plus shutdown
    assert 9 * writes <= res.report["messages"] <= 9 * writes + 8 * 3


def test_defined_error_codes_instead_of_hangs(any_mpi):
    proc = launch(any_mpi, 3, ["errors"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = last_json(proc.stdout)
    assert out["server_acquire"] == "EROLE"
    assert out["client_serve"] == ["EROLE", "EROLE"]
    assert out["mismatch"] == ["EMISMATCH"] * 3
    assert out["too_big"] == ["EINVAL"] * 3
    assert out["double_acquire"] == ["EHELD", "EHELD"]
    assert out["unheld_release"] == ["ENOTHELD", "ENOTHELD"]
    assert sorted(out["opposite_order"]) == ["EDEADLK", "OK"]


def test_watchdog_names_a_cross_home_deadlock(any_mpi):
    proc = launch(any_mpi, 4, ["deadlock"], env={"SDSM_WATCHDOG_S": "1"}, timeout=120)
    assert proc.returncode != 0
    assert "sdsm watchdog" in proc.stderr
    # each home names its holder and the client queued behind it
    assert re.search(r"holders: rank [23] \(write\); queue: rank [23] \(write", proc.stderr)
    assert "waits for rank" in proc.stderr


def test_waits_are_blocking_receives_that_libshoalwait_sees(mpich, tmp_path):
    text = "".join(p.read_text() for p in SOURCES.glob("*.c"))
    for call in ("MPI_Probe", "MPI_Iprobe", "MPI_Improbe", "MPI_Test", "MPI_Irecv"):
        assert call not in text
    from shoal.mpi.launch import Job
    from shoal.wait import apply, telemetry

    job = apply(Job(mpich, 3, [str(apps.program(mpich)), "lock", "--cycles", "2", "--hold",
                               "0.2", "--sample", "0"]), "backoff", telemetry_dir=tmp_path)
    done = job.run(timeout=120)
    assert done.returncode == 0, done.stderr
    records = telemetry.read_dir(tmp_path)
    server = next(r for r in records if r["rank"] == 0)
    recv = server["calls"]["MPI_Recv"]
    assert recv["waits"] > 0 and recv["sleep_s"] > 0.2
    assert not any("probe" in name.lower() for name in server["calls"])
