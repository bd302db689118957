"""Rows printed as JSON: typed cells, strict JSON, NaN and infinities as null with a reason."""

from __future__ import annotations

import json
import math

import numpy as np

from shoal.runs import jsonout
from shoal.runs.store import Run


def test_rows_read_back_from_csv_are_typed(tmp_path):
    run = Run.create("bench", ["shoal"], tmp_path / "r")
    run.append("results", [{"point_id": "local/1/2/imb.PingPong/8", "config": "2", "nodes": 2,
                            "time_median_s": 1.81e-05, "converged": True, "ci_rel": math.nan,
                            "rank_mean_s": json.dumps([1.9e-05, 1.93e-05]), "energy_J": "",
                            "bandwidth_per_W": math.inf}])
    row = jsonout.typed_rows(run.rows("results"))[0]
    text = jsonout.dumps(row)
    back = json.loads(text)
    assert back["nodes"] == 2 and type(back["nodes"]) is int
    assert back["time_median_s"] == 1.81e-05 and back["converged"] is True
    assert back["rank_mean_s"] == [1.9e-05, 1.93e-05] and back["energy_J"] is None
    assert back["config"] == "2" and back["point_id"].startswith("local/")  # names stay text
    assert back["ci_rel"] is None and back["bandwidth_per_W"] is None
    assert set(back["null_reasons"]) == {"ci_rel", "bandwidth_per_W"}
    assert "NaN" not in text and "Infinity" not in text


def test_dumps_never_writes_nan_even_from_numpy():
    text = jsonout.dumps({"a": float("nan"), "b": [np.float32("inf"), np.int64(3)],
                          "c": np.array([1.0, np.nan])})
    assert json.loads(text) == {"a": None, "b": [None, 3], "c": [1.0, None]}

