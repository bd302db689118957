"""Limit an emulated device's CPU to its profile with cgroups, and check it.

A device gets ``cores x speed / host_speed`` host CPUs of bandwidth (cgroup v2
``cpu.max``, v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``), over a short 10 ms
period (longer for tiny budgets) so a throttled rank stalls for milliseconds, not a tenth of a second,
and a cpuset of ``cores`` host CPUs where the host has that many. The
calibration runs the same CPU-bound kernel on the host and inside the
device's limits and reports the speed actually achieved.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from shoal import environment
from shoal.errors import ShoalError

PERIOD_US = 10_000
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class CgroupLayout:
    """Which cgroup hierarchy this machine offers for CPU limits."""

    version: int  # 1 or 2; 0 when no usable cpu controller
    cpu_base: Path | None
    cpuset_base: Path | None
    # v1 with cpuacct mounted apart from cpu: where a device's CPU time is counted
    # (the power model reads it); None when the cpu group itself counts it.
    acct_base: Path | None = None

    def describe(self) -> dict:
        return {"version": self.version, "cpu": str(self.cpu_base), "cpuset": str(self.cpuset_base),
                "cpuacct": str(self.acct_base) if self.acct_base else None}


def detect() -> CgroupLayout:
    """Find a writable cpu controller: pure v2, else v1 (also on hybrid systems)."""
    root = Path(environment.CGROUP_ROOT.get() or CGROUP_ROOT)
    if (root / "cgroup.controllers").exists():
        controllers = (root / "cgroup.controllers").read_text().split()
        if "cpu" in controllers and os.access(root / "cgroup.subtree_control", os.W_OK):
            return CgroupLayout(2, root / "shoal", root / "shoal" if "cpuset" in controllers else None)
        return CgroupLayout(0, None, None)
    if (root / "cpu" / "cpu.cfs_quota_us").exists() and os.access(root / "cpu", os.W_OK):
        cpuset = root / "cpuset" if (root / "cpuset" / "cpuset.cpus").exists() else None
        acct = root / "cpuacct"
        separate = ((acct / "cpuacct.usage").exists() and not (root / "cpu" / "cpuacct.usage").exists()
                    and os.access(acct, os.W_OK))
        return CgroupLayout(1, root / "cpu" / "shoal", cpuset / "shoal" if cpuset else None,
                            acct / "shoal" if separate else None)
    return CgroupLayout(0, None, None)


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise ShoalError(f"cannot write {value!r} to {path}: {exc.strerror}; "
                         "shoal needs root (or a delegated cgroup) to limit device CPUs") from exc


def _enable_v2(parent: Path, controllers: list[str]) -> None:
    available = (parent / "cgroup.controllers").read_text().split()
    wanted = " ".join(f"+{c}" for c in controllers if c in available)
    if wanted:
        _write(parent / "cgroup.subtree_control", wanted)


def host_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def quota_period(cpus_budget: float) -> tuple[int, int]:
    """(quota_us, period_us): 10 ms periods, longer ones for tiny budgets.

    The kernel refuses quotas below 1 ms and hands out bandwidth in 5 ms
    slices, so a budget of 0.05 CPU needs a period of at least 40 ms to be met.
    """
    period = max(PERIOD_US, int(4000 / max(cpus_budget, 1e-3)))
    period = min(period, 1_000_000)
    return max(1000, int(round(cpus_budget * period))), period


def create(layout: CgroupLayout, cluster_id: str, node: str, cpus_budget: float,
           cpuset: list[int] | None) -> list[str]:
    """Create the device's cgroup(s); return their paths (cluster dir last, for removal order)."""
    paths: list[str] = []
    quota, period = quota_period(cpus_budget)
    if layout.version == 2:
        base = layout.cpu_base
        cluster = base / cluster_id
        for level in (base, cluster):
            level.mkdir(exist_ok=True)
            _enable_v2(level.parent, ["cpu", "cpuset"] if layout.cpuset_base else ["cpu"])
        _enable_v2(cluster, ["cpu", "cpuset"] if layout.cpuset_base else ["cpu"])
        group = cluster / node
        group.mkdir(exist_ok=True)
        _write(group / "cpu.max", f"{quota} {period}")
        if cpuset and layout.cpuset_base:
            _write(group / "cpuset.cpus", ",".join(map(str, cpuset)))
        paths += [str(group), str(cluster)]
        return paths
    if layout.version == 1:
        cluster = layout.cpu_base / cluster_id
        cluster.mkdir(parents=True, exist_ok=True)
        group = cluster / node
        group.mkdir(exist_ok=True)
        _write(group / "cpu.cfs_quota_us", "-1")
        _write(group / "cpu.cfs_period_us", str(period))
        _write(group / "cpu.cfs_quota_us", str(quota))
        paths += [str(group), str(cluster)]
        if cpuset and layout.cpuset_base:
            top = layout.cpuset_base
            sets = [top, top / cluster_id, top / cluster_id / node]
            for level in sets:
                fresh = not level.exists()
                level.mkdir(exist_ok=True)
                if fresh or not (level / "cpuset.cpus").read_text().strip():
                    # v1 cpusets start empty: copy the parent's cpus and memory nodes.
                    _write(level / "cpuset.cpus", (level.parent / "cpuset.cpus").read_text().strip())
                    _write(level / "cpuset.mems", (level.parent / "cpuset.mems").read_text().strip())
            _write(sets[-1] / "cpuset.cpus", ",".join(map(str, cpuset)))
            paths += [str(sets[2]), str(sets[1])]
        if layout.acct_base:
            acct = layout.acct_base / cluster_id / node
            acct.mkdir(parents=True, exist_ok=True)
            paths += [str(acct), str(acct.parent)]
        return paths


def usage_group(paths: list[str]) -> str | None:
    """The one of a device's cgroups that counts its CPU time (for the power model)."""
    for path in paths:
        group = Path(path)
        if (group / "cpuacct.usage").is_file():
            return path
        stat = group / "cpu.stat"
        if stat.is_file() and "usage_usec" in stat.read_text():
            return path
    return None
    return paths


def join(groups: list[str], pid: int | None = None) -> None:
    """Move a process (default: this one) into the device's cgroups."""
    for group in groups:
        procs = Path(group) / "cgroup.procs"
        if procs.exists() and Path(group).name != "":
            procs.write_text(str(pid or os.getpid()))


# -- calibration ------------------------------------------------------------------------
_KERNEL = r"""
import sys, time
window = float(sys.argv[1])
x = 0
time.sleep(0.05)
end = time.perf_counter() + 0.05
while time.perf_counter() < end:
    x = (x * 1103515245 + 12345) & 0xFFFFFFFF
count, start, cpu0 = 0, time.perf_counter(), time.process_time()
stop = start + window
while True:
    for _ in range(2000):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    count += 2000
    now = time.perf_counter()
    if now >= stop:
        break
print(count, now - start, time.process_time() - cpu0)
"""


def kernel_runs(workers: int, groups: list[str] | None, window_s: float = 0.5
                ) -> list[tuple[float, float, float]]:
    """Run ``workers`` copies of the CPU kernel at once (inside ``groups`` if given).

    Each returns (iterations, wall seconds, CPU seconds). Iterations per CPU
    second is the host core's own speed, unaffected by other load on a shared
    machine; iterations per wall second is what the device delivered.
    """
    def enter() -> None:
        if groups:
            join(groups)

    procs = [subprocess.Popen([sys.executable, "-c", _KERNEL, str(window_s)],
                              stdout=subprocess.PIPE, text=True,
                              preexec_fn=enter if groups else None)
             for _ in range(workers)]
    runs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        count, wall, cpu = (float(x) for x in out.split())
        runs.append((count, wall, cpu))
    return runs


def calibrate(groups: list[str], cores: int, target_fraction: float) -> dict:
    """Measure the per-core speed a device's cgroups deliver, as a fraction of a host core.

    ``achieved_fraction`` = device iterations per wall second / host
    iterations per CPU second, averaged over one worker per device core.
    """
    workers = max(1, min(cores, len(host_cpus())))
    # Measure over 20 CFS periods at least: tiny budgets have long periods, and
    # a window of a few periods mostly measures where it started in one.
    _, period_us = quota_period(cores * target_fraction)
    runs = kernel_runs(workers, groups, window_s=max(0.5, 20 * period_us / 1e6))
    host_rate = sum(c for c, _, _ in runs) / sum(cpu for _, _, cpu in runs)
    achieved = sum(c / w for c, w, _ in runs) / len(runs) / host_rate
    return {"host_iterations_per_cpu_s": host_rate, "workers": workers,
            "target_fraction": target_fraction, "achieved_fraction": achieved,
            "error": (achieved - target_fraction) / target_fraction,
            "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def set_budget(layout: CgroupLayout, group: str, cpus_budget: float) -> None:
    """Change a device's CPU bandwidth (used by the calibration's correction step)."""
    quota, period = quota_period(cpus_budget)
    if layout.version == 2:
        _write(Path(group) / "cpu.max", f"{quota} {period}")
    elif layout.version == 1:
        _write(Path(group) / "cpu.cfs_quota_us", "-1")
        _write(Path(group) / "cpu.cfs_period_us", str(period))
        _write(Path(group) / "cpu.cfs_quota_us", str(quota))
