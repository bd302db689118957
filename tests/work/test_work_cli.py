"""`shoal work` end to end: real MPI runs, the run directory, energy, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from shoal.errors import ShoalError
from shoal.work import runner


def shoal(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))


def test_work_writes_a_run_with_phases_and_energy(tmp_path):
    out = tmp_path / "run"
    proc = shoal("work", "ep", "--size", "small", "-n", "1,2", "--reps", "1", "--check",
                 "--power", "model:2,6", "--wait", "busy", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["run"] == str(out) and payload["failures"] == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "work" and manifest["status"] == "complete"
    assert manifest["workload"]["name"] == "ep" and manifest["workload"]["size"] == "M18"
    assert manifest["workload"]["aes"]["used"] == "auto"
    assert manifest["stack"]["native"]["shoal-work"]["compiler"] and manifest["stack"]["mpi_build"]
    assert manifest["stack_during"]["forks"] >= 1
    results = pd.read_csv(out / "results.csv")
    assert len(results) == 2 and results["point_id"].is_unique
    assert sorted(results["ranks"]) == [1, 2]
    assert (results["check"] == "pass").all()
    assert (results["work"] == 2.0 ** 19).all()
    # Phases are parts of the run; throughput is work over time; energy is over the timed part.
    assert (results["compute_s"] <= results["time_s"] * 1.01).all()
    assert results["throughput_per_s"].values == pytest.approx((results["work"] / results["time_s"]).values,
                                                                rel=1e-6)
    assert (results["energy_J"] > 0).all() and (results["power_kind"] == "modelled").all()
    assert results["energy_per_unit_J"].values == pytest.approx(
        (results["energy_J"] / results["work"]).values)
    assert len(json.loads(results.loc[results["ranks"] == 2, "rank_compute_s"].iloc[0])) == 2
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["ranks"]) == [1, 2] and list(summary["reps"]) == [1, 1]
    assert summary.loc[0, "speedup"] == 1.0
    assert (summary["time_min_s"] <= summary["time_median_s"]).all()
    # Under libshoalwait (busy: passing through) each launch's traffic matrix is kept: the
    # 2-rank launch's reductions go each way, the 1-rank launch talks to nobody.
    cells = pd.read_csv(out / "traffic.csv")
    assert list(cells.columns) == runner.records.TRAFFIC_COLUMNS
    assert sorted(zip(cells["ranks"], cells["src"], cells["dst"])) == [(2, 0, 1), (2, 1, 0)]
    assert (cells["kind"] == "coll").all() and (cells["bytes"] > 0).all()
    assert (cells["workloads"] == "ep:M18").all()
    assert (out / "traffic-local-1n-2r.png").exists()
    assert not (out / "telemetry").exists()      # the rank files are not kept


def test_a_failed_check_is_kept_and_reported(tmp_path, monkeypatch):
    out = tmp_path / "run"
    request = runner.WorkRequest(workload="is", size="S", reps=1, check=True, ranks=[2])
    run, plan = runner.start(request, ["test"], out)
    monkeypatch.setattr(runner, "program_args", lambda p, more=(): [str(p.program), "--runs", "is:S",
                                                           "--check", "--corrupt"])
    runner.execute(run, plan)
    rows = run.rows("results")
    assert len(rows) == 1 and rows[0]["check"] == "fail" and "serial sort" in rows[0]["check_detail"]
    assert run.manifest["status"] == "complete-with-failures"


# Bad input to shoal work: tests/badinput/cases/work-*.toml.


def test_a_size_beyond_memory_is_refused(monkeypatch):
    from shoal.inputs import ranklimit

    monkeypatch.setattr(ranklimit, "this_host", lambda: ranklimit.HostLimits(2, 64e6, None))
    with pytest.raises(ShoalError, match=r"this machine has 0\.1 GiB available; give fewer ranks or a "
                                         r"smaller --size \(raytrace 4096 needs about 48 MiB per rank\)"):
        runner.plan(runner.WorkRequest(workload="raytrace", size="4096", ranks=[4]))


@pytest.mark.parametrize("emulate, used", [("2xrpi3", "software"), ("1xnuc", "auto"),
                                           ("1xnuc+1xrpi0w", "software")])
def test_edge_runs_software_aes_where_a_device_has_no_aes_instructions(emulate, used):
    the_plan = runner.plan(runner.WorkRequest(workload="edge", size="small", emulate=emulate))
    assert the_plan.aes == used
    assert ("no AES instructions" in the_plan.aes_why) == (used == "software")
    assert runner.program_args(the_plan)[-2:] == ["--aes", used]
    # What the user asks for wins.
    forced = runner.plan(runner.WorkRequest(workload="edge", size="small", emulate=emulate, aes="openssl"))
    assert forced.aes == "openssl"

