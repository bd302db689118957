"""Linux namespace and mount primitives shoal needs, via libc (stdlib only).

Kept free of shoal imports beyond the standard library: the launcher helper
imports it on every rank start, so it must load fast.
"""

from __future__ import annotations

import ctypes
import errno
import os
from contextlib import contextmanager

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_SHARED = 1 << 20
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                        ctypes.c_ulong, ctypes.c_void_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def setns(path: str, nstype: int) -> None:
    """Move the calling thread into the namespace bound at ``path``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, nstype), f"setns {path}")
    finally:
        os.close(fd)


def setns_fd(fd: int, nstype: int) -> None:
    """Move the calling thread into the namespace open at ``fd``."""
    _check(_libc.setns(fd, nstype), f"setns {nstype:#x}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def bind_mount(source: str, target: str) -> None:
    _check(_libc.mount(source.encode(), target.encode(), None, MS_BIND, None),
           f"bind mount {source} on {target}")


def shared_mount_point(target: str) -> None:
    """Make ``target`` a shared mount of its own, as ``ip netns`` makes /run/netns.

    Done before any namespace file is bound in it: else the first ``ip netns add`` of a
    boot binds the directory onto itself with copies of the files already there, and the
    originals, hidden under that mount, keep their namespaces and their files for good.
    """
    if _libc.mount(b"", target.encode(), b"none", MS_SHARED | MS_REC, None) == 0:
        return
    err = ctypes.get_errno()
    if err != errno.EINVAL:  # EINVAL: not a mount point yet
        raise OSError(err, f"make {target} shared: {os.strerror(err)}")
    bind_mount(target, target)
    _check(_libc.mount(b"", target.encode(), b"none", MS_SHARED | MS_REC, None),
           f"make {target} shared")


def mount_tmpfs(target: str, options: str = "mode=0755") -> None:
    """A fresh tmpfs on ``target`` (in this mount namespace)."""
    _check(_libc.mount(b"shoal-run", target.encode(), b"tmpfs", 0, options.encode()),
           f"mount tmpfs on {target}")


def make_private(target: str = "/") -> None:
    """Stop mounts made from now on from propagating back to the parent namespace."""
    _check(_libc.mount(None, target.encode(), None, MS_REC | MS_PRIVATE, None),
           f"make {target} private")


def unmount(target: str) -> bool:
    """Lazily unmount everything mounted at ``target``; False if nothing was.

    Mounts can be stacked there: the first ``ip netns add`` of a boot turns /run/netns
    into a mount of itself with copies of the namespace files already bound in it, so a
    cluster that was up by then has each file mounted twice, and the file cannot be
    removed until both are gone.
    """
    count = 0
    while count < 64 and _libc.umount2(target.encode(), MNT_DETACH) == 0:
        count += 1
    return count > 0


@contextmanager
def in_netns(path: str):
    """Run the block with this thread inside a network namespace, then come back.

    Sockets created inside (netlink included) stay bound to that namespace,
    which is how shoal configures many namespaces from one process.
    """
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns(path, CLONE_NEWNET)
        try:
            yield
        finally:
            _check(_libc.setns(own, CLONE_NEWNET), "setns back to own namespace")
    finally:
        os.close(own)


def process_start_time(pid: int) -> int | None:
    """Kernel start time of a process (clock ticks), to tell a live owner from a reused pid."""
    from shoal import proc

    info = proc.stat(pid)
    return info.start if info is not None else None


def first_child(pid: int | str) -> str | None:
    """The first child of ``pid`` (a user namespace's holder: its child is the one inside),
    None when it has none or is gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return fh.read().split()[0]
    except (OSError, IndexError):
        return None


def pids_in_netns(inode: int) -> list[int]:
    """Processes whose network namespace is the one with this inode."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino == inode:
                    found.append(int(entry))
            except OSError:
                continue
    return found
