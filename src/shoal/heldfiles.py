"""Files an MPI job keeps outside its own directory, and removing those nobody holds.

An MPI's ranks and daemons make files they remove only when they end cleanly: shared-memory
segments in ``/dev/shm`` (1-2 MB each, kept in RAM) and launcher files in ``/tmp``. A job
that is stopped (Ctrl-C, a point declared hung) or killed leaves them for good: measured
here, every interrupted two-rank run of the default MPI left one 2 MB segment, and a working
host had gathered 2,900 of them (3.7 GB of memory). The MPI's module names the patterns
(``Implementation.leftovers``); this module finds the files of those patterns that no live
process holds (mapped or open, as ``/proc/PID/maps`` and ``/proc/PID/fd`` say) and removes
them: after a job that did not end cleanly (``shoal.proc``), and with ``shoal doctor --fix``
for what a killed shoal left.
"""

from __future__ import annotations

import contextlib
import glob
import os
import time
from collections.abc import Iterable

#: A file younger than this may belong to a job still starting: ``shoal doctor`` leaves it.
#: (A file is held from its creation on, by the descriptor that made it; the margin is for
#: an MPI that would close it before mapping it.)
MIN_AGE_S = 60.0
PROC = "/proc"


def unheld(patterns: Iterable[str], *, min_age_s: float = MIN_AGE_S,
           newer_than: float | None = None) -> list[tuple[str, int]]:
    """This user's files matching ``patterns`` (globs), older than ``min_age_s`` (and
    changed after ``newer_than``, a time.time() stamp) that no live process holds:
    (path, bytes), sorted."""
    now, uid = time.time(), os.geteuid()
    candidates: dict[str, int] = {}
    for pattern in patterns:
        for path in glob.glob(pattern):
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if (st.st_uid == uid and now - st.st_mtime >= min_age_s
                        and (newer_than is None or st.st_mtime >= newer_than)):
                    candidates[path] = st.st_size
    held = held_by_anyone(set(candidates))
    return sorted((p, size) for p, size in candidates.items() if p not in held)


def held_by_anyone(paths: set[str]) -> set[str]:
    """Those of ``paths`` that some live process has mapped or open."""
    held: set[str] = set()
    if not paths:
        return held
    for entry in os.scandir(PROC):
        if entry.name.isdigit():
            held |= _paths_of(entry.name) & paths
            if held == paths:
                break
    return held


def remove(paths: Iterable[str]) -> list[str]:
    """Remove those of ``paths`` that no live process holds (looked at again, just before);
    the ones removed."""
    paths = set(paths)
    gone = []
    for path in sorted(paths - held_by_anyone(paths)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            gone.append(path)
    return gone


def _paths_of(pid: str) -> set[str]:
    """Files process ``pid`` has mapped or open (empty when it is gone or not ours to read)."""
    base = f"{PROC}/{pid}"
    paths: set[str] = set()
    with contextlib.suppress(OSError):
        with open(f"{base}/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/"):
                    paths.add(fields[5].rstrip("\n").removesuffix(" (deleted)"))
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"{base}/fd"):
            with contextlib.suppress(OSError):
                paths.add(os.readlink(f"{base}/fd/{fd}").removesuffix(" (deleted)"))
    return paths
