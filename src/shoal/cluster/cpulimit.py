"""Limit an emulated device's CPU to its profile with cgroups, and check it.

Each core of a device is a budget of its own: a group per core (cgroup v2
``cpu.max``, v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``) granting
``speed / host_speed`` of a host core over short periods (10 ms, longer for
tiny budgets), pinned to one host CPU where a cpuset can be divided. The
device's group above its cores counts their sum; its launcher daemons have a
core's budget of their own. The calibration runs a CPU-bound kernel in each
core's groups and reports the share of a host core actually delivered.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, replace
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
    # The command's own group, CPU-limited, that shoal's groups are made beneath (so its limit
    # holds the devices too); None: the hierarchy's root, or a group delegated to the user.
    within: Path | None = None

    def describe(self) -> dict:
        return {"version": self.version, "cpu": str(self.cpu_base), "cpuset": str(self.cpuset_base),
                "cpuacct": str(self.acct_base) if self.acct_base else None,
                "within": str(self.within) if self.within else None}


DELEGATED = environment.CGROUP_DELEGATED.name  # a v2 cgroup prepared for this command's devices


def own_groups(text: str | None = None) -> dict[str, str]:
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


def _limited_own(self_cgroup: str | None) -> Path | None:
    """This process's own cpu group (the deepest that exists here) when it or an ancestor
    holds a CPU quota, else None."""
    capacity = cpu_capacity(self_cgroup)
    return Path(capacity.own) if capacity.limited_by and capacity.own else None


def detect(self_cgroup: str | None = None) -> CgroupLayout:
    """Find a cpu controller this process may divide.

    As root: the hierarchy's root, pure v2, else v1 (also on hybrid systems);
    but beneath this process's own group where that group or an ancestor
    holds a CPU quota (a container, a slice with CPUQuota=, a group the user
    put shoal in), so the devices stay inside the limit the command is under.
    Otherwise a delegated cgroup: the v2 group prepared in a systemd scope
    (``prepare_delegated``), or this process's own v1 cpu group when its
    owner made it writable for the user. ``self_cgroup`` stands in for
    ``/proc/self/cgroup`` (tests).
    """
    root = Path(environment.CGROUP_ROOT.get() or CGROUP_ROOT)
    own = own_groups(self_cgroup)
    within = _limited_own(self_cgroup) if os.geteuid() == 0 else None
    if (root / "cgroup.controllers").exists():
        delegated = os.environ.get(DELEGATED)
        for base in ([Path(delegated)] if delegated else []) + ([within] if within else []) + [root]:
            if not (base / "cgroup.controllers").exists():
                continue
            controllers = (base / "cgroup.controllers").read_text().split()
            if "cpu" in controllers and os.access(base / "cgroup.subtree_control", os.W_OK):
                group = base if delegated and base == Path(delegated) else base / "shoal"
                # A container's cgroup namespace: its root is a group (it has a cpu.max, the
                # host's root none), which must hold no process to hand controllers down.
                inside = base == within or (base == root and (root / "cpu.max").exists())
                return CgroupLayout(2, group, group if "cpuset" in controllers else None,
                                    within=base if inside else None)
        return CgroupLayout(0, None, None)
    cpu_root = root / "cpu"
    if not (cpu_root / "cpu.cfs_quota_us").exists():
        return CgroupLayout(0, None, None)
    # Within a limited own group, the hierarchy's root (root), or for an ordinary user a group
    # delegated to them (v1: owned by the user).
    mounted = within if within != cpu_root else None  # a container's mount is its own group
    candidates = ([mounted] if mounted else []) + ([cpu_root] if os.geteuid() == 0 else [])
    for mine in candidates + [cpu_root / own.get("cpu", "/").lstrip("/")]:
        if not _writable(mine) or (mine == cpu_root and os.geteuid() != 0):
            continue
        cpuset = root / "cpuset" / own.get("cpuset", "/").lstrip("/")
        cpuset = cpuset if (cpuset / "cpuset.cpus").exists() and _writable(cpuset) else None
        acct = root / "cpuacct" / own.get("cpuacct", "/").lstrip("/")
        separate = ((acct / "cpuacct.usage").exists() and not (mine / "cpuacct.usage").exists()
                    and _writable(acct))
        return CgroupLayout(1, mine / "shoal", cpuset / "shoal" if cpuset else None,
                            acct / "shoal" if separate else None,
                            within=mine if mine == mounted else None)
    return CgroupLayout(0, None, None)


def prepare_delegated(self_cgroup: str | None = None) -> bool:
    """Under a delegated v2 group (a systemd scope with Delegate=yes, or one an
    administrator gave the user): make room for the devices' groups.

    v2 hands controllers to children only of a group without processes of
    its own. So the devices go under ``<parent>/shoal`` when this process's
    group has a parent the user may divide (and holds no CPU quota of its own,
    which the devices would escape there), else this process moves into
    ``<own>/command`` and they go under ``<own>/shoal``. Returns False when
    neither is possible (nothing changed).
    """
    root = Path(environment.CGROUP_ROOT.get() or CGROUP_ROOT)
    own = root / own_groups(self_cgroup).get("", "/").lstrip("/")
    if not (own / "cgroup.controllers").exists() or own == root:
        return False
    limited = _quota_cpus(own, 2) is not None
    for base, move in ((own.parent, False), (own, True)):
        if base == root or not os.access(base / "cgroup.subtree_control", os.W_OK):
            continue
        if limited and not move:
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


def vacate(group: Path) -> None:
    """Make a v2 group able to hand controllers to its children: v2 allows it only while the
    group holds no process itself (below the root), so its processes (this command and
    whatever the container or service runs beside it) move into a leaf ``<group>/command``.
    They stay beneath the group, under the same limits; the leaf stays while they live."""
    pids = (_read(group / "cgroup.procs") or "").split()
    if not pids:
        return
    leaf = group / "command"
    try:
        leaf.mkdir(exist_ok=True)
    except OSError as exc:
        raise ShoalError(f"cannot create {leaf}: {exc.strerror}; shoal needs it to make the "
                         f"devices' CPU groups beneath {group}") from exc
    for pid in pids:
        try:
            (leaf / "cgroup.procs").write_text(pid)
        except ProcessLookupError:
            pass  # ended meanwhile
        except OSError as exc:
            raise ShoalError(f"cannot move process {pid} into {leaf}: {exc.strerror}") from exc


def write_control(path: Path, value: str, what: str = "device CPUs") -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise ShoalError(f"cannot write {value!r} to {path}: {exc.strerror}; "
                         f"shoal needs root (or a delegated cgroup) to limit {what}") from exc


def _enable_v2(parent: Path, controllers: list[str]) -> None:
    available = (parent / "cgroup.controllers").read_text().split()
    wanted = " ".join(f"+{c}" for c in controllers if c in available)
    if wanted:
        write_control(parent / "cgroup.subtree_control", wanted)


def host_cpus() -> list[int]:
    """The host CPUs this process may run on (its affinity): where device cores are pinned."""
    return sorted(os.sched_getaffinity(0))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):  # absent, or unreadable to this user: no limit known
        return None


def _cpu_list(text: str | None) -> set[int] | None:
    """A kernel CPU list ("0-3,6") as a set; None where there is none or it does not parse."""
    if not text:
        return None
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    except ValueError:
        return None
    return cpus or None


def _quota_cpus(group: Path, version: int) -> float | None:
    """The CPUs a group's bandwidth limit allows (quota / period); None: unlimited or unknown.
    v1: ``cpu.cfs_quota_us`` (-1: none) over ``cpu.cfs_period_us``; v2: ``cpu.max``
    ("max 100000": none; "50000 100000": half a CPU)."""
    if version == 2:
        text = _read(group / "cpu.max")
        quota, _, period = (text or "max").partition(" ")
    else:
        quota, period = _read(group / "cpu.cfs_quota_us") or "-1", _read(group / "cpu.cfs_period_us") or ""
    try:
        quota_us, period_us = int(quota), int(period or 100_000)
    except ValueError:  # "max", or something unreadable
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def _chain(base: Path, path: str) -> list[Path]:
    """A group and its ancestors down to the hierarchy's mount (``base``), deepest first, only
    those that exist here: in a container the mount is the container's own group, and the
    path /proc/self/cgroup names (the host's) is not below it."""
    parts = [p for p in path.strip("/").split("/") if p and p != ".."]
    levels = [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]
    return [level for level in levels if _is_dir(level)]


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # below a directory this user may not search: as if it were not there
        return False


@dataclass(frozen=True)
class CpuCapacity:
    """How much CPU this command may use: the CPUs it may run on and the tightest CPU quota of
    its cgroup and every ancestor (``docker --cpus 1``, systemd's CPUQuota=, a group with
    ``cpu.max``)."""

    cpus: int                   # its affinity, within its cpuset
    quota_cpus: float | None    # quota / period of the tightest limiting group; None: no quota
    limited_by: str | None      # that group
    own: str | None             # this command's own cpu group (the deepest that exists here)
    version: int                # the hierarchy read (1, 2; 0: none)

    @property
    def usable(self) -> float:
        """CPUs' worth of time per second this command can have (e.g. 0.5)."""
        return min(float(self.cpus), self.quota_cpus) if self.quota_cpus else float(self.cpus)

    def describe(self) -> dict:
        return {"cpus": self.cpus, "capacity": self.usable, "quota_cpus": self.quota_cpus,
                "limited_by": self.limited_by}


def cpu_capacity(self_cgroup: str | None = None) -> CpuCapacity:
    """The CPUs this command can use: its affinity count, narrowed by its cpuset, and the tightest
    CPU quota (quota / period) of its own cgroup and every ancestor, v1 or v2. Files that are
    missing or unreadable (an ordinary user, a container) count as no limit: it never fails.
    ``self_cgroup`` stands in for ``/proc/self/cgroup`` (tests)."""
    root = Path(environment.CGROUP_ROOT.get() or CGROUP_ROOT)
    try:
        own = own_groups(self_cgroup)
    except ValueError:  # a line not shaped N:controllers:/path
        own = {}
    affinity = len(host_cpus())
    try:
        return _capacity_in(root, own, affinity)
    except OSError:  # a directory on the way this user may not search
        return CpuCapacity(affinity, None, None, None, 0)


def _capacity_in(root: Path, own: dict[str, str], affinity: int) -> CpuCapacity:
    if (root / "cgroup.controllers").exists():
        version, cpu_chain = 2, _chain(root, own.get("", "/"))
        cpuset = _cpu_list(_read(cpu_chain[0] / "cpuset.cpus.effective")) if cpu_chain else None
    elif (root / "cpu").is_dir():
        version, cpu_chain = 1, _chain(root / "cpu", own.get("cpu", "/"))
        sets = _chain(root / "cpuset", own.get("cpuset", "/"))
        cpuset = None
        for name in ("cpuset.effective_cpus", "cpuset.cpus"):
            cpuset = cpuset or (_cpu_list(_read(sets[0] / name)) if sets else None)
    else:
        version, cpu_chain, cpuset = 0, [], None
    cpus = min(affinity, len(cpuset)) if cpuset else affinity
    quota, limited_by = None, None
    for group in cpu_chain:
        allowed = _quota_cpus(group, version)
        if allowed is not None and (quota is None or allowed < quota):
            quota, limited_by = allowed, str(group)
    return CpuCapacity(max(1, cpus), quota, limited_by, str(cpu_chain[0]) if cpu_chain else None,
                       version)


def capacity() -> float:
    """The CPUs this command may use (``cpu_capacity().usable``; 0.5 inside ``docker --cpus
    0.5``): what the emulation's dilation is chosen to fit."""
    return cpu_capacity().usable


def bandwidth_slice_us() -> int:
    """The scheduler's bandwidth slice: how much quota a CPU takes from a group's pool at once."""
    try:
        return int(Path("/proc/sys/kernel/sched_cfs_bandwidth_slice_us").read_text())
    except (OSError, ValueError):
        return 5000  # the kernel's default


def min_quota_us(pinned: bool) -> int:
    """The smallest quota per period a device core may get and still run at its budget.

    A core group pinned to one host CPU draws its quota from one CPU's local pool,
    so the kernel's own minimum (1 ms) is enough. Unpinned, its threads may run
    on several CPUs, each taking a bandwidth slice (5 ms) at a time: a quota near
    the slice lets one CPU take a period's whole quota while another waits, so
    it must be well above it.
    """
    return MIN_QUOTA_US if pinned else max(MIN_QUOTA_US, 2 * bandwidth_slice_us())


MIN_QUOTA_US = 1000
MAX_PERIOD_US = 1_000_000


def quota_period(cpus_budget: float, pinned: bool = True) -> tuple[int, int]:
    """(quota_us, period_us) for a group of ``cpus_budget`` CPUs.

    Periods are 10 ms, longer where the quota would fall below ``min_quota_us``
    (a MinnowBoard core at dilation 2, 0.125 CPU, gets 1.25 ms per 10 ms pinned,
    10 ms per 80 ms unpinned).
    """
    period = max(PERIOD_US, math.ceil(min_quota_us(pinned) / max(cpus_budget, 1e-6)))
    period = min(period, MAX_PERIOD_US)
    return max(MIN_QUOTA_US, int(round(cpus_budget * period))), period


def smallest_core_budget(pinned: bool = True) -> float:
    """The smallest budget (CPUs) a device core can be held to: the minimum quota per longest period."""
    return min_quota_us(pinned) / MAX_PERIOD_US


@dataclass(frozen=True)
class DeviceGroups:
    """The cgroups of one emulated device, per hierarchy.

    ``device``: the device's own groups (its CPU time is counted there, for its power);
    ``daemons``: what the launcher's proxy on the device joins (the MPI's daemons run
    there, at one core's budget); ``cores[k]``: the groups a rank on core k joins, one
    budget per device core; ``parents``: the cluster's groups above the devices.
    """

    device: list[str]
    daemons: list[str]
    cores: list[list[str]]
    parents: list[str]
    # Each core's (and the daemons') quota per period, once made (0 before).
    quota_us: int = 0
    period_us: int = 0

    def all(self) -> list[str]:
        """Every group, children before their parents (the order they are removed in)."""
        leaves = [g for core in self.cores for g in core] + self.daemons
        return sorted(set(leaves + self.device + self.parents), key=lambda g: (-g.count("/"), g))


def _levels(base: Path, cluster_id: str, node: str, cores: int) -> tuple[Path, list[Path], Path]:
    device = base / cluster_id / node
    return device, [device / f"core{k}" for k in range(cores)], device / "daemons"


def paths(layout: CgroupLayout, cluster_id: str, node: str, cores: int,
          pins: list[int] | None) -> DeviceGroups:
    """The cgroups ``create`` makes for a device; a cluster records them before it makes them."""
    device: list[str] = []
    daemons: list[str] = []
    parents: list[str] = []
    core_groups: list[list[str]] = [[] for _ in range(cores)]
    bases = [layout.cpu_base] if layout.version else []
    if layout.cpuset_base and pins and layout.version == 1:
        bases.append(layout.cpuset_base)
    for base in bases:
        dev, each, rest = _levels(base, cluster_id, node, cores)
        device.append(str(dev))
        daemons.append(str(rest))
        parents.append(str(base / cluster_id))
        for k, group in enumerate(each):
            core_groups[k].append(str(group))
    if layout.version == 1 and layout.acct_base:
        # Separate cpuacct hierarchy: every process of the device stays in its one group.
        acct = str(layout.acct_base / cluster_id / node)
        device.append(acct)
        daemons.append(acct)
        parents.append(str(layout.acct_base / cluster_id))
    if layout.within and layout.version:
        # shoal's level inside the command's own group goes with the cluster (removed once
        # no other cluster's group is in it): nothing stays in a group that a container's
        # runtime or systemd will want to remove.
        parents.append(str(layout.cpu_base))
    return DeviceGroups(device, daemons, core_groups, parents)


# The weight of shoal's own group against the host's other work (the largest each version
# takes; a task's is 1024 in v1, 100 in v2): on a busy host the emulation's processes run
# first, each device core still held to its quota, the rest of the host in what is left.
# Only while the devices' budgets fit the host: overcommitted, they would leave shoal's own
# command (in the host's group) no CPU at all, so they share the host evenly instead.
PRIORITY = {1: ("cpu.shares", "262144", "1024"), 2: ("cpu.weight", "10000", "100")}


def prioritise(layout: CgroupLayout, first: bool) -> None:
    """Weight shoal's group above the host's other work (``first``), or evenly with it."""
    if not layout.version:
        return
    knob, high, even = PRIORITY[layout.version]
    try:
        (layout.cpu_base / knob).write_text(high if first else even)
    except OSError:
        pass  # a delegated group may not allow it: the emulation then shares the host evenly


def host_group_paths(layout: CgroupLayout, cluster_id: str, name: str) -> list[str]:
    """The unlimited group of the cluster's own helpers (``name``: "head", "switch")."""
    return [str(layout.cpu_base / cluster_id / name)] if layout.version else []


def create_host_group(layout: CgroupLayout, cluster_id: str, name: str) -> list[str]:
    """A group beside the devices, without a quota, for the launcher in the head namespace
    and the link forwarder: they share the emulation's weight on a busy host."""
    groups = host_group_paths(layout, cluster_id, name)
    if groups:
        _levels_up(layout, cluster_id)
        Path(groups[0]).mkdir(exist_ok=True)
    return groups


def hold_group(layout: CgroupLayout, group: Path, cpus: float | None) -> None:
    """Hold a host group to ``cpus`` host CPUs over all its threads, unpinned (None: no limit):
    a virtual board's QEMU, every vCPU and its I/O thread in one budget (shoal.pallex.vmspeed)."""
    if cpus is None:
        _set_quota(layout, group, None, PERIOD_US)
    else:
        quota, period = quota_period(cpus, pinned=False)
        _set_quota(layout, group, quota, period)


def _levels_up(layout: CgroupLayout, cluster_id: str) -> None:
    """shoal's group (weighted) and the cluster's, with the controllers their children need."""
    base = layout.cpu_base
    if layout.version == 2:
        wanted = ["cpu", "cpuset"] if layout.cpuset_base else ["cpu"]
        if layout.within:
            vacate(layout.within)
        for level in (base, base / cluster_id):
            level.mkdir(exist_ok=True)
            _enable_v2(level.parent, wanted)
        _enable_v2(base / cluster_id, wanted)
    else:
        (base / cluster_id).mkdir(parents=True, exist_ok=True)


def _set_quota(layout: CgroupLayout, group: Path, quota: int | None, period: int) -> None:
    if layout.version == 2:
        write_control(group / "cpu.max", f"{quota} {period}" if quota else f"max {period}")
    else:
        write_control(group / "cpu.cfs_quota_us", "-1")
        write_control(group / "cpu.cfs_period_us", str(period))
        if quota:
            write_control(group / "cpu.cfs_quota_us", str(quota))


def _v1_cpuset(level: Path, cpus: str | None) -> None:
    fresh = not level.exists()
    level.mkdir(exist_ok=True)
    if fresh or not (level / "cpuset.cpus").read_text().strip():
        # v1 cpusets start empty: copy the parent's cpus and memory nodes.
        write_control(level / "cpuset.cpus", (level.parent / "cpuset.cpus").read_text().strip())
        write_control(level / "cpuset.mems", (level.parent / "cpuset.mems").read_text().strip())
    if cpus is not None:
        write_control(level / "cpuset.cpus", cpus)


def create(layout: CgroupLayout, cluster_id: str, node: str, core_budget: float, cores: int,
           pins: list[int] | None, pinned: bool) -> DeviceGroups:
    """Create a device's groups: one budget of ``core_budget`` CPUs per core (core k on host
    CPU ``pins[k]``: by a cpuset where one can be divided; ``pinned``: by the rank placement's
    affinity where none can), the daemons' leaf at one core's budget, and the device's own
    group above them, unlimited, counting their sum."""
    groups = paths(layout, cluster_id, node, cores, pins)
    if layout.version == 1:
        # v1 refuses a group a larger share than the quota above it (EINVAL), which in a
        # CPU-limited group (an overcommitting --dilation) no core could get anyway.
        above = cpu_capacity().quota_cpus
        core_budget = min(core_budget, above) if above else core_budget
    quota, period = quota_period(core_budget, pinned)
    device, each, rest = _levels(layout.cpu_base, cluster_id, node, cores)
    _levels_up(layout, cluster_id)
    if layout.version == 2:
        wanted = ["cpu", "cpuset"] if layout.cpuset_base else ["cpu"]
        device.mkdir(exist_ok=True)
        _enable_v2(device, wanted)
        for k, group in enumerate(each + [rest]):
            group.mkdir(exist_ok=True)
            _set_quota(layout, group, quota, period)
            if pins and layout.cpuset_base:
                cpus = str(pins[k]) if k < cores else ",".join(map(str, sorted(set(pins))))
                write_control(group / "cpuset.cpus", cpus)
    elif layout.version == 1:
        device.mkdir(exist_ok=True)
        for group in each + [rest]:
            group.mkdir(exist_ok=True)
            _set_quota(layout, group, quota, period)
        if pins and layout.cpuset_base:
            top = layout.cpuset_base
            for level in (top, top / cluster_id, top / cluster_id / node):
                _v1_cpuset(level, None)
            _, set_each, set_rest = _levels(top, cluster_id, node, cores)
            for k, level in enumerate(set_each):
                _v1_cpuset(level, str(pins[k]))
            _v1_cpuset(set_rest, ",".join(map(str, sorted(set(pins)))))
        if layout.acct_base:
            (layout.acct_base / cluster_id / node).mkdir(parents=True, exist_ok=True)
    return replace(groups, quota_us=quota, period_us=period)


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


def kernel_runs(workers: int | list[list[str]], window_s: float = 0.5
                ) -> list[tuple[float, float, float]]:
    """Run copies of the CPU kernel at once: ``workers`` of them on the host, or one inside
    each list of groups given (a device core's groups).

    Each returns (iterations, wall seconds, CPU seconds). Iterations per CPU
    second is the host core's own speed, unaffected by other load on a shared
    machine; iterations per wall second is what the device delivered.
    """
    placements = [[] for _ in range(workers)] if isinstance(workers, int) else workers
    started = [proc.start([sys.executable, "-c", _KERNEL, str(window_s), *groups],
                          stdout=proc.PIPE, show=i == 0) for i, groups in enumerate(placements)]
    runs = []
    for worker in started:
        with worker:
            out, _ = worker.popen.communicate(timeout=60)
        count, wall, cpu = (float(x) for x in out.split())
        runs.append((count, wall, cpu))
    return runs


def calibrate(core_groups: list[list[str]], target_fraction: float, period_us: int) -> dict:
    """Measure the speed a device's cores deliver at once, as a fraction of a host core each.

    One CPU-bound worker per device core (as many as the host has CPUs), each in its
    core's groups. ``achieved_fraction`` = iterations per wall second / the same worker's
    iterations per CPU second, averaged over the workers. A check, not a correction:
    the kernel enforces each core's quota exactly, and what it measures short of the
    target is the host's own load, which changes from one second to the next.
    """
    workers = core_groups[:max(1, len(host_cpus()))]
    # Measure over 20 periods at least: tiny budgets have long periods, and
    # a window of a few periods mostly measures where it started in one.
    runs = kernel_runs(workers, window_s=max(0.5, 20 * period_us / 1e6))
    achieved = sum(c / w / (c / cpu) for c, w, cpu in runs) / len(runs)
    return {"host_iterations_per_cpu_s": sum(c for c, _, _ in runs) / sum(x for _, _, x in runs),
            "workers": len(runs), "target_fraction": target_fraction,
            "achieved_fraction": achieved, "error": (achieved - target_fraction) / target_fraction,
            "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
