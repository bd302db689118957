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
    blade = rows[("raytrace 512² time", "blades: 8 ranks on 1 blade")]
    assert blade["shoal"] == pytest.approx(0.55) and blade["seed"] == 0.58
    # Only the points planned as not run are listed as such.
    assert seed_compare.not_run_rows(run) == [
        {"test": "imb.PingPong", "size_B": 1024, "nodes": 64, "reason": "not run: it would take 80 s"}]


def test_a_study_of_another_preset_has_no_seed_rows(tmp_path):
    assert seed_compare.seed_rows(_run(tmp_path, preset=None)) is None


def _imb(tmp_path, points):
    """results.csv rows of IMB points: (test, config, nodes, size_B, time_s[, ranks])."""
    with open(tmp_path / "results.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["test", "config", "nodes", "ranks", "size_B", "time_median_s", "bandwidth_median_Bps"])
        for test, config, nodes, size, t, *ranks in points:
            writer.writerow([test, config, nodes, ranks[0] if ranks else nodes, size, t, size / t])


def test_means_over_other_sizes_or_node_counts_than_the_seeds_show_no_ratio(tmp_path):
    # A quick study: PingPong at 2 of the seed's 6 sizes, Bcast at 8-32 of its 8-128 boxes.
    run = _run(tmp_path)
    _imb(tmp_path, [("imb.PingPong", "64xstb", 8, 64, 0.01), ("imb.PingPong", "64xstb", 8, 262144, 0.5)]
         + [("imb.Bcast", "64xstb", n, size, t * n) for n in (8, 16, 32) for size, t in ((64, 0.01), (262144, 0.1))])
    rows = {(r["quantity"], r["configuration"]): r for r in seed_compare.seed_rows(run)}
    pingpong = rows[("PingPong time, mean of the sizes", "8 boxes (2 ranks)")]
    assert pingpong["shoal"] == pytest.approx(0.255) and pingpong["seed"] == 0.122 and pingpong["ratio"] is None
    assert "mean of 2 of the 6 sizes (64 B, 262144 B), the seed's of all six: no ratio" in pingpong["source"]
    bcast = rows[("Bcast 262144 B time, mean of the node counts", "boxes")]
    assert bcast["shoal"] == pytest.approx(0.1 * (8 + 16 + 32) / 3) and bcast["seed"] == 13.4
    assert bcast["ratio"] is None and "(8, 16, 32), the seed's over 8, 16, 32, 64, 128: no ratio" in bcast["source"]
    assert rows[("Bcast time, mean of the sizes", "8 boxes")]["ratio"] is None


def test_means_over_the_seeds_own_sizes_and_node_counts_have_their_ratio(tmp_path):
    run = _run(tmp_path)
    sizes = seed_compare.SEED002_SIZES
    _imb(tmp_path, [("imb.PingPong", "64xstb", 8, s, 0.1) for s in sizes]
         + [("imb.Bcast", "64xstb", n, s, 0.02 * n) for n in (8, 16, 32, 64, 128) for s in sizes])
    rows = {(r["quantity"], r["configuration"]): r for r in seed_compare.seed_rows(run)}
    pingpong = rows[("PingPong time, mean of the sizes", "8 boxes (2 ranks)")]
    assert pingpong["ratio"] == pytest.approx(0.1 / 0.122) and "no ratio" not in pingpong["source"]
    bcast = rows[("Bcast 64 B time, mean of the node counts", "boxes")]
    assert bcast["ratio"] == pytest.approx(0.02 * 248 / 5 / 0.2)
    assert rows[("Bcast time, mean of the sizes", "128 boxes")]["ratio"] == pytest.approx(0.02 * 128 / 7.1)


def _blade_work(tmp_path, points):
    """work.csv rows on the blades: (workload, size, config, nodes, ranks, times)."""
    with open(tmp_path / "work.csv", "a", newline="") as out:
        writer = csv.writer(out)
        for workload, size, config, nodes, ranks, times in points:
            for rep, t in enumerate([99.0] + times):  # the warm-up, then counted repetitions
                writer.writerow([config, nodes, ranks, workload, size, rep, t,
                                 f"{config}/{nodes}/{ranks}/{workload}/{size}/{rep}"])


def test_eight_blades_stand_beside_fig_8b_and_table_i_with_the_boxes_against_the_blades(tmp_path):
    run = _run(tmp_path)
    # The reference is 8 blades x 8 ranks; 'blades' holds ray tracing at 8 ranks and the alignment
    # on one processor. S100-L40 stands for Table I's S500-L200, its work / 625.
    _blade_work(tmp_path, [("raytrace", 2048, "blades", 8, 8, [10.0, 10.2]),
                           ("raytrace", 2048, "reference", 8, 64, [7.5, 7.7]),
                           ("msa", "S100-L40", "blades", 1, 1, [0.6, 0.62]),
                           ("msa", "S100-L40", "reference", 8, 64, [0.1, 0.1]),
                           ("msa", "S100-L40", "64xstb", 8, 8, [2.6, 2.6]),
                           ("msa", "S100-L40", "64xstb", 128, 128, [0.3, 0.3])])
    rows = {(r["quantity"], r["configuration"]): r for r in seed_compare.seed_rows(run)}
    assert rows[("raytrace 2048² time", "blades: 8 ranks on 8 blades")]["seed"] == 9.3
    speedup = rows[("raytrace 2048² speed-up 8 -> 64 blade ranks", "blades: 8 -> 64 ranks")]
    assert speedup["shoal"] == pytest.approx(10.1 / 7.6) and speedup["seed"] == pytest.approx(9.3 / 7.07)
    one = rows[("msa S100-L40 time", "blades: 1 rank on 1 blade")]
    assert one["seed"] == pytest.approx(341 / 625) and "S500-L200 / 625" in one["source"]
    blades = rows[("msa S100-L40 speed-up 1 -> 64 blade processors", "blades: 1 -> 64 ranks")]
    assert blades["shoal"] == pytest.approx(6.1) and blades["seed"] == pytest.approx(341 / 51)
    # Boxes 2.6/0.3 = 8.7x against the blades' 6.1x: ahead, as the seed's 7.6x against 6.7x.
    over = rows[("msa S100-L40 boxes' speed-up over the blades'", "8 -> 128 boxes / 1 -> 64 ranks")]
    assert over["shoal"] == pytest.approx((2.6 / 0.3) / 6.1)
    assert over["seed"] == pytest.approx((1652 / 216) / (341 / 51)) and "boxes ahead, as in the seed" in over["source"]


def test_two_blades_against_128_boxes_is_a_measured_ratio(tmp_path):
    run = _run(tmp_path)
    _blade_work(tmp_path, [("msa", "S100-L40", "reference", 2, 16, [0.5, 0.5]),
                           ("msa", "S100-L40", "64xstb", 128, 128, [0.4, 0.4])])
    rows = {(r["quantity"], r["configuration"]): r for r in seed_compare.seed_rows(run)}
    two = rows[("msa S100-L40 time, 2 blades over 128 boxes", "2 blades (16 ranks) / 128 boxes")]
    assert two["shoal"] == pytest.approx(1.25) and two["ratio"] is None and "128 boxes beat two blades" in two["source"]


def test_the_blades_bcast_is_compared_over_the_seeds_rank_counts_only(tmp_path):
    run = _run(tmp_path)
    sizes = seed_compare.SEED002_SIZES
    # 8 blades at 1, 2, 4 and 8 ranks each; 5 ms at 64 ranks, 4 ms below.
    _imb(tmp_path, [("imb.Bcast", "blades", 8, s, 0.005 if r == 64 else 0.004, r)
                    for r in (8, 16, 32, 64) for s in sizes])
    rows = {(r["quantity"], r["configuration"]): r for r in seed_compare.seed_rows(run)}
    mean = rows[("Bcast time, mean of the sizes and rank counts", "blades")]
    assert mean["shoal"] == pytest.approx(0.00425) and mean["seed"] == 0.0037
    assert mean["ratio"] == pytest.approx(0.00425 / 0.0037)
    assert rows[("Bcast time, mean of the sizes, 64 over 8 ranks", "blades")]["shoal"] == pytest.approx(1.25)
    assert rows[("Bcast time, mean of the sizes", "blades: 64 ranks on 8 blades")]["ratio"] is None
    assert rows[("Bcast 262144 B time, mean of the node counts", "blades")]["ratio"] == pytest.approx(0.00425 / 0.01)
    # Without 64 ranks the mean over rank counts is not the seed's: no ratio.
    _imb(tmp_path, [("imb.Bcast", "blades", 8, s, 0.004, r) for r in (8, 16) for s in sizes])
    rows = {(r["quantity"], r["configuration"]): r for r in seed_compare.seed_rows(Run.open(tmp_path))}
    assert rows[("Bcast time, mean of the sizes and rank counts", "blades")]["ratio"] is None
    assert rows[("Bcast 64 B time, mean of the node counts", "blades")]["ratio"] is None
