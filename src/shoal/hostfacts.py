"""Facts about the machine a run happened on, for the manifest."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def meminfo_bytes(field: str) -> int | None:
    """One field of /proc/meminfo (``MemTotal``, ``MemAvailable``...) in bytes, None if unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def collect() -> dict[str, object]:
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "memory_B": meminfo_bytes("MemTotal"),
        "os": _os_release(),
    }


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()
