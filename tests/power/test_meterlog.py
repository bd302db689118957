"""Meter log files: alignment by wall clock, growing files, malformed rows."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from shoal.errors import ShoalError
from shoal.power import open_session, spec
from shoal.power.meterlog import MeterLogSource, parse_time


def _iso(unix: float) -> str:
    return dt.datetime.fromtimestamp(unix, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_time_formats():
    assert parse_time("1763700000.25") == 1763700000.25
    assert parse_time("1763700000250") == 1763700000.25  # milliseconds
    assert parse_time("2025-11-21T04:40:00.250Z") == pytest.approx(1763700000.25)
    with pytest.raises(ValueError, match="looks relative"):
        parse_time("12.5")
    with pytest.raises(ValueError, match="neither Unix seconds nor ISO 8601"):
        parse_time("yesterday")


def test_log_is_aligned_to_the_monotonic_timeline(tmp_path):
    # a bench meter logged 1 Hz readings in wall-clock time: 4 W then 8 W
    log = tmp_path / "meter.csv"
    mono_now, wall_now = time.monotonic(), time.time()
    offset = wall_now - mono_now
    rows = [(wall_now - 10 + k, 4.0 if k < 5 else 8.0) for k in range(11)]
    log.write_text("Timestamp,Power(W),Voltage(V)\n" +
                   "".join(f"{_iso(t)},{p},230.1\n" for t, p in rows))
    source = MeterLogSource(str(log), offset_s=offset)
    readings = source.poll()
    assert len(readings) == 11
    assert readings[0][0] == pytest.approx(mono_now - 10, abs=2e-3)
    assert [r[1][0] for r in readings[:6]] == [4.0] * 5 + [8.0]


def test_session_follows_a_growing_log_and_integrates_it(tmp_path):
    log = tmp_path / "meter.csv"
    log.write_text("time_s,power_mW\n")
    session = open_session(f"log:{log}", rate_hz=10, node="bench")
    session.start()
    start = time.time()
    with open(log, "a") as fh:
        for k in range(12):
            fh.write(f"{start + 0.1 * k:.3f},2500\n")
            fh.flush()
            time.sleep(0.1)
        fh.write(f"{start + 1.2:.3f},25")  # half a line: waits for its end
    time.sleep(0.6)
    session.stop()
    mono0 = start - session.wall_minus_mono
    (result,) = session.energy_between(mono0 + 0.01, mono0 + 1.05, wait=False)
    assert result["energy_J"] == pytest.approx(2.5 * 1.04, rel=1e-3)  # mW column scaled to W
    assert result["coverage"] == pytest.approx(1.0) and not result["partial"]
    assert session.faults() == []


def test_malformed_rows_name_file_and_line_and_are_skipped(tmp_path):
    log = tmp_path / "bench.csv"
    now = time.time()
    log.write_text(f"time,power_W\n{now - 3},5\n{now - 2},five\n{now - 1}\n{now - 3.5},5\n{now},5\n")
    source = MeterLogSource(str(log), offset_s=time.time() - time.monotonic())
    assert len(source.poll()) == 2
    messages = source.faults["power_W"]
    assert messages[0] == f"{log} line 3: power 'five' is not a number"
    assert messages[1] == f"{log} line 4: 1 fields, expected at least 2"
    assert messages[2] == f"{log} line 5: time does not increase"


def test_bad_header_is_one_line_naming_the_file(tmp_path):
    log = tmp_path / "export.csv"
    log.write_text("when,volts\n1,2\n")
    with pytest.raises(ShoalError, match=r"export.csv line 1: no time column .*#TIME_COLUMN,POWER_COLUMN"):
        spec.build(spec.parse(f"log:{log}"))
    source, _ = spec.build(spec.parse(f"log:{log}#when,volts"))
    assert source[0].channels[0].name == "volts"
    with pytest.raises(ShoalError, match="no column 'watts'"):
        spec.build(spec.parse(f"log:{log}#when,watts"))
    with pytest.raises(ShoalError, match="No such file"):
        spec.build(spec.parse(f"log:{tmp_path / 'missing.csv'}"))
