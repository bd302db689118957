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

A crash in the middle of an append leaves a torn last line (no newline
after it). Like a journal whose last record is incomplete, it is not a
row: readers leave it out and the next append cuts it off first, so every
complete row is kept and only the torn one is measured again.
"""

from __future__ import annotations

import csv
import datetime as _dt
import errno
import io
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any, Iterable

from shoal import __version__, environment, stackfacts
from shoal.errors import ShoalError
from shoal.runs import registry

MANIFEST = "manifest.json"


def runs_root() -> Path:
    return Path(environment.RUNS.get())


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


class Run:
    """A run directory opened for writing or reading."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._columns: dict[str, list[str]] = {}
        self._activity: stackfacts.Activity | None = None

    # -- creating and opening -------------------------------------------------
    @classmethod
    def create(cls, kind: str, command: list[str], out: Path | str | None = None,
               stack: dict[str, Any] | None = None, **manifest: Any) -> "Run":
        """A new run directory. ``stack``: facts of the software stack the caller knows
        (the MPI's build, the native programs' compiler), beside those of the host."""
        if out is None:
            stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
            out = runs_root() / f"{kind}-{stamp}-{secrets.token_hex(2)}"
        path = Path(out)
        try:
            if (path / MANIFEST).exists():
                raise ShoalError(f"{path} already holds a run; use --resume {path} to continue it "
                                 "or choose another --out")
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ShoalError(f"cannot create run directory {path}: {exc.strerror}; "
                             "choose another --out") from None
        run = cls(path)
        _ACTIVE.append(run)
        run.write_manifest({
            "kind": kind,
            "shoal_version": __version__,
            "command": command,
            "python": sys.version.split()[0],
            "started_utc": utc_now(),
            "status": "running",
            "stack": {**stackfacts.collect(), **(stack or {})},
            **manifest,
        })
        run._activity = stackfacts.Activity.start()
        registry.enter(run.path)
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
        except (OSError, ValueError) as exc:  # ValueError: not JSON, or not text at all
            raise ShoalError(f"{self.path / MANIFEST} is unreadable ({exc}); the run directory is "
                             "damaged: restore the file or start a new run") from None

    def write_manifest(self, data: dict[str, Any]) -> None:
        text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
        path, tmp = self.path / MANIFEST, self.path / (MANIFEST + ".tmp")
        try:
            tmp.write_text(text)
            os.replace(tmp, path)
            return
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if exc.errno != errno.ENOSPC or not path.exists():
                raise ShoalError(f"cannot write {path}: {exc.strerror}; the run directory must "
                                 "stay writable (choose another --out)") from None
        # A full disk has no room for a second copy: rewrite the manifest in place, in
        # the blocks the old one holds, so the run can still say how it ended.
        try:
            with open(path, "r+") as fh:
                fh.write(text)
                fh.truncate()
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise ShoalError(f"cannot write {path}: {exc.strerror}; free space on its file "
                             "system") from None

    def update_manifest(self, **fields: Any) -> None:
        data = self.manifest
        data.update(fields)
        self.write_manifest(data)
        if fields.get("status") == "running" and self not in _ACTIVE:
            _ACTIVE.append(self)  # a resumed run
            self._activity = stackfacts.Activity.start()
            registry.enter(self.path)
        elif fields.get("status") not in (None, "running"):
            registry.leave(self.path)

    def finish(self, status: str = "complete", **fields: Any) -> None:
        if self._activity is not None:   # the last stretch measured (since the start or resume)
            fields["stack_during"] = self._activity.stop()
            self._activity = None
        self.update_manifest(status=status, finished_utc=utc_now(), **fields)

    # -- tables ---------------------------------------------------------------
    def table_path(self, table: str) -> Path:
        return self.path / f"{table}.csv"

    def _header(self, table: str) -> list[str] | None:
        if table in self._columns:
            return self._columns[table]
        header = next(csv.reader(io.StringIO(self._complete_text(table))), None)
        if header:
            self._columns[table] = header
            return header
        return None

    def _complete_text(self, table: str) -> str:
        """The table's text up to its last newline: a torn last line is not part of it."""
        path = self.table_path(table)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return ""
        except OSError as exc:
            raise ShoalError(f"cannot read {path}: {exc.strerror}") from None
        try:
            return data[: data.rfind(b"\n") + 1].decode("utf-8")
        except UnicodeDecodeError:
            raise ShoalError(f"{path} is not a shoal table (not text); the run directory is "
                             "damaged: restore the file or measure again with a new --out") from None

    def _cut_torn_line(self, path: Path) -> None:
        """Drop a torn last line (a crash mid-append) so the next row starts on its own line."""
        try:
            with open(path, "rb+") as fh:
                end = fh.seek(0, os.SEEK_END)
                if end == 0:
                    return
                fh.seek(max(0, end - 65536))
                tail = fh.read()
                if tail.endswith(b"\n"):
                    return
                cut = tail.rfind(b"\n")
                if cut < 0 and end > len(tail):
                    raise ShoalError(f"{path} ends in a line longer than 64 KiB; the run directory "
                                     "is damaged")
                fh.truncate(end - len(tail) + cut + 1)
        except FileNotFoundError:
            return

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
        path = self.table_path(table)
        self._cut_torn_line(path)
        header = self._header(table)
        new = header is None
        if new:
            header = list(columns or rows[0].keys())
            self._columns[table] = header
        unknown = set().union(*(r.keys() for r in rows)) - set(header)
        if unknown:
            raise ValueError(f"{table}: columns {sorted(unknown)} not in {path} header")
        size = path.stat().st_size if path.exists() else 0
        try:
            with open(path, "a", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=header, extrasaction="raise")
                if new:
                    writer.writeheader()
                for row in rows:
                    writer.writerow({k: _cell(v) for k, v in row.items()})
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            # Leave no half row behind (a full disk ends most writes mid-line).
            try:
                os.truncate(path, size)
            except OSError:
                pass
            if new:
                self._columns.pop(table, None)
            raise ShoalError(f"cannot write {path}: {exc.strerror}; every row before it is kept: "
                             f"free space (or fix the file system) and continue with --resume "
                             f"{self.path}") from None

    def rewrite(self, table: str, rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
        """Replace a derived table (one computed from the others) as a whole."""
        self.table_path(table).unlink(missing_ok=True)
        self._columns.pop(table, None)
        self.append(table, rows, columns=columns)

    def drop_orphans(self, child: str, parent: str, key: str = "point_id") -> int:
        """Drop the rows of ``child`` whose ``key`` no complete row of ``parent`` has.

        A point's samples are written before its result row: a run stopped
        between the two (or whose result row was torn) measures the point again
        on --resume, and its first samples must not stay beside the new ones.
        The table is replaced at once (a crash leaves the old or the new one).
        Returns how many rows were dropped.
        """
        path = self.table_path(child)
        if not path.exists():
            return 0
        known = {r.get(key) for r in self.rows(parent)}
        rows = self.rows(child)
        kept = [r for r in rows if r.get(key) in known]
        if len(kept) == len(rows) and self._complete_text(child) == path.read_text():
            return 0
        header = self._header(child) or list(rows[0].keys())
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=header)
            writer.writeheader()
            writer.writerows(kept)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        self._columns.pop(child, None)
        return len(rows) - len(kept)

    def rows(self, table: str) -> list[dict[str, str]]:
        """Complete rows of a table (a torn or short row is not one)."""
        text = self._complete_text(table)
        try:
            rows = list(csv.DictReader(io.StringIO(text, newline="")))
        except csv.Error as exc:
            raise ShoalError(f"{self.table_path(table)} is not valid CSV ({exc}); the run "
                             "directory is damaged") from None
        return [r for r in rows if None not in r and None not in r.values()]

    def read(self, table: str):  # -> pandas.DataFrame
        import pandas as pd

        text = self._complete_text(table)
        if not text:
            return pd.DataFrame()
        try:
            return pd.read_csv(io.StringIO(text))
        except (pd.errors.ParserError, ValueError) as exc:
            raise ShoalError(f"{self.table_path(table)} is not valid CSV ({str(exc).strip()}); "
                             "the run directory is damaged") from None


#: Runs this process started or resumed: whatever stops the command ends those still
#: "running" as interrupted or failed (end_active), so no manifest stays "running".
_ACTIVE: list[Run] = []


def end_active(status: str, reason: str) -> None:
    """Mark every run of this process that is still "running" as ``status`` with ``reason``."""
    while _ACTIVE:
        run = _ACTIVE.pop()
        try:
            if run.manifest.get("status") == "running":
                run.finish(status, reason=reason)
        except (ShoalError, OSError):
            pass  # a damaged or vanished run directory has nothing left to mark


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value
