"""A stored calibration reaches the ranks: libshoalwait reports the parameters it read, and
`shoal run` shows them with the calibration they came from."""

from __future__ import annotations

import json

from shoal import environment
from shoal.cli import main
from shoal.wait import calibration_store, telemetry
from shoal.wait.calibration import Calibration
from tests.wait.helpers import waittest


def _stored(tmp_path, monkeypatch) -> Calibration:
    path = tmp_path / "wait-calibration.json"
    monkeypatch.setattr(calibration_store, "store_file", lambda: path)
    monkeypatch.delenv(environment.WAIT_CALIBRATION.name, raising=False)
    cal = Calibration(0, 300000, 30000, 0, 30000, key=calibration_store.host_key(),
                      measured_utc="2026-01-01T00:00:00Z")
    calibration_store.store(cal)
    return cal


def _run(mpi, mode: str, tel, capfd) -> tuple[dict, list[dict]]:
    code = main(["run", "--wait", mode, "--mpi", mpi.kind, "-n", "2", "--telemetry", str(tel), "--json",
                 "--", str(waittest(mpi)), "idle", "--seconds", "0.2"])
    out = capfd.readouterr().out
    assert code == 0
    summary = json.loads([ln for ln in out.splitlines() if ln.startswith('{"mode"')][-1])
    return summary, telemetry.read_dir(tel)


def test_linear_and_backoff_run_the_calibrated_parameters(mpich, tmp_path, monkeypatch, capfd):
    cal = _stored(tmp_path, monkeypatch)
    summary, ranks = _run(mpich, "linear", tmp_path / "linear", capfd)
    assert summary["wait_parameters"]["mode"] == "linear:0,300000,30000"
    assert summary["wait_parameters"]["calibration"] == cal.label()
    receiver = ranks[1]
    assert receiver["linear_ns"] == [0, 300000, 30000] and receiver["timer_slack_requested_ns"] == 0
    assert receiver["calls"]["MPI_Recv"]["sleeps"] > 0
    summary, ranks = _run(mpich, "backoff", tmp_path / "backoff", capfd)
    assert summary["wait_parameters"]["set"] == {environment.WAIT_FLOOR_NS.name: "30000",
                                                 environment.WAIT_SLACK_NS.name: "0"}
    # The library read the floor: it spins until 1/8 of the time waited covers it.
    assert [(r["floor_ns"], r["spin_ns"]) for r in ranks] == [(30000, 240000)] * 2
