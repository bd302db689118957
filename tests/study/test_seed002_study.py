"""`shoal study --preset seed002` end to end at 2 set-top boxes beside a Xeon blade: the seed's
numbers stand beside shoal's in the report, and the points planned as not run are listed."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

# The full preset at tiny scale: its blade reference, its DOCSIS plant, one rank per box;
# small sizes. D = 2 (the blade's CPUs on this host), given so the IMB plan is the same on
# every host. 7 s of IMB: the preset keeps Bcast (2 points, 4.2 s with their fixed cost of
# 2.0 s at 2 boxes), so of PingPong's points (2.1-2.4 s each) only the cheaper, 64 B, fits;
# 1 KiB is planned as not run. Two boxes, one node count: each launch on a box that gets
# 0.3 % of a host core costs about a minute of MPI start-up, which more counts multiply.
ARGS = ["--preset", "seed002", "--emulate", "2xstb", "--nodes", "2", "--dilation", "2",
        "--work-size", "raytrace=48", "--work-size", "msa=S60-L40", "--work-reps", "1",
        "--suite", "imb.PingPong,imb.Bcast", "--sizes", "64,1K", "--imb-budget", "7"]


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("seed002") / "run"
    done = subprocess.run([sys.executable, "-m", "shoal", "study", *ARGS, "--out", str(out)],
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    (out / "stderr.txt").write_text(done.stderr)
    return out


def test_the_preset_runs_its_boxes_and_its_blade(seed_run):
    work = pd.read_csv(seed_run / "work.csv")
    boxes = work[work["config"] == "2xstb"]
    assert set(boxes["nodes"]) == {2} and (boxes["ranks"] == boxes["nodes"]).all()  # one rank per box
    blade = work[work["config"] == "reference"]
    assert set(blade["ranks"]) == {8}  # the blade's 8 cores
    assert set(work["workload"]) == {"raytrace", "msa"}


def test_points_planned_as_not_run_are_recorded_with_their_cost(seed_run):
    skipped = pd.read_csv(seed_run / "skipped.csv")
    planned = skipped[skipped["reason"].str.startswith("not run: it would take")]
    assert {(r.test, int(r.size_B), int(r.nodes)) for r in planned.itertuples()} == {
        ("imb.PingPong", 1024, 2)}
    assert all("fixed at" in r and "over the study's 7 s for benchmarks on the docsis-27m plant" in r
               for r in planned["reason"])
    results = pd.read_csv(seed_run / "results.csv")
    measured = {(r.test, int(r.size_B), int(r.nodes)) for r in results.itertuples() if r.config == "2xstb"}
    assert measured == {("imb.PingPong", 64, 2), ("imb.Bcast", 64, 2), ("imb.Bcast", 1024, 2)}


def test_the_study_states_its_planned_time_and_what_it_left_out_before_it_starts(seed_run):
    said = (seed_run / "stderr.txt").read_text()
    # Two workload rounds at 2 boxes (the 8-box round's 350 s, the smallest measured) and the
    # blade's 36 s: 2 x 386 s.
    assert "workloads: 13 min, 2 rounds (the warm-up and 1 counted)" in said
    assert "IMB on the plant: 6 s, 3 points, of its 7 s" in said
    assert "IMB on the reference: 1 s" in said  # the blade's 4 points, 0.35 s each
    # The preset's 8 blades would raise the study's D: one runs, and the study says why.
    assert "shoal study: reference: 1 of the preset's 8 xeon-blade devices: all 8 compute at D = " in said
    assert "left out to fit: 1 IMB point (1 of 4 at 2 boxes; 2 s)" in said


def test_the_report_puts_the_seeds_numbers_beside_shoals(seed_run):
    findings = json.loads((seed_run / "report" / "findings.json").read_text())["run"]
    rows = {(r["quantity"], r["configuration"]): r for r in findings["beside_seed"]}
    results = pd.read_csv(seed_run / "results.csv")

    def median(config, test, size, nodes=None):
        at = results[(results["config"] == config) & (results["test"] == test) & (results["size_B"] == size)]
        if nodes is not None:
            at = at[at["nodes"] == nodes]
        return at["time_median_s"].astype(float).tolist()

    box = rows[("PingPong time, mean of the sizes", "2 boxes (2 ranks)")]
    assert box["seed"] == 0.122 and box["shoal"] == pytest.approx(median("2xstb", "imb.PingPong", 64, 2)[0])
    # Its mean of one size is not the seed's of six: the two stand side by side with no ratio.
    assert box["ratio"] is None and box["launch"] == "head"
    assert "mean of 1 of the 6 sizes (64 B), the seed's of all six: no ratio" in box["source"]
    assert "seed 002 §V" in box["source"]
    blade = rows[("PingPong time, mean of the sizes", "reference: 2 blade ranks")]
    assert blade["seed"] == 0.0009 and blade["shoal"] > 0
    bcast = rows[("Bcast 64 B time, mean of the node counts", "boxes")]
    assert bcast["seed"] == 0.2 and bcast["shoal"] == pytest.approx(
        median("2xstb", "imb.Bcast", 64)[0])
    # The scaled alignment stands for Table I's S300-L200, its times divided by 5^4.
    msa = rows[("msa S60-L40 time", "2 boxes")]
    assert msa["shoal"] > 0 and "the seed's S300-L200 / 625" in msa["source"]
    assert findings["not_run"] and all(r["reason"].startswith("not run") for r in findings["not_run"])
    page = (seed_run / "report" / "report.html").read_text()
    assert "Beside the seed" in page and "0.122 s" in page and "1 point not run" in page
