"""Fake kernel trees for power sources, shaped like the real sysfs/procfs.

The class-directory entries are symlinks into /sys/devices, as on a real
machine, and every attribute file holds what the kernel prints (a decimal
integer and a newline, or a word). ``SHOAL_SYSFS_ROOT`` and
``SHOAL_PROC_ROOT`` point the sources at the fake trees.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest


def _write(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")
    return path


class FakeKernel:
    def __init__(self, root: Path) -> None:
        self.sys = root / "sys"
        self.proc = root / "proc"
        self.sys.mkdir()
        self.proc.mkdir()

    # -- powercap --------------------------------------------------------------
    def rapl_zone(self, zone_id: str, name: str, energy_uj: int, max_range_uj: int = 262143328850,
                  prefix: str = "intel-rapl", limits_uw=(15000000, 25000000),
                  max_power_uw: int | None = None) -> Path:
        """A zone such as ``intel-rapl:0`` or subzone ``intel-rapl:0:0``."""
        parts = zone_id.split(":")
        control = self.sys / "devices" / "virtual" / "powercap" / prefix
        if not control.exists():
            _write(control / "enabled", 1)
            _write(control / "uevent", "")
            self._link(prefix, control)
        parent = control
        for depth in range(2, len(parts)):
            parent = parent / ":".join(parts[:depth])
        zone = parent / zone_id
        zone.mkdir(parents=True, exist_ok=True)
        _write(zone / "name", name)
        _write(zone / "energy_uj", energy_uj)
        _write(zone / "max_energy_range_uj", max_range_uj)
        _write(zone / "enabled", 1)
        _write(zone / "uevent", "")
        for i, (label, limit) in enumerate(zip(("long_term", "short_term"), limits_uw)):
            _write(zone / f"constraint_{i}_name", label)
            _write(zone / f"constraint_{i}_power_limit_uw", limit)
            _write(zone / f"constraint_{i}_time_window_us", 27983872 if i == 0 else 2440)
            if max_power_uw is not None:
                _write(zone / f"constraint_{i}_max_power_uw", max_power_uw)
        self._link(zone_id, zone)
        return zone

    def _link(self, name: str, target: Path) -> None:
        link = self.sys / "class" / "powercap" / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(os.path.relpath(target, link.parent))

    # -- hwmon -----------------------------------------------------------------
    def hwmon(self, index: int, name: str, attrs: dict[str, object], device: str = "i2c-1/1-0040") -> Path:
        chip = self.sys / "devices" / "platform" / device / "hwmon" / f"hwmon{index}"
        _write(chip / "name", name)
        _write(chip / "uevent", "")
        for key, value in attrs.items():
            _write(chip / key, value)
        link = self.sys / "class" / "hwmon" / f"hwmon{index}"
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(chip, link.parent))
        return chip

    # -- power_supply ----------------------------------------------------------
    def supply(self, name: str, attrs: dict[str, object]) -> Path:
        dev = self.sys / "devices" / "LNXSYSTM:00" / "PNP0C0A:00" / "power_supply" / name
        for key, value in attrs.items():
            _write(dev / key, value)
        link = self.sys / "class" / "power_supply" / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(dev, link.parent))
        return dev

    # -- procfs ----------------------------------------------------------------
    def proc_stat(self, user=0, nice=0, system=0, idle=0, iowait=0, irq=0, softirq=0, steal=0) -> None:
        line = f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} 0 0"
        _write(self.proc / "stat", f"{line}\ncpu0 {user} {nice} {system} {idle} {iowait} {irq} {softirq} "
                                   f"{steal} 0 0\nintr 0\nctxt 0\nbtime 1700000000\nprocesses 1")

    def net_dev(self, counters: dict[str, tuple[int, int]]) -> None:
        lines = ["Inter-|   Receive                                                |  Transmit",
                 " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets "
                 "errs drop fifo colls carrier compressed"]
        for name, (rx, tx) in counters.items():
            lines.append(f"{name:>6}: {rx} 10 0 0 0 0 0 0 {tx} 10 0 0 0 0 0 0")
        _write(self.proc / "net" / "dev", "\n".join(lines))


@pytest.fixture
def kernel(tmp_path, monkeypatch) -> FakeKernel:
    fake = FakeKernel(tmp_path)
    monkeypatch.setenv("SHOAL_SYSFS_ROOT", str(fake.sys))
    monkeypatch.setenv("SHOAL_PROC_ROOT", str(fake.proc))
    return fake


class LiveCounter:
    """Rewrites a counter file from a thread: ``watts`` of energy accumulating.

    The value is written in place with pwrite at fixed width (leading
    zeros) so a reader holding the file open never sees a half-written
    number; it wraps modulo ``modulus`` like the hardware counter.
    """

    def __init__(self, path: Path, watts: float, modulus: int, unit: float = 1e-6,
                 period_s: float = 0.0005) -> None:
        self.path, self.watts, self.modulus, self.unit, self.period_s = path, watts, modulus, unit, period_s
        self._stop = threading.Event()
        self._fd = os.open(path, os.O_WRONLY)
        self.t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def value_at(self, t: float) -> int:
        return int((t - self.t0) * self.watts / self.unit) % self.modulus

    def _run(self) -> None:
        while not self._stop.is_set():
            os.pwrite(self._fd, f"{self.value_at(time.monotonic()):020d}\n".encode(), 0)
            time.sleep(self.period_s)

    def __enter__(self) -> "LiveCounter":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self._fd)


@pytest.fixture
def live_counter():
    return LiveCounter
