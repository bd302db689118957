"""Host-slack monitor: did the host give the emulated devices the CPU their profiles promise?

Sampled about twice a second while an emulated cluster measures (as
Mininet-HiFi monitors its emulations' fidelity): the host's CPU times from
``/proc/stat`` (idle, steal), its run queue (``procs_running``), its CPU
pressure (``/proc/pressure/cpu``, "some" total), and per device its cgroup's
CPU time and throttled time (``cpu.stat``, ``cpuacct.usage`` or v2
``usage_usec``).

A device that uses its whole quota is throttled by design; that is the
emulation working. On this kernel CPU pressure counts that throttled time
too (3 s at a 20 % quota: 2.390 s pressure, 2.389 s throttled), so the
contention the host adds is pressure minus throttled time. A stretch of
time is flagged when the host's contention exceeds 2 % of it, steal
exceeds 2 %, or more tasks wait to run than the host has CPUs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CONTENTION_LIMIT = 0.02
STEAL_LIMIT = 0.02
INTERVAL_S = 0.5


@dataclass
class Sample:
    t_mono_s: float
    busy_ticks: int
    idle_ticks: int
    steal_ticks: int
    procs_running: int
    pressure_some_s: float | None
    # per device: (CPU time s, throttled time s)
    devices: dict[str, tuple[float, float]] = field(default_factory=dict)


def read_host(proc: Path = Path("/proc")) -> tuple[int, int, int, int, float | None]:
    """(busy, idle, steal ticks, procs_running, CPU pressure "some" total in s or None)."""
    busy = idle = steal = running = 0
    for line in (proc / "stat").read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:]]
            # user nice system idle iowait irq softirq steal [guest guest_nice]
            idle = values[3] + values[4]
            steal = values[7] if len(values) > 7 else 0
            busy = sum(values[:8]) - idle - steal
        elif fields and fields[0] == "procs_running":
            running = int(fields[1])
    pressure = None
    try:
        for line in (proc / "pressure" / "cpu").read_text().splitlines():
            if line.startswith("some "):
                pressure = int(line.rsplit("total=", 1)[1]) / 1e6
    except (OSError, ValueError, IndexError):
        pass
    return busy, idle, steal, running, pressure


def read_group(paths: list[str]) -> tuple[float, float]:
    """(CPU time s, throttled time s) of a device from its cgroups (v1 or v2)."""
    usage = throttled = 0.0
    for path in paths:
        group = Path(path)
        try:
            stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines()
                        if len(line.split()) == 2)
        except OSError:
            stat = {}
        if "throttled_usec" in stat:        # v2
            throttled = int(stat["throttled_usec"]) / 1e6
        elif "throttled_time" in stat:      # v1, ns
            throttled = int(stat["throttled_time"]) / 1e9
        if "usage_usec" in stat:
            usage = int(stat["usage_usec"]) / 1e6
        try:
            usage = int((group / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            pass
    return usage, throttled


def sample(groups: dict[str, list[str]], proc: Path = Path("/proc")) -> Sample:
    busy, idle, steal, running, pressure = read_host(proc)
    return Sample(time.monotonic(), busy, idle, steal, running, pressure,
                  {name: read_group(paths) for name, paths in groups.items()})


def judge(first: Sample, last: Sample, host_cpus: int,
          budgets: dict[str, float] | None = None, peak_running: int | None = None) -> dict:
    """Summarise the stretch between two samples; ``ok`` False when the host ran short."""
    wall = max(1e-9, last.t_mono_s - first.t_mono_s)
    ticks = max(1, (last.busy_ticks - first.busy_ticks) + (last.idle_ticks - first.idle_ticks)
                + (last.steal_ticks - first.steal_ticks))
    idle = (last.idle_ticks - first.idle_ticks) / ticks
    steal = (last.steal_ticks - first.steal_ticks) / ticks
    throttled = sum(last.devices[n][1] - first.devices[n][1]
                    for n in last.devices if n in first.devices)
    contention = None
    if first.pressure_some_s is not None and last.pressure_some_s is not None:
        pressure = last.pressure_some_s - first.pressure_some_s
        contention = max(0.0, pressure - throttled) / wall
    quota_use = {}
    for name, budget in (budgets or {}).items():
        if name in first.devices and name in last.devices and budget > 0:
            used = last.devices[name][0] - first.devices[name][0]
            quota_use[name] = used / (budget * wall)
    running = peak_running if peak_running is not None else max(first.procs_running,
                                                                 last.procs_running)
    reasons = []
    if contention is not None and contention > CONTENTION_LIMIT:
        reasons.append(f"CPU contention {contention:.0%} of the time")
    if steal > STEAL_LIMIT:
        reasons.append(f"steal {steal:.0%}")
    if running > host_cpus + 1:  # this monitor itself is one of them
        reasons.append(f"{running} tasks runnable on {host_cpus} CPUs")
    return {"ok": not reasons, "reasons": reasons, "wall_s": wall, "idle": idle, "steal": steal,
            "contention": contention, "throttled_s": throttled, "peak_running": running,
            "quota_use": quota_use}


class Monitor:
    """Samples in a thread; ``between(t0, t1)`` judges any stretch inside the run."""

    def __init__(self, groups: dict[str, list[str]], host_cpus: int,
                 budgets: dict[str, float] | None = None, interval_s: float = INTERVAL_S,
                 proc: Path = Path("/proc")) -> None:
        self.groups, self.host_cpus, self.budgets = groups, host_cpus, budgets or {}
        self.interval_s, self.proc = interval_s, proc
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="shoal-slack", daemon=True)

    def __enter__(self) -> "Monitor":
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _take(self) -> None:
        try:
            s = sample(self.groups, self.proc)
        except OSError:
            return
        with self._lock:
            self.samples.append(s)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def between(self, t0_mono_s: float, t1_mono_s: float) -> dict | None:
        """Judge the samples that bracket [t0, t1] (None before two samples exist)."""
        self._take()
        with self._lock:
            samples = list(self.samples)
        before = [s for s in samples if s.t_mono_s <= t0_mono_s]
        first = before[-1] if before else samples[0]
        after = [s for s in samples if s.t_mono_s >= t1_mono_s]
        last = after[0] if after else samples[-1]
        if last is first:
            return None
        inside = [s.procs_running for s in samples if first.t_mono_s <= s.t_mono_s <= last.t_mono_s]
        # A single sample's run queue is noisy: judge by the median of the stretch.
        inside.sort()
        peak = inside[len(inside) // 2] if inside else None
        return judge(first, last, self.host_cpus, self.budgets, peak)


def row_columns(verdict: dict | None) -> dict:
    """The results.csv columns of one point's verdict."""
    if verdict is None:
        return {"host_slack": "", "host_slack_note": ""}
    return {"host_slack": "ok" if verdict["ok"] else "short",
            "host_slack_note": "; ".join(verdict["reasons"])}
