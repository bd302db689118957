"""`shoal dsm run` and `shoal dsm lab` from the command line."""

import json
import subprocess
import sys

import pytest


def shoal(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_run_prints_the_time_split_and_the_seed_counts():
    proc = shoal("dsm", "run", "full", "--wait", "sleep:0", "--", "--writes", "100", "--sample", "0")
    assert proc.returncode == 0, proc.stderr
    assert "full (sdsm) under sleep:0" in proc.stdout
    assert "S-DSM" in proc.stdout and "sleep" in proc.stdout
    assert "seed 003's run of this pattern: 360000" in proc.stdout


def test_run_json_with_a_preset_models_each_device(tmp_path):
    proc = shoal("dsm", "run", "video", "--wait", "backoff", "--mpi", "openmpi",
                 "--preset", "video-recs", "--json", "--", "--frames", "3", "--thetas", "20",
                 "--sample", "0")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {d["device"] for d in out["devices"]} == {"i7-a", "i7-b", "a15-1", "a15-2", "a15-3",
                                                      "a15-4"}
    assert all(d["kind"] == "modelled" for d in out["devices"])
    i7 = next(d for d in out["devices"] if d["device"] == "i7-a")
    assert 10.0 <= i7["power_W"] <= 30.0          # between the seed's idle and busy watts
    split = out["time_split"]
    assert len(split) == 7
    for row in split:
        parts = row["user_s"] + row["sdsm_s"] + row["mpi_wait_s"] + row["sleep_s"]
        assert parts == pytest.approx(row["wall_s"], rel=0.05, abs=0.01)


@pytest.mark.parametrize("args, message", [
    (("dsm", "run", "pagerank"), "unknown S-DSM program 'pagerank'"),
    (("dsm", "run", "full", "--", "--bytes", "3000000000"), "one MPI message carries"),
    (("dsm", "run", "hough", "--preset", "video-recs"), "places video, not hough"),
    (("dsm", "run", "video", "-n", "5", "--preset", "video-recs"), "places 7 ranks, not 5"),
    (("dsm", "run", "video", "--impl", "seq", "-n", "3"), "runs on 1 rank"),
    (("dsm", "run", "lock", "--impl", "mpi"), "exists only on the S-DSM"),
    (("dsm", "run", "full", "--wait", "sleep:-1"), "wait mode"),
    (("dsm", "lab", "--experiments", "Z"), "unknown experiment 'Z'"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    proc = shoal(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_lab_experiment_g_gives_table_2_columns(tmp_path):
    """Aggressive and Adaptive Degraded (the seed's adaptive receive under Open MPI's
    mpi_yield_when_idle): Table 2's columns, and its four rows beside the seed's."""
    proc = shoal("dsm", "lab", "--experiments", "G", "--modes", "busy;degraded+linear:0,1000,1",
                 "--mpi", "openmpi", "--rounds", "1", "--quick", "--out", str(tmp_path / "lab"),
                 "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    mpi = "Open MPI " + out["results"][0]["mpi"].split()[-1]
    rows = out["table2"][mpi]
    assert [r["contender"] for r in rows] == ["busy", "degraded+linear:0,1000,1"]
    beside = out["table2_beside_seed"][mpi]
    assert [(r["mode"], r["ran"]) for r in beside] == [
        ("Aggressive", True), ("Degraded", False), ("Adaptive Aggressive", False),
        ("Adaptive Degraded", True)]
    assert beside[0]["fps_vs_aggressive"] == 0.0
    assert beside[3]["fps"] == rows[1]["fps"]
    assert beside[3]["seed_fps_per_W_vs_aggressive"] == pytest.approx(0.043 / 0.037 - 1)
    assert "fps" not in beside[1]
    for r in rows:
        assert r["kind"].startswith("measured")
        assert r["fps"] > 0 and r["power_W"] > 0
        assert r["fps_per_W"] == pytest.approx(r["fps"] / r["power_W"])
        assert r["J_per_frame"] == pytest.approx(r["power_W"] * r["time_s"] / 8)
    for table in ("results", "split", "devices", "node_power"):
        assert (tmp_path / "lab" / f"{table}.csv").exists()
    # Fig. 10's form: every node of the RECS placement and the platform, per contender.
    fig10 = out["fig10"][mpi]
    assert {(r["contender"], r["device"]) for r in fig10} == {
        (c, d) for c in ("busy", "degraded+linear:0,1000,1")
        for d in ("i7-b", "i7-a", "a15-1", "a15-2", "a15-3", "a15-4", "platform")}
    for r in fig10:
        assert r["kind"] == "modelled" and r["peak_W"] >= r["mean_W"] * (1 - 1e-12) and r["energy_J"] > 0


def test_lab_experiment_e_measures_the_quiet_server(tmp_path):
    proc = shoal("dsm", "lab", "--experiments", "E", "--modes", "backoff", "--mpi", "mpich",
                 "--rounds", "1", "--quick", "--out", str(tmp_path / "lab"))
    assert proc.returncode == 0, proc.stderr
    assert "Experiment E, MPICH" in proc.stdout
    for app in ("full", "burst", "lock"):
        assert app in proc.stdout
    from shoal.runs.store import Run

    run = Run.open(tmp_path / "lab")
    rows = run.rows("results")
    assert {r["app"] for r in rows} == {"full", "burst", "lock"}
    assert all(r["status"] == "ok" for r in rows)
    # the server's CPU inside the quiet windows was computed from its timeline (how long the
    # clients' pauses overlap depends on how the host schedules them: 0.08 s on a loaded host)
    for r in rows:
        if r["app"] in ("burst", "lock"):
            assert 0.0 <= float(r["server_quiet_load"]) <= 1.0
            assert float(r["quiet_s"]) > 0
    assert {r["rank"] for r in run.rows("timeline")} == {"0", "1", "2"}
    assert {r["role"] for r in run.rows("split")} == {"server", "client"}
