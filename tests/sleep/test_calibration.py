"""`shoal wait calibrate`: made-up sweeps through the arithmetic, the store's keys, what a
launch takes from a calibration, and one real calibration of this host (a short sweep)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shoal import environment
from shoal.cli import main
from shoal.wait import calibrate, calibration, calibration_store, tuning
from shoal.wait.calibration import Calibration, CannotCalibrate
from shoal.wait.modes import parse_mode
from shoal.wait.sleepaccuracy import Sweep


def _sweep(late_s: float, step_s: float = 10e-6, repeats: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """0 .. 1 ms, every sleep ``late_s`` late: the shape of a real sweep's arrays."""
    requested = np.tile(np.arange(0, 1e-3 + step_s / 2, step_s), repeats)
    return requested, requested + late_s


def test_a_host_whose_slack_matters_gets_slack_1_and_its_floor():
    """70 us late at the kernel's slack, 20.5 us at 1 ns (about this VM's figures): slack 1 ns,
    floor 20.5 us, linear from 0 to the first sleep kept within 10 % (210 us: 205 us is no
    step) in steps of the floor."""
    fast = _sweep(20.5e-6)
    fast[1][5] += 30e-3                        # one 30 ms stall at one step moves nothing
    got = calibration.derive({"default": _sweep(70e-6), "1ns": fast})
    assert (got["slack_ns"], got["floor_ns"]) == (1, 20500)
    assert (got["dmin_ns"], got["dmax_ns"], got["dstep_ns"]) == (0, 210000, 20500)
    assert got["floor_default_slack_s"] == pytest.approx(70e-6) and got["measures"] == 2 * 101 * 5


def test_a_slack_of_1_that_buys_nothing_leaves_the_kernels():
    got = calibration.derive({"default": _sweep(60.5e-6), "1ns": _sweep(58e-6)})
    assert (got["slack_ns"], got["floor_ns"], got["dmax_ns"], got["dstep_ns"]) == (0, 60500, 610000, 60500)


def test_a_few_late_steps_above_d_max_do_not_move_it():
    """Kept from 310 us on but for two steps (of 70 from it): d_max stays 310 us."""
    requested, measured = _sweep(30.5e-6)
    for r in (500e-6, 800e-6):
        measured[np.isclose(requested, r)] += 1e-3
    got = calibration.derive({"default": (requested, measured)})
    assert got["dmax_ns"] == 310000 and got["slack_ns"] == 0


def test_a_place_that_cannot_sleep_below_its_floor_keeps_the_defaults_in_one_line():
    """A loaded board at a small quota: every sleep 13 ms late."""
    with pytest.raises(CannotCalibrate) as caught:
        calibration.derive({"default": _sweep(13e-3), "1ns": _sweep(13.4e-3)}, "rpi3bplus1")
    line = str(caught.value)
    assert "rpi3bplus1 cannot sleep below its floor of 13000.0 µs" in line
    assert "defaults are kept" in line and "\n" not in line


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The calibration store in a directory of the test's own, used by launches."""
    path = tmp_path / "wait-calibration.json"
    monkeypatch.setattr(calibration_store, "store_file", lambda: path)
    monkeypatch.delenv(environment.WAIT_CALIBRATION.name, raising=False)
    return path


def _made_up(key: dict, floor_ns: int = 30000) -> Calibration:
    return Calibration(0, 10 * floor_ns, floor_ns, 0, floor_ns, key=key, measured_utc="2026-01-01T00:00:00Z")


def test_the_store_keeps_host_and_device_apart_and_refuses_another_kernel(store):
    host = calibration_store.host_key()
    board = calibration_store.device_key("odroid-xu4", 0.31234)
    calibration_store.store(_made_up(host))
    calibration_store.store(_made_up(board, 500000))
    assert calibration_store.lookup(host)[0].floor_ns == 30000
    assert calibration_store.lookup(board) == (_made_up(board, 500000), "")
    assert calibration_store.lookup(calibration_store.device_key("odroid-xu4", 0.5)) == (None, "")
    calibration_store.forget(board)    # a board that no longer calibrates keeps the defaults
    assert calibration_store.lookup(board) == (None, "") and calibration_store.lookup(host)[0] is not None
    upgraded = {**host, "kernel": "9.9.9-other"}
    found, why = calibration_store.lookup(upgraded)
    assert found is None and "kernel" in why and "9.9.9-other" in why and host["kernel"] in why


def test_a_launch_takes_what_the_user_did_not_set(monkeypatch):
    monkeypatch.delenv(environment.WAIT_SLACK_NS.name, raising=False)
    monkeypatch.delenv(environment.WAIT_FLOOR_NS.name, raising=False)
    cal = _made_up(calibration_store.host_key())
    slack, floor = environment.WAIT_SLACK_NS.name, environment.WAIT_FLOOR_NS.name
    assert tuning.apply(parse_mode("linear"), cal).mode == "linear:0,300000,30000"
    assert tuning.apply(parse_mode("linear"), cal).env == {slack: "0"}
    assert tuning.apply(parse_mode("linear:1,1000,1"), cal).mode == "linear:1,1000,1"
    assert tuning.apply(parse_mode("backoff"), cal).env == {floor: "30000", slack: "0"}
    assert tuning.apply(parse_mode("backoff:50,10000"), cal).env == {slack: "0"}   # its spin is the user's
    assert tuning.apply(parse_mode("auto:0.1"), cal).env == {floor: "30000", slack: "0"}
    assert tuning.apply(parse_mode("sleep:0"), cal, slack_given=True).env == {}
    # The ranks' own environment counts as set (dsm lab's seed003 keeps the kernel's slack so).
    assert tuning.apply(parse_mode("backoff"), cal, given={slack: "0"}).env == {floor: "30000"}
    assert tuning.apply(parse_mode("busy"), cal) == tuning.Tuning("busy")
    monkeypatch.setenv(environment.WAIT_SLACK_NS.name, "1")
    assert tuning.apply(parse_mode("event"), cal).env == {}
    assert tuning.apply(parse_mode("backoff"), None) == tuning.Tuning("backoff")


def test_a_device_calibration_is_found_at_any_dilation_and_passed_as_device_time(store, monkeypatch):
    """A calibration holds host time; libshoalwait on a device at dilation D stretches what it
    is given by D, so a launch there passes the calibration's durations over D."""
    monkeypatch.delenv(environment.WAIT_SLACK_NS.name, raising=False)
    monkeypatch.delenv(environment.WAIT_FLOOR_NS.name, raising=False)
    measured_at = calibration_store.device_key("odroid-xu4", 0.25, dilation=2.0)
    calibration_store.store(_made_up(measured_at, 30000))
    launch = calibration_store.device_key("odroid-xu4", 0.25, dilation=3.0)
    assert calibration_store.lookup(launch)[0].key["dilation"] == 2.0   # the same place
    assert tuning.for_launch(parse_mode("linear"), launch).mode == "linear:0,100000,10000"
    backoff = tuning.for_launch(parse_mode("backoff"), launch)
    assert backoff.env == {environment.WAIT_FLOOR_NS.name: "10000", environment.WAIT_SLACK_NS.name: "0"}
    # Rounded, a step or a floor is never 0 ns (0 would be "none").
    tiny = tuning.in_device_time(_made_up(launch, 1), 3.0)
    assert (tiny.dstep_ns, tiny.floor_ns, tiny.dmax_ns) == (1, 1, 3)


def test_launches_use_the_stored_calibration_unless_switched_off(store, monkeypatch):
    calibration_store.store(_made_up(calibration_store.host_key(), 25000))
    used = tuning.for_launch(parse_mode("linear"))
    assert used.mode == "linear:0,250000,25000" and used.calibration.floor_ns == 25000
    assert "from the calibration of this host" in used.lines()[1]
    monkeypatch.setenv(environment.WAIT_CALIBRATION.name, "off")
    off = tuning.for_launch(parse_mode("linear"))
    assert off.mode == "linear" and off.calibration is None and "off" in off.lines()[0]


# A short sweep keeps the real run under a second: 11 steps x 5 measures per slack.
SHORT = Sweep(1e-3, 100e-6, 5)


def test_calibrate_this_host_then_again_over_another_kernels(store, monkeypatch, capfd):
    monkeypatch.setattr(calibrate, "SWEEP", SHORT)
    assert main(["wait", "calibrate", "--json"]) == 0
    out, err = capfd.readouterr()
    (row,) = json.loads(out)["calibrations"]
    assert row["device"] == "host" and row["status"] == "calibrated" and "measured again" not in err
    stored, _ = calibration_store.lookup(calibration_store.host_key())
    assert stored.linear == row["linear"] and stored.floor_ns == row["floor_ns"] > 0
    assert stored.measures == 2 * 11 * 5 and stored.dstep_ns == stored.floor_ns
    # The same entry, as if measured on another kernel: not used, measured again, one line.
    entries = json.loads(store.read_text())
    (entry,) = entries.values()
    entry["key"]["kernel"] = "4.14.0-odroid"
    store.write_text(json.dumps(entries))
    assert main(["wait", "calibrate"]) == 0
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "4.14.0-odroid" in err and err.rstrip().endswith("measured again")
    assert calibration_store.lookup(calibration_store.host_key())[0].key["kernel"] != "4.14.0-odroid"
