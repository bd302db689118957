"""shoal's numbers beside seed 002's, computed from a run's tables (study.seed_compare), on a
run directory written here: no study runs (test_seed002_study.py runs the preset end to end)."""

from __future__ import annotations

import csv
import json

import pytest

from shoal.runs.store import Run
from shoal.study import seed_compare
from shoal.study.request import StudyRequest

COLUMNS = ["config", "nodes", "ranks", "workload", "size", "rep", "time_s", "point_id"]


def _run(tmp_path, preset: str | None = "seed002"):
    request = StudyRequest.create(preset=preset) if preset else StudyRequest.create()
    warmup = request.work_warmup
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "study", "study": request.to_manifest(),
                                                        "cluster_label": "64xstb"}))
    with open(tmp_path / "work.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        # A slow warm-up, then three counted repetitions at 8 and 64 boxes and on the blade.
        for config, nodes, times in (("64xstb", 8, [7.0, 6.0, 6.4]), ("64xstb", 64, [1.2, 1.3, 1.1]),
                                     ("reference", 1, [0.5, 0.6, 0.55])):
            for rep, t in enumerate([99.0] * warmup + times):
                writer.writerow([config, nodes, 8 if config == "reference" else nodes, "raytrace", 512, rep, t,
                                 f"{config}/{nodes}/raytrace/512/{rep}"])
    with open(tmp_path / "skipped.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["test", "size_B", "nodes", "reason"])
        writer.writerow(["imb.PingPong", 1024, 64, "not run: it would take 80 s"])
        writer.writerow(["imb.Bcast", 64, 8, "failed twice"])
    return Run.open(tmp_path)


def test_raytrace_times_stand_beside_the_seeds_with_their_ratio_and_source(tmp_path):
    run = _run(tmp_path)
    rows = {(r["quantity"], r["configuration"]): r for r in seed_compare.seed_rows(run)}
    eight = rows[("raytrace 512² time", "8 boxes")]
    assert eight["shoal"] == pytest.approx(6.4) and eight["seed"] == 6.9   # the counted median
    assert eight["ratio"] == pytest.approx(6.4 / 6.9) and eight["source"].startswith("seed 002 §V Fig. 8(a)")
    speedup = rows[("raytrace 512² speed-up from 8 boxes", "64 boxes")]
    assert speedup["shoal"] == pytest.approx(6.4 / 1.2) and speedup["unit"] == "1"
    blade = rows[("raytrace 512² time", "reference: 8 blade ranks")]
    assert blade["shoal"] == pytest.approx(0.55) and blade["seed"] == 0.58
    # Only the points planned as not run are listed as such.
    assert seed_compare.not_run_rows(run) == [
        {"test": "imb.PingPong", "size_B": 1024, "nodes": 64, "reason": "not run: it would take 80 s"}]


def test_a_study_of_another_preset_has_no_seed_rows(tmp_path):
    assert seed_compare.seed_rows(_run(tmp_path, preset=None)) is None
