"""A temporary directory of this shoal process's own, for the MPI jobs it starts here.

An MPI's launcher keeps its session files under ``TMPDIR`` in a directory named after its
own pid, and a job that is killed leaves it. In a ``/tmp`` that every user shares, a later
launcher of another user whose pid happens to match finds that directory, cannot write
it, and the job fails (seen: a root job killed with SIGKILL, then an ordinary user's run).
Each shoal process gives its jobs ``<tmp>/shoal-<uid>/<pid>``, removes it when it exits,
and removes the directories of shoal processes that are gone when it makes its own.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile

from shoal import proc

_made: dict[int, str] = {}  # pid -> the directory made for it (a forked child makes its own)


def directory() -> str:
    """This process's directory for its MPI jobs' temporary files (made on first use)."""
    pid = os.getpid()
    if pid not in _made:
        _made[pid] = _make(pid)
        atexit.register(_remove, pid)
    return _made[pid]


# The host's PID namespace (PROC_PID_INIT_INO): its processes share one base directory.
_INIT_PID_NAMESPACE = 0xEFFFFFFC


def _namespace_suffix() -> str:
    """"" in the host's PID namespace, else one naming this one: a process in another (an
    ordinary user's cluster, whose root may be the host's uid 0) sees none of the host's
    processes, and would take their directories for those of processes that are gone."""
    try:
        inode = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return "" if inode == _INIT_PID_NAMESPACE else f"-pidns{inode}"


def _make(pid: int) -> str:
    base = os.path.join(tempfile.gettempdir(), f"shoal-{os.geteuid()}{_namespace_suffix()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(base, 0o700)
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        # Someone else's (or a link): a private directory of its own instead.
        return tempfile.mkdtemp(prefix=f"shoal-{os.geteuid()}-{pid}-")
    _reap(base)
    path = os.path.join(base, str(pid))
    os.makedirs(path, 0o700, exist_ok=True)
    return path


def _reap(base: str) -> None:
    """Remove the directories of processes that are gone (or only zombies)."""
    for entry in os.scandir(base):
        if entry.name.isdigit():
            info = proc.stat(entry.name)
            if info is None or not info.alive:
                shutil.rmtree(entry.path, ignore_errors=True)


def _remove(pid: int) -> None:
    if os.getpid() == pid and pid in _made:
        shutil.rmtree(_made.pop(pid), ignore_errors=True)
