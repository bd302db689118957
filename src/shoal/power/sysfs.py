"""The one way power code reaches /sys and /proc: configurable roots, strict reads.

``SHOAL_SYSFS_ROOT`` (default ``/sys``) and ``SHOAL_PROC_ROOT`` (default
``/proc``) move every path, so tests and emulated devices point the sources
at trees shaped like the kernel's. A read that fails raises ``SensorError``
with the reason; a failed read is never turned into a zero (a zero would be
taken for a real reading, or for a counter wraparound).

Hot paths keep a file descriptor open and ``pread`` it at offset 0: sysfs
regenerates an attribute on every read at offset 0, so one descriptor serves
a whole run without re-opening the path.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from shoal import environment

#: ``os.open`` by default. Tests replace it to simulate permission errors:
#: they run as root, and root reads files of mode 000 anyway.
opener = os.open


class SensorError(OSError):
    """A sensor file could not be read or did not hold a number."""


def sysfs_root() -> Path:
    return Path(environment.SYSFS_ROOT.get())


def proc_root() -> Path:
    return Path(environment.PROC_ROOT.get())


def read_text(path: Path) -> str:
    """Whole content of a small sysfs/procfs file, stripped."""
    try:
        fd = opener(str(path), os.O_RDONLY)
    except OSError as exc:
        raise SensorError(exc.errno, f"{path}: {exc.strerror}") from exc
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace").strip()
    except OSError as exc:
        raise SensorError(exc.errno, f"{path}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def read_int(path: Path) -> int:
    """A sysfs attribute holding one signed integer (``-12`` parses)."""
    text = read_text(path)
    try:
        return int(text)
    except ValueError:
        raise SensorError(errno.EINVAL, f"{path}: not an integer: {text[:40]!r}") from None


def read_optional_int(path: Path) -> int | None:
    """An attribute that may be absent: None when missing or unreadable."""
    try:
        return read_int(path)
    except SensorError:
        return None


class IntFile:
    """An integer attribute kept open and re-read with pread.

    ``value()`` returns the integer, or raises SensorError; ``close()``
    releases the descriptor.
    """

    __slots__ = ("path", "_fd")

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self._fd = opener(str(self.path), os.O_RDONLY)
        except OSError as exc:
            raise SensorError(exc.errno, f"{self.path}: {exc.strerror}") from exc

    @property
    def fd(self) -> int:
        return self._fd

    def value(self) -> int:
        try:
            raw = os.pread(self._fd, 32, 0)
        except OSError as exc:
            raise SensorError(exc.errno, f"{self.path}: {exc.strerror}") from exc
        try:
            return int(raw)
        except ValueError:
            raise SensorError(errno.EINVAL,
                              f"{self.path}: not an integer: {raw[:40]!r}") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
