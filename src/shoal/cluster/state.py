"""Where emulated clusters are recorded, and how leftovers are removed.

Every object an emulated cluster creates (network namespaces, UTS namespace
files, cgroups, the link forwarder process) is written to ``<state root>/<id>/state.json`` *before* it is
created, so a crash at any point (``kill -9`` included) leaves a record of
everything that may exist. ``reap()`` removes the objects of records whose
owner process is gone; it touches only what a record names, never anything
found by a name pattern. Veth pairs, the bridge and the forwarder's TAP
devices live inside the cluster's namespaces, so they disappear with them
(and the TAPs with the forwarder) and never appear in the root namespace.

A cluster made inside a user namespace by root (``SHOAL_USERNS=always``)
keeps its record in the namespace's private ``/run``, which dies with the
command; its cgroups, made in the host's hierarchy, do not. So its record is
also mirrored, naming only those cgroups and the command's process on the
host as owner, into the host's state root (through a directory opened before
``/run`` was covered): the host's ``reap()`` removes them once that process
is gone.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path

from shoal import environment, proc
from shoal.cluster import sysns

NETNS_DIR = Path("/run/netns")


def root() -> Path:
    """Where cluster records live (``environment.state_root``)."""
    return Path(environment.state_root())


def prepare_netns_dir() -> None:
    """Make the directory of namespace files ready: there, and a shared mount of its own
    (``sysns.shared_mount_point``), set up by one process at a time so that two never
    stack their mounts. The lock is the directory itself, which every process on the host
    shares whatever its state root (a mount of the directory onto itself is the same one)."""
    import fcntl

    NETNS_DIR.mkdir(parents=True, exist_ok=True)
    root().mkdir(parents=True, exist_ok=True)
    lock = os.open(NETNS_DIR, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sysns.shared_mount_point(str(NETNS_DIR))
    finally:
        os.close(lock)


def cluster_dir(cluster_id: str) -> Path:
    return root() / cluster_id


# (host state root opened as a directory, owner pid on the host, its start time, the
# process whose child is inside as "pid:start", if not the owner)
_host_mirror: tuple[int, int, int, str | None] | None = None
_host_root: str | None = None  # that root's path, as the host sees it


def mirror_to_host(dir_fd: int, owner_pid: int, owner_start: int, entry: str | None = None,
                   path: str | None = None) -> None:
    """Inside a user namespace: mirror every record's cgroups to the host (see above)."""
    global _host_mirror, _host_root
    _host_mirror = (dir_fd, owner_pid, owner_start, entry)
    _host_root = path


def host_root() -> str | None:
    """Inside a user namespace: the host's state root, where the records' mirrors are."""
    return _host_root


def host_owner() -> tuple[int, int] | None:
    """Inside a user namespace: (pid, start time) of its owner on the host (None: not inside)."""
    return None if _host_mirror is None else (_host_mirror[1], _host_mirror[2])


def write(record: dict) -> None:
    record.setdefault("written_on", this_host())
    directory = cluster_dir(record["id"])
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / "state.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, directory / "state.json")
    if _host_mirror is not None:
        _write_mirror(record)


def _write_mirror(record: dict) -> None:
    fd, owner_pid, owner_start, entry = _host_mirror
    name = record["id"]
    entry_pid, entry_start = (int(v) for v in entry.split(":")) if entry else (owner_pid, owner_start)
    mirror = {"id": name, "owner_pid": owner_pid, "owner_start": owner_start,
              # Whose child is inside (commands enter there); a share of a cluster over hosts.
              "entry_pid": entry_pid, "entry_start": entry_start, "part_of": record.get("part_of"),
              "written_on": record.get("written_on"),
              "persistent": bool(record.get("persistent")), "in_user_namespace": True,
              "created": record.get("created"), "cgroups": record.get("cgroups", []),
              "netns": [], "uts": [], "nodes": {node: {} for node in record.get("nodes", {})},
              "inventory": record.get("inventory", {}), "emulation": record.get("emulation", {})}
    try:
        os.mkdir(name, dir_fd=fd)
    except FileExistsError:
        pass
    out = os.open(f"{name}/state.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=fd)
    with os.fdopen(out, "w") as fh:
        json.dump(mirror, fh, indent=1)
    os.replace(f"{name}/state.json.tmp", f"{name}/state.json", src_dir_fd=fd, dst_dir_fd=fd)


def _remove_mirror(cluster_id: str) -> None:
    fd = _host_mirror[0]
    for entry in ("state.json", "state.json.tmp"):
        try:
            os.unlink(f"{cluster_id}/{entry}", dir_fd=fd)
        except FileNotFoundError:
            pass
    try:
        os.rmdir(cluster_id, dir_fd=fd)
    except OSError:
        pass


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


@functools.lru_cache(maxsize=1)
def _this_host() -> tuple[str, str]:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return socket.gethostname(), boot


def this_host() -> dict:
    """Which host and boot a record is written on: hosts may share a state root (an ordinary
    user's home over NFS, where each host of a cluster over hosts mirrors its share)."""
    host, boot = _this_host()  # read once: every record of a reap asks
    return {"host": host, "boot": boot}


def is_leftover(record: dict) -> bool:
    """A cluster nobody owns any more: its shoal process died before removing it
    (a user namespace's cluster, persistent or not, dies with its owner). Another host's
    record is that host's to judge (its owner's pid means nothing here); one of this host's
    from before a restart is left over."""
    written = record.get("written_on") or {}
    here = this_host()
    if written.get("host", here["host"]) != here["host"]:
        return False
    if written.get("boot", here["boot"]) != here["boot"]:
        return True
    if record.get("in_user_namespace"):
        return not owner_alive(record)
    return not record.get("persistent") and not owner_alive(record)


def remove(record: dict) -> list[str]:
    """Remove every object the record names; return what was removed (for --verbose)."""
    removed: list[str] = []
    # 0. A cluster kept in a user namespace: its holder takes the namespaces with it.
    if record.get("in_user_namespace") and owner_alive(record) and record["owner_pid"] != os.getpid():
        try:
            os.kill(record["owner_pid"], signal.SIGKILL)
            removed.append(f"user namespace of process {record['owner_pid']}")
        except ProcessLookupError:
            pass
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
    forwarder = record.get("forwarder") or {}
    for helper in (forwarder, record.get("cpu_controller") or {}):
        # The link forwarder and the user-space CPU limit, wherever they are in their start-up.
        if helper.get("pid") and sysns.process_start_time(helper["pid"]) == helper.get("start"):
            victims.add(helper["pid"])
    victims.discard(os.getpid())
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if forwarder.get("pid") in victims:
        _collect(forwarder["pid"])
    # 2. Namespaces: unmounting the last reference destroys them and their links.
    for name in record.get("netns", []):
        path = NETNS_DIR / name
        if sysns.unmount(str(path)):
            removed.append(f"netns {name}")
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as err:
            if err.errno != errno.EBUSY:
                raise
            # Still mounted where no path reaches it (under a later mount of the directory
            # itself): the rest is removed, this one file stays until the host restarts.
            print(f"shoal: {path} is still mounted under another mount of {NETNS_DIR} and "
                  f"stays until this host restarts (`findmnt | grep {name}` shows it)",
                  file=sys.stderr)
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
                if _has_groups(group):
                    break  # a level another cluster still uses (shoal's, in a command's own group)
                time.sleep(0.02)
    shutil.rmtree(directory, ignore_errors=True)
    if _host_mirror is not None:
        _remove_mirror(record["id"])
    return removed


def _has_groups(group: str) -> bool:
    try:
        return any(entry.is_dir() for entry in Path(group).iterdir())
    except OSError:
        return False


def _collect(pid: int) -> None:
    """Wait until a killed forwarder is gone: reaped if it is our child, else until the kernel
    has ended it (SIGKILL is delivered asynchronously; an orphan is reaped by init)."""
    for _ in range(400):
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:
            info = proc.stat(pid)
            if info is None or not info.alive:
                return
        time.sleep(0.005)


def reap() -> list[str]:
    """Remove leftovers of clusters whose owner died; return their ids."""
    gone = []
    for record in records():
        if is_leftover(record):
            remove(record)
            gone.append(record["id"])
    return gone
