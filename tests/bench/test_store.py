import json

import pandas as pd
import pytest

from shoal.errors import ShoalError
from shoal.runs.store import Run


def test_create_writes_manifest_and_refuses_to_overwrite(tmp_path):
    run = Run.create("bench", ["shoal", "bench"], tmp_path / "r", mpi={"name": "X"})
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["kind"] == "bench" and manifest["status"] == "running"
    assert manifest["mpi"] == {"name": "X"} and "started_utc" in manifest
    with pytest.raises(ShoalError, match="--resume"):
        Run.create("bench", [], tmp_path / "r")
    run.finish("complete")
    assert Run.open(tmp_path / "r").manifest["status"] == "complete"


def test_append_keeps_header_and_pandas_reads_it(tmp_path):
    run = Run.create("bench", [], tmp_path / "r")
    run.append("results", [{"a_s": 1.5, "ok": True, "lst": [1, 2]}], columns=["a_s", "ok", "lst", "x"])
    run.append("results", [{"a_s": 2.0, "x": "y"}])
    frame = pd.read_csv(tmp_path / "r" / "results.csv")
    assert list(frame.columns) == ["a_s", "ok", "lst", "x"]
    assert frame["a_s"].tolist() == [1.5, 2.0]
    assert json.loads(frame["lst"][0]) == [1, 2]
    with pytest.raises(ValueError):
        run.append("results", [{"unknown": 1}])


def test_reopened_run_appends_under_existing_header(tmp_path):
    Run.create("bench", [], tmp_path / "r").append("t", [{"b": 1, "a": 2}])
    again = Run.open(tmp_path / "r")
    again.append("t", [{"a": 3, "b": 4}])
    assert again.rows("t") == [{"b": "1", "a": "2"}, {"b": "4", "a": "3"}]


def test_open_rejects_non_run_directory(tmp_path):
    with pytest.raises(ShoalError, match="not a shoal run"):
        Run.open(tmp_path)


def test_rewrite_replaces_a_derived_table(tmp_path):
    run = Run.create("bench", [], tmp_path / "r")
    run.rewrite("derived", [{"a": 1}], columns=["a"])
    run.rewrite("derived", [{"b": 2}, {"b": 3}], columns=["b"])
    assert run.rows("derived") == [{"b": "2"}, {"b": "3"}]


def test_a_torn_last_row_is_not_a_row_and_the_next_append_cuts_it(tmp_path):
    run = Run.create("bench", ["shoal"], tmp_path / "r")
    run.append("results", [{"point_id": f"p{i}", "time_s": i / 10} for i in range(3)])
    path = run.table_path("results")
    path.write_bytes(path.read_bytes()[:-3])  # a crash mid-row: "p2,0." without its newline
    fresh = Run(run.path)
    assert [r["point_id"] for r in fresh.rows("results")] == ["p0", "p1"]
    assert list(fresh.read("results")["point_id"]) == ["p0", "p1"]
    fresh.append("results", [{"point_id": "p2", "time_s": 0.2}])
    assert path.read_text().splitlines() == ["point_id,time_s", "p0,0.0", "p1,0.1", "p2,0.2"]


def test_a_table_that_is_not_text_is_one_error(tmp_path):
    run = Run.create("bench", ["shoal"], tmp_path / "r")
    run.table_path("results").write_bytes(b"point_id\n\xff\xfe\x00garbage\n")
    with pytest.raises(ShoalError, match="not a shoal table"):
        run.rows("results")
