"""What a stage read from storage: the bytes a cold start loads, file by file.

On a duty-cycled board nothing is cached at boot: the interpreter, its
libraries and its modules come off the SD card, while userspace
initialisation reads the same card. Here they come from the page cache, so
the stage's own I/O counters say nothing; what it loaded does:

* every mapped file (interpreter, shared libraries, extension modules): the
  pages resident in this process (``Rss`` in /proc/self/smaps), which is what
  a cold start faults in, read-ahead included;
* every Python module it imported: the whole cached (.pyc) or source file,
  which the import system reads with read(2).

Device files and kernel interfaces are left out. Files are summed per
package (``site-packages/numpy``, the standard library) or per file elsewhere
(the interpreter, shared libraries), which keeps the report short; projection
(project.py) charges each group's bytes once per cycle, to the stage that
starts first, and a later stage only what it loads beyond that.
"""

from __future__ import annotations

import os
import sys

_NOT_STORAGE = ("/dev/", "/proc/", "/sys/", "/memfd:", "/run/")


def group(path: str) -> str:
    """The package a file belongs to, or the file itself."""
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages"):
            return "/".join(parts[i:i + 2])
    for i, part in enumerate(parts[:-1]):
        if part.startswith("python3") and i > 0 and parts[i - 1] == "lib":
            return f"{part} standard library"
    return path


def loaded() -> dict[str, int]:
    """Package or file -> bytes this process loaded from it."""
    out: dict[str, int] = {}
    for path, size in files_read().items():
        key = group(path)
        out[key] = out.get(key, 0) + size
    return out


def files_read() -> dict[str, int]:
    """Path -> bytes this process loaded from it."""
    files: dict[str, int] = {}
    try:
        with open("/proc/self/smaps") as fh:
            path = None
            for line in fh:
                head = line.split(None, 1)[0]
                if not head.endswith(":"):   # a mapping's first line: range perms offset dev inode [path]
                    fields = line.split(None, 5)
                    path = fields[5].strip() if len(fields) == 6 and fields[5].startswith("/") else None
                elif head == "Rss:" and path and not path.startswith(_NOT_STORAGE):
                    files[path] = files.get(path, 0) + int(line.split()[1]) * 1024
    except OSError:
        pass   # not Linux, or no /proc: nothing known
    for module in list(sys.modules.values()):
        path = getattr(module, "__cached__", None) or getattr(module, "__file__", None)
        if isinstance(path, str) and path not in files:
            try:
                files[path] = os.stat(path).st_size
            except OSError:
                pass   # a module without a file of its own (zip, frozen, builtin)
    return files
