"""A meter's own log (CSV with wall-clock timestamps), aligned to the run.

Spec: ``log:FILE[#TIME_COLUMN,POWER_COLUMN]``. Without column names the
header is searched for a time column (``time``, ``timestamp``, ``t_s``,
``datetime``, ...) and a power column (``power_W``, ``power``, ``watts``,
``W``; ``power_mW``/``mW`` are scaled to watts).

Timestamps are Unix seconds (or milliseconds, told apart by size) or ISO
8601 (``2026-11-21T05:30:00.250Z``; without a zone: local time). They are
moved onto the monotonic timeline with ``t_mono = t_wall - offset``, where
``offset`` (wall minus monotonic) is measured when the session starts. The
file is read incrementally, so a log that is still being written is
followed; rows before the session (but the last one) are ignored.

A header without usable columns is an error naming the file. A bad row is a
fault naming the file and line; the row is skipped (a gap) and the run
continues.
"""

from __future__ import annotations

import csv
import datetime as _dt
import math
from pathlib import Path

from shoal.power.base import MEASURED, POWER, Channel, Source, SourceUnavailable

_TIME_NAMES = ("time", "timestamp", "t", "t_s", "time_s", "datetime", "date_time", "epoch",
               "unix_time", "ts")
_POWER_NAMES = {"power_w": 1.0, "power": 1.0, "watts": 1.0, "w": 1.0, "p": 1.0, "power(w)": 1.0,
                "power [w]": 1.0, "active_power": 1.0, "apower": 1.0,
                "power_mw": 1e-3, "mw": 1e-3, "power(mw)": 1e-3, "power [mw]": 1e-3}
#: Unix time below this (1973) means the log holds relative times, which cannot be aligned.
_MIN_EPOCH_S = 1e8


class RowError(ValueError):
    pass


def parse_time(text: str) -> float:
    """Unix seconds from epoch seconds, epoch milliseconds or ISO 8601."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        try:
            stamp = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise RowError(f"time {text[:40]!r} is neither Unix seconds nor ISO 8601") from None
        return stamp.timestamp()
    if not math.isfinite(value):
        raise RowError(f"time {text!r} is not finite")
    if value > 1e11:
        value /= 1000.0  # milliseconds since the epoch
    if value < _MIN_EPOCH_S:
        raise RowError(f"time {text!r} looks relative (seconds since the meter started); "
                       "export absolute Unix or ISO 8601 times")
    return value


class MeterLogSource(Source):
    """Power readings from a CSV log, each with its own timestamp."""

    def __init__(self, path: str, columns: str = "", *, offset_s: float, since_mono: float = -math.inf,
                 node: str = "", domain: str = "wall") -> None:
        self.path = Path(path)
        super().__init__(label=f"log:{self.path.name}", default_period_s=0.5, blocking=True)
        self.offset_s, self.since_mono = offset_s, since_mono
        try:
            self._fh = open(self.path, "r", newline="", encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SourceUnavailable(f"meter log {self.path}: {exc.strerror}; "
                                    "give the CSV file the meter writes") from None
        header_line = self._fh.readline()
        if not header_line.endswith("\n"):
            raise SourceUnavailable(f"meter log {self.path} line 1: no complete header line "
                                    "(expected e.g. 'time,power_W')")
        header = [h.strip() for h in next(csv.reader([header_line]))]
        self._time_col, self._power_col, self._scale = self._pick_columns(header, columns)
        self._lineno = 1
        self._partial = ""
        self._held: tuple[float, list[float]] | None = None
        self.channels.append(Channel(source=self.label, name=header[self._power_col], domain=domain,
                                     kind=MEASURED, quantity=POWER, scale=self._scale, node=node))
        self._last_t = -math.inf

    def _pick_columns(self, header: list[str], columns: str) -> tuple[int, int, float]:
        lowered = [h.lower() for h in header]
        where = f"meter log {self.path} line 1"
        if columns:
            names = [c.strip() for c in columns.split(",")]
            if len(names) != 2:
                raise SourceUnavailable(f"{where}: columns must be TIME,POWER, got {columns!r}")
            missing = [n for n in names if n.lower() not in lowered]
            if missing:
                raise SourceUnavailable(f"{where}: no column {missing[0]!r} (header: {', '.join(header)})")
            t_col, p_col = lowered.index(names[0].lower()), lowered.index(names[1].lower())
            scale = _POWER_NAMES.get(lowered[p_col], 1e-3 if "mw" in lowered[p_col] else 1.0)
            return t_col, p_col, scale
        t_col = next((i for i, h in enumerate(lowered) if h in _TIME_NAMES), None)
        p_col = next((i for i, h in enumerate(lowered) if h in _POWER_NAMES), None)
        if t_col is None or p_col is None:
            what = "time" if t_col is None else "power"
            raise SourceUnavailable(
                f"{where}: no {what} column in header ({', '.join(header)}); "
                f"name them with log:{self.path}#TIME_COLUMN,POWER_COLUMN")
        return t_col, p_col, _POWER_NAMES[lowered[p_col]]

    def _parse_row(self, line: str) -> tuple[float, float]:
        row = next(csv.reader([line]))
        if len(row) <= max(self._time_col, self._power_col):
            raise RowError(f"{len(row)} fields, expected at least {max(self._time_col, self._power_col) + 1}")
        t_wall = parse_time(row[self._time_col])
        text = row[self._power_col].strip()
        try:
            value = float(text)
        except ValueError:
            raise RowError(f"power {text[:40]!r} is not a number") from None
        if not math.isfinite(value):
            raise RowError(f"power {text!r} is not finite")
        return t_wall - self.offset_s, value

    def poll(self) -> list[tuple[float, list[float]]]:
        data = self._partial + self._fh.read()
        lines = data.split("\n")
        self._partial = lines.pop()  # an unfinished last line waits for the next poll
        out: list[tuple[float, list[float]]] = []
        for line in lines:
            self._lineno += 1
            if not line.strip():
                continue
            try:
                t, value = self._parse_row(line.rstrip("\r"))
                if t <= self._last_t:
                    raise RowError("time does not increase")
            except RowError as exc:
                self.fault(self.channels[0].name, f"{self.path} line {self._lineno}: {exc}")
                continue
            self._last_t = t
            reading = (t, [value])
            if t < self.since_mono:
                self._held = reading  # keep the last reading before the session as its left edge
                continue
            if self._held is not None:
                out.append(self._held)
                self._held = None
            out.append(reading)
        return out

    def read(self) -> list[float]:
        raise NotImplementedError("a meter log is polled, not read")

    def close(self) -> None:
        self._fh.close()


