"""`shoal study --freqs` end to end: one emulated board of benchmarks/clockboard.toml studied at
two clocks, each a whole study with its devices held at that P-state, and the sweep's answer
written beside them. What the P-states fix is asserted (the clock each study ran at, the watts
its modelled power stays within), never which clock a measured time favours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

CLOCKBOARD = Path(__file__).resolve().parents[2] / "benchmarks" / "clockboard.toml"
# The made-up board's two outer states: (as the clock is written, idle W, busy W).
STATES = {1e9: ("1G", 1.0, 2.0), 2e9: ("2G", 1.0, 6.0)}


def test_a_sweep_runs_a_study_per_clock_and_names_the_best_pair(tmp_path):
    out = tmp_path / "sweep"
    done = subprocess.run([sys.executable, "-m", "shoal", "study", "--emulate", "1xclockboard", "--freqs", "1G,2G",
                           "--reference", "none", "--suite", "none", "--workloads", "ep", "--work-size", "ep=M17",
                           "--work-reps", "1", "--power", "model", "--out", str(out)],
                          env={**os.environ, "SHOAL_PROFILES": str(CLOCKBOARD)}, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    sweep = json.loads((out / "freq_sweep.json").read_text())
    assert sweep["clocks_Hz"] == [2e9, 1e9] and sweep["nodes"] == [1]
    assert sweep["baseline"] == {"nodes": 1, "clock_Hz": 2e9}
    rows = {r["clock_Hz"]: r for r in sweep["pairs"]}
    assert rows[2e9]["perf_per_W_rel"] == pytest.approx(1.0)  # the baseline against itself
    assert rows[1e9]["perf_per_W_rel"] > 0
    assert sweep["best"] in [{"nodes": 1, "clock_Hz": hz} for hz in STATES]
    assert sweep["best"] in sweep["tied"]  # a pair ties with itself
    assert all(row["tied_with_best"] == ({"nodes": 1, "clock_Hz": hz} in sweep["tied"]) for hz, row in rows.items())
    # One node count: no scaling fit, so no model pair, and the sweep says why.
    assert sweep["model"]["best"] is None and "3 node counts" in sweep["model"]["reason"]
    assert len(pd.read_csv(out / "freq_sweep.csv")) == 2
    for hz, (clock, idle_W, busy_W) in STATES.items():
        run = Path(sweep["runs"][str(hz)])
        assert run.parent == out and run.name == f"f{hz / 1e6:.0f}mhz"
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        assert manifest["study"]["emulate"] == f"1xclockboard@{clock}"
        work = pd.read_csv(run / "work.csv")
        devices = work[work["config"] != "reference"]
        assert set(devices["workload"]) == {"ep"} and len(devices) >= 1
        # The state's watts bound the board's modelled power at that clock (the switch's beside it).
        board_W = devices["power_mean_W"] - devices["shared_power_W"]
        assert ((board_W >= idle_W - 1e-9) & (board_W <= busy_W + 1e-9)).all(), board_W.tolist()
        assert (run / "report" / "report.html").exists()
