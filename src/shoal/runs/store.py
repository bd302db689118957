"""Run directories: a manifest, tidy tables appended as points finish.

Layout of one run (see docs/runs.md for every column)::

    runs/<kind>-<UTC time>-<id>/
        manifest.json      what ran, where, with which MPI, when, and its status
        results.csv        one row per measured point
        samples.csv        one row per repetition of a point (raw times)
        power.csv          power samples, when power was measured
        *.png, *.svg, ...  rendered figures and reports

Rows are appended and flushed as soon as a point finishes, so an
interrupted run keeps everything it finished and ``--resume`` continues it.
All tables are plain CSV with a header: ``pandas.read_csv`` reads them.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any, Iterable

from shoal import __version__
from shoal.errors import ShoalError

MANIFEST = "manifest.json"


def runs_root() -> Path:
    return Path(os.environ.get("SHOAL_RUNS", "runs"))


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


class Run:
    """A run directory opened for writing or reading."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._columns: dict[str, list[str]] = {}

    # -- creating and opening -------------------------------------------------
    @classmethod
    def create(cls, kind: str, command: list[str], out: Path | str | None = None,
               **manifest: Any) -> "Run":
        if out is None:
            stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
            out = runs_root() / f"{kind}-{stamp}-{secrets.token_hex(2)}"
        path = Path(out)
        if (path / MANIFEST).exists():
            raise ShoalError(f"{path} already holds a run; use --resume {path} to continue it "
                             "or choose another --out")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ShoalError(f"cannot create run directory {path}: {exc.strerror}") from exc
        run = cls(path)
        run.write_manifest({
            "kind": kind,
            "shoal_version": __version__,
            "command": command,
            "python": sys.version.split()[0],
            "started_utc": utc_now(),
            "status": "running",
            **manifest,
        })
        return run

    @classmethod
    def open(cls, path: Path | str) -> "Run":
        path = Path(path)
        if not (path / MANIFEST).is_file():
            raise ShoalError(f"{path} is not a shoal run directory (no {MANIFEST}); "
                             "give a directory made by a shoal command")
        return cls(path)

    # -- manifest --------------------------------------------------------------
    @property
    def manifest(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / MANIFEST).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ShoalError(f"{self.path / MANIFEST} is unreadable ({exc}); "
                             "the run directory is damaged") from exc

    def write_manifest(self, data: dict[str, Any]) -> None:
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
        os.replace(tmp, self.path / MANIFEST)

    def update_manifest(self, **fields: Any) -> None:
        data = self.manifest
        data.update(fields)
        self.write_manifest(data)

    def finish(self, status: str = "complete", **fields: Any) -> None:
        self.update_manifest(status=status, finished_utc=utc_now(), **fields)

    # -- tables ---------------------------------------------------------------
    def table_path(self, table: str) -> Path:
        return self.path / f"{table}.csv"

    def _header(self, table: str) -> list[str] | None:
        if table in self._columns:
            return self._columns[table]
        path = self.table_path(table)
        if path.exists() and path.stat().st_size > 0:
            with open(path, newline="") as fh:
                header = next(csv.reader(fh), None)
            if header:
                self._columns[table] = header
                return header
        return None

    def append(self, table: str, rows: Iterable[dict[str, Any]],
               columns: list[str] | None = None) -> None:
        """Append rows to a table; the first write fixes its columns.

        ``columns`` names the columns (in order) when the table is new;
        otherwise the first row's keys are used. Keys a later row lacks are
        left empty; keys the header lacks are a programming error.
        """
        rows = list(rows)
        if not rows:
            return
        header = self._header(table)
        path = self.table_path(table)
        new = header is None
        if new:
            header = list(columns or rows[0].keys())
            self._columns[table] = header
        unknown = set().union(*(r.keys() for r in rows)) - set(header)
        if unknown:
            raise ValueError(f"{table}: columns {sorted(unknown)} not in {path} header")
        with open(path, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=header, extrasaction="raise")
            if new:
                writer.writeheader()
            for row in rows:
                writer.writerow({k: _cell(v) for k, v in row.items()})
            fh.flush()
            os.fsync(fh.fileno())

    def rewrite(self, table: str, rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
        """Replace a derived table (one computed from the others) as a whole."""
        self.table_path(table).unlink(missing_ok=True)
        self._columns.pop(table, None)
        self.append(table, rows, columns=columns)

    def rows(self, table: str) -> list[dict[str, str]]:
        path = self.table_path(table)
        if not path.exists():
            return []
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))

    def read(self, table: str):  # -> pandas.DataFrame
        import pandas as pd

        path = self.table_path(table)
        if not path.exists():
            return pd.DataFrame()
        return pd.read_csv(path)


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value
