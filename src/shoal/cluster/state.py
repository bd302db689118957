"""Where emulated clusters are recorded, and how leftovers are removed.

Every object an emulated cluster creates (network namespaces, UTS namespace
files, cgroups) is written to ``<state root>/<id>/state.json`` *before* it is
created, so a crash at any point (``kill -9`` included) leaves a record of
everything that may exist. ``reap()`` removes the objects of records whose
owner process is gone; it touches only what a record names, never anything
found by a name pattern. Veth pairs and the bridge live inside the cluster's
namespaces, so they disappear with them and never appear in the root
namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

from shoal.cluster import sysns

NETNS_DIR = Path("/run/netns")


def root() -> Path:
    return Path(os.environ.get("SHOAL_STATE_DIR", "/run/shoal"))


def cluster_dir(cluster_id: str) -> Path:
    return root() / cluster_id


def write(record: dict) -> None:
    directory = cluster_dir(record["id"])
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / "state.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, directory / "state.json")


def read(cluster_id: str) -> dict | None:
    try:
        return json.loads((cluster_dir(cluster_id) / "state.json").read_text())
    except (OSError, ValueError):
        return None


def records() -> list[dict]:
    base = root()
    if not base.is_dir():
        return []
    found = []
    for entry in sorted(base.iterdir()):
        record = read(entry.name)
        if record is not None:
            found.append(record)
    return found


def owner_alive(record: dict) -> bool:
    pid = record.get("owner_pid")
    return bool(pid) and sysns.process_start_time(pid) == record.get("owner_start")


def is_leftover(record: dict) -> bool:
    """A cluster nobody owns any more: its shoal process died before removing it."""
    return not record.get("persistent") and not owner_alive(record)


def remove(record: dict) -> list[str]:
    """Remove every object the record names; return what was removed (for --verbose)."""
    removed: list[str] = []
    # 1. Stop processes still running inside the cluster (ranks of a crashed run).
    inodes = []
    for name in record.get("netns", []):
        try:
            inodes.append(os.stat(NETNS_DIR / name).st_ino)
        except OSError:
            pass
    victims: set[int] = set()
    for inode in inodes:
        victims.update(sysns.pids_in_netns(inode))
    for group in record.get("cgroups", []):
        try:
            victims.update(int(p) for p in Path(group, "cgroup.procs").read_text().split())
        except OSError:
            pass
    victims.discard(os.getpid())
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # 2. Namespaces: unmounting the last reference destroys them and their links.
    for name in record.get("netns", []):
        path = NETNS_DIR / name
        if sysns.unmount(str(path)):
            removed.append(f"netns {name}")
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    directory = cluster_dir(record["id"])
    for uts in record.get("uts", []):
        sysns.unmount(str(directory / uts))
    # 3. cgroups, deepest first; a killed process may take a moment to leave.
    for group in sorted(record.get("cgroups", []), key=len, reverse=True):
        for _ in range(50):
            try:
                os.rmdir(group)
                removed.append(f"cgroup {group}")
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)
    shutil.rmtree(directory, ignore_errors=True)
    return removed


def reap() -> list[str]:
    """Remove leftovers of clusters whose owner died; return their ids."""
    gone = []
    for record in records():
        if is_leftover(record):
            remove(record)
            gone.append(record["id"])
    return gone
