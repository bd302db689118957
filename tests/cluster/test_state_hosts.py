"""Cluster records in a state root that several hosts share (an ordinary user's home over
NFS, where each host of a cluster over hosts mirrors its share): a record is judged left
over only on the host that wrote it, and one written there before a restart is."""

from __future__ import annotations

import json
import os

import pytest

from shoal import environment
from shoal.cluster import state

DEAD = {"owner_pid": 2 ** 22 + 7, "owner_start": 1, "persistent": False}  # no such process


def _write(root, name: str, written_on: dict | None) -> None:
    (root / name).mkdir()
    record = {"id": name, **DEAD, "netns": [], "uts": [], "cgroups": [], "nodes": {}}
    if written_on is not None:
        record["written_on"] = written_on
    (root / name / "state.json").write_text(json.dumps(record))


def test_only_this_hosts_records_of_this_boot_or_before_are_reaped(tmp_path, monkeypatch):
    monkeypatch.setenv(environment.STATE_DIR.name, str(tmp_path))
    here = state.this_host()
    assert here["host"] and here["boot"]
    _write(tmp_path, "mine", here)
    _write(tmp_path, "before", {**here, "boot": "an-earlier-boot"})
    _write(tmp_path, "theirs", {"host": here["host"] + "-other", "boot": "its-boot"})
    _write(tmp_path, "unmarked", None)  # written before records said where
    assert {r["id"]: state.is_leftover(r) for r in state.records()} == {
        "before": True, "mine": True, "theirs": False, "unmarked": True}
    assert sorted(state.reap()) == ["before", "mine", "unmarked"]
    assert [r["id"] for r in state.records()] == ["theirs"]


def test_a_record_says_where_it_was_written(tmp_path, monkeypatch):
    monkeypatch.setenv(environment.STATE_DIR.name, str(tmp_path))
    state.write({"id": "c1", "owner_pid": os.getpid()})
    assert state.read("c1")["written_on"] == state.this_host()


@pytest.mark.parametrize("runtime, usable", [("missing", False), ("there", True)])
def test_an_ordinary_users_runtime_directory_is_used_only_where_it_exists(tmp_path, monkeypatch, runtime, usable):
    if os.geteuid() == 0:
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.delenv(environment.STATE_DIR.name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "there").mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / runtime))
    expected = tmp_path / runtime / "shoal" if usable else tmp_path / "home" / ".cache" / "shoal" / "clusters"
    assert environment.state_root() == str(expected)
