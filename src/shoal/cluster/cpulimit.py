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
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from shoal import environment, proc
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


DELEGATED = environment.CGROUP_DELEGATED.name  # a v2 cgroup prepared for this command's devices


def _own_groups(text: str | None = None) -> dict[str, str]:
    """This process's cgroup per controller ("" for v2's unified line)."""
    if text is None:
        try:
            text = Path("/proc/self/cgroup").read_text()
        except OSError:
            return {}
    groups = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


def _writable(directory: Path) -> bool:
    return directory.is_dir() and os.access(directory, os.W_OK)


def detect(self_cgroup: str | None = None) -> CgroupLayout:
    """Find a cpu controller this process may divide.

    As root: the hierarchy's root, pure v2, else v1 (also on hybrid systems).
    Otherwise a delegated cgroup: the v2 group prepared in a systemd scope
    (``prepare_delegated``), or this process's own v1 cpu group when its
    owner made it writable for the user. ``self_cgroup`` stands in for
    ``/proc/self/cgroup`` (tests).
    """
    root = Path(environment.CGROUP_ROOT.get() or CGROUP_ROOT)
    own = _own_groups(self_cgroup)
    if (root / "cgroup.controllers").exists():
        delegated = os.environ.get(DELEGATED)
        for base in ([Path(delegated)] if delegated else []) + [root]:
            if not (base / "cgroup.controllers").exists():
                continue
            controllers = (base / "cgroup.controllers").read_text().split()
            if "cpu" in controllers and os.access(base / "cgroup.subtree_control", os.W_OK):
                group = base if base != root else root / "shoal"
                return CgroupLayout(2, group, group if "cpuset" in controllers else None)
        return CgroupLayout(0, None, None)
    cpu_root = root / "cpu"
    if not (cpu_root / "cpu.cfs_quota_us").exists():
        return CgroupLayout(0, None, None)
    # Root's own group or, for an ordinary user, one delegated to them (v1: owned by the user).
    for mine in ([cpu_root] if os.geteuid() == 0 else []) + [cpu_root / own.get("cpu", "/").lstrip("/")]:
        if not _writable(mine) or (mine == cpu_root and os.geteuid() != 0):
            continue
        cpuset = root / "cpuset" / own.get("cpuset", "/").lstrip("/")
        cpuset = cpuset if (cpuset / "cpuset.cpus").exists() and _writable(cpuset) else None
        acct = root / "cpuacct" / own.get("cpuacct", "/").lstrip("/")
        separate = ((acct / "cpuacct.usage").exists() and not (mine / "cpuacct.usage").exists()
                    and _writable(acct))
        return CgroupLayout(1, mine / "shoal", cpuset / "shoal" if cpuset else None,
                            acct / "shoal" if separate else None)
    return CgroupLayout(0, None, None)


def prepare_delegated(self_cgroup: str | None = None) -> bool:
    """Under a delegated v2 group (a systemd scope with Delegate=yes, or one an
    administrator gave the user): make room for the devices' groups.

    v2 hands controllers to children only of a group without processes of
    its own. So the devices go under ``<parent>/shoal`` when this process's
    group has a parent the user may divide, else this process moves into
    ``<own>/command`` and they go under ``<own>/shoal``. Returns False when
    neither is possible (nothing changed).
    """
    root = Path(environment.CGROUP_ROOT.get() or CGROUP_ROOT)
    own = root / _own_groups(self_cgroup).get("", "/").lstrip("/")
    if not (own / "cgroup.controllers").exists() or own == root:
        return False
    for base, move in ((own.parent, False), (own, True)):
        if base == root or not os.access(base / "cgroup.subtree_control", os.W_OK):
            continue
        if "cpu" not in (base / "cgroup.controllers").read_text().split():
            continue
        try:
            if move:
                (own / "command").mkdir(exist_ok=True)
                (own / "command" / "cgroup.procs").write_text(str(os.getpid()))
            _enable_v2(base, ["cpu", "cpuset"])
            (base / "shoal").mkdir(exist_ok=True)
            _enable_v2(base / "shoal", ["cpu", "cpuset"])
        except (OSError, ShoalError):
            continue
        os.environ[DELEGATED] = str(base / "shoal")
        return True
    return False


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


def paths(layout: CgroupLayout, cluster_id: str, node: str, cpuset: list[int] | None) -> list[str]:
    """The cgroups ``create`` makes for a device (cluster dir after each device dir, for
    removal order): a cluster records them before it makes them."""
    if layout.version == 2:
        cluster = layout.cpu_base / cluster_id
        return [str(cluster / node), str(cluster)]
    if layout.version == 1:
        cluster = layout.cpu_base / cluster_id
        out = [str(cluster / node), str(cluster)]
        if cpuset and layout.cpuset_base:
            out += [str(layout.cpuset_base / cluster_id / node), str(layout.cpuset_base / cluster_id)]
        if layout.acct_base:
            acct = layout.acct_base / cluster_id / node
            out += [str(acct), str(acct.parent)]
        return out
    return []


def create(layout: CgroupLayout, cluster_id: str, node: str, cpus_budget: float,
           cpuset: list[int] | None) -> list[str]:
    """Create the device's cgroup(s); return their paths (``paths``)."""
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
    elif layout.version == 1:
        cluster = layout.cpu_base / cluster_id
        cluster.mkdir(parents=True, exist_ok=True)
        group = cluster / node
        group.mkdir(exist_ok=True)
        _write(group / "cpu.cfs_quota_us", "-1")
        _write(group / "cpu.cfs_period_us", str(period))
        _write(group / "cpu.cfs_quota_us", str(quota))
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
        if layout.acct_base:
            (layout.acct_base / cluster_id / node).mkdir(parents=True, exist_ok=True)
    return paths(layout, cluster_id, node, cpuset)


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


# -- calibration ------------------------------------------------------------------------
_KERNEL = r"""
import os, sys, time
for group in sys.argv[2:]:  # the device's cgroups, joined before any work
    with open(os.path.join(group, "cgroup.procs"), "w") as fh:
        fh.write(str(os.getpid()))
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
    argv = [sys.executable, "-c", _KERNEL, str(window_s), *(groups or [])]
    workers_started = [proc.start(argv, stdout=proc.PIPE, show=i == 0) for i in range(workers)]
    runs = []
    for worker in workers_started:
        with worker:
            out, _ = worker.popen.communicate(timeout=60)
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
