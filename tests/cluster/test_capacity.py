"""More emulated devices than the host's limits allow are refused before any is made."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from shoal.cluster import capacity


def _with_open_files(limit: int):
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    return lower


def test_open_file_limit_refuses_before_any_device_is_made(tmp_path):
    # 1024 descriptors hold (1024 - 64) / 8 = 120 devices' launcher pipes and sockets.
    state = tmp_path / "state"
    for argv in (["bench", "--emulate", "121xstb", "--tests", "imb.Bcast", "--sizes", "64",
                  "--out", str(tmp_path / "run")],
                 ["cluster", "up", "--emulate", "121xstb", "--name", "toomany"]):
        done = subprocess.run([sys.executable, "-m", "shoal", *argv], capture_output=True, text=True,
                              timeout=120, preexec_fn=_with_open_files(1024),
                              env={**os.environ, "SHOAL_STATE_DIR": str(state)})
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, done.stderr
        assert len(lines) == 1 and "121 emulated devices do not fit this host: at most 120" in lines[0]
        assert "ulimit -n 1024" in lines[0]
        assert not (tmp_path / "run").exists()
        assert not state.exists() or not any(state.iterdir())


def test_every_limit_names_itself_and_the_tightest_decides(monkeypatch):
    found = capacity.limits()
    assert any(what.startswith("memory:") for what, _ in found)
    assert any("ulimit -n" in what for what, _ in found)
    tightest = min(allowed for _, allowed in found)
    # Free memory moves between two readings while other work runs: decide on this one.
    monkeypatch.setattr(capacity, "limits", lambda ranks_per_device=1: found)
    capacity.check(tightest)  # fits
    try:
        capacity.check(tightest + 1)
    except Exception as exc:  # noqa: BLE001 - the refusal is a ShoalError naming the limit
        assert f"at most {tightest}" in str(exc)
    else:
        raise AssertionError("one device more than the tightest limit was accepted")
