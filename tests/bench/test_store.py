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
