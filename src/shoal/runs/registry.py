"""Which runs a live shoal process is writing: what a SIGKILL leaves ``running``.

A command that creates or resumes a run enters it here (one small file per
run, naming the run directory and the process that writes it) and leaves
when the run ends. A process killed with SIGKILL, by the OOM killer or by a
crash cannot mark its runs, so their manifests stay ``running``; ``shoal
doctor --fix`` finds the entries whose process is gone and marks those runs
``interrupted``, with why, keeping every finished point (``--resume``
continues them). Entries live beside the emulated clusters' records, under
a name no cluster id can take.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

DIRECTORY = "_runs"  # cluster ids are letters, digits and '-': never this


def _directory() -> Path:
    from shoal import environment

    # Inside the user namespace of an ordinary user's emulation: the host's root.
    host = os.environ.get(environment.USERNS_HOST_STATE.name)
    return Path(host or environment.state_root()) / DIRECTORY


def _owner() -> tuple[int, int | None]:
    """This process on the host: inside a user namespace (a pid namespace of its own),
    the namespace holder that dies with it."""
    from shoal import environment

    held = os.environ.get(environment.USERNS_OWNER.name, "")
    pid, _, start = held.partition(":")
    if pid.isdigit() and start.isdigit():
        return int(pid), int(start)
    return os.getpid(), _start_time(os.getpid())


def _entry(run_path: Path) -> Path:
    key = hashlib.sha1(str(Path(run_path).resolve()).encode()).hexdigest()[:20]
    return _directory() / f"{key}.json"


def _start_time(pid: int) -> int | None:
    from shoal import proc

    info = proc.stat(pid)
    return info.start if info is not None else None


def enter(run_path: Path) -> None:
    """Record that this process writes the run at ``run_path`` (best effort: a run
    whose entry cannot be written is still measured)."""
    try:
        _directory().mkdir(parents=True, exist_ok=True)
        entry = _entry(run_path)
        tmp = entry.with_suffix(".tmp")
        pid, start = _owner()
        tmp.write_text(json.dumps({"path": str(Path(run_path).resolve()), "pid": pid,
                                   "start": start}))
        os.replace(tmp, entry)
    except OSError:
        pass


def leave(run_path: Path) -> None:
    try:
        _entry(run_path).unlink()
    except OSError:
        pass


def orphans() -> list[dict]:
    """Entries whose process is gone (its pid dead or reused)."""
    directory = _directory()
    if not directory.is_dir():
        return []
    found = []
    for entry in sorted(directory.glob("*.json")):
        try:
            data = json.loads(entry.read_text())
            pid, start = int(data["pid"]), data.get("start")
        except (OSError, ValueError, KeyError, TypeError):
            found.append({"entry": str(entry), "path": None})
            continue
        if _start_time(pid) != start or start is None:
            found.append({"entry": str(entry), "path": data.get("path"), "pid": pid})
    return found


def _running_orphans(entries: list[dict]) -> list[tuple[dict, object]]:
    """(entry, its run) for every orphaned entry whose run is still marked ``running``."""
    from shoal.errors import ShoalError
    from shoal.runs.store import Run

    found = []
    for orphan in entries:
        path = orphan.get("path")
        try:
            if path and Path(path, "manifest.json").is_file():
                run = Run(Path(path))
                if run.manifest.get("status") == "running":
                    found.append((orphan, run))
        except (ShoalError, OSError):
            pass  # a damaged run directory: nothing to mark
    return found


def stale() -> list[str]:
    """Runs still marked ``running`` whose process is gone."""
    return [orphan["path"] for orphan, _ in _running_orphans(orphans())]


def reap() -> list[str]:
    """Mark every run whose process is gone ``interrupted`` (if still ``running``), drop
    every orphaned entry; return the runs' paths."""
    from shoal.errors import ShoalError

    entries = orphans()
    marked = []
    for orphan, run in _running_orphans(entries):
        try:
            run.finish("interrupted", reason=(
                f"its shoal process (pid {orphan.get('pid')}) ended without marking it "
                "(SIGKILL, the out-of-memory killer or a crash); every finished point is "
                "kept: --resume continues it"))
            marked.append(orphan["path"])
        except (ShoalError, OSError):
            pass
    for orphan in entries:
        try:
            Path(orphan["entry"]).unlink()
        except OSError:
            pass
    return marked
