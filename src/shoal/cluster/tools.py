"""System tools the cluster layer runs, found by absolute path.

Ordinary users on Debian have no ``/usr/sbin`` in ``PATH``, where ``tc`` and
``ip`` live; ``PATH`` may also hold directories a user cannot read. So a tool
is looked up in ``PATH`` (skipping what cannot be read) and then in the
standard system directories, and its absolute path is what shoal runs; when
it is nowhere, the error names the package that provides it.
"""

from __future__ import annotations

import os

from shoal.errors import ShoalError

SYSTEM_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
PACKAGES = {"tc": "iproute2", "ip": "iproute2", "unshare": "util-linux", "nsenter": "util-linux",
            "systemd-run": "systemd", "systemctl": "systemd"}


def find(name: str) -> str | None:
    """Absolute path of an executable ``name``, or None."""
    for directory in [*os.environ.get("PATH", "").split(os.pathsep), *SYSTEM_DIRS]:
        if not directory:
            continue
        candidate = os.path.join(directory, name)
        try:
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        except OSError:  # an entry this user may not look into
            continue
    return None


def need(name: str) -> str:
    """Absolute path of ``name``; ShoalError naming its package when it is missing."""
    found = find(name)
    if found is None:
        package = PACKAGES.get(name, name)
        raise ShoalError(f"'{name}' not found in PATH or {', '.join(SYSTEM_DIRS)}; "
                         f"install {package} (Debian: apt-get install {package})")
    return found
