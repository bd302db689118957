"""Hold an emulated device's processes to its profile's memory with a memory cgroup.

A set-top box has 256 MiB: its rank and daemons together must live in that, as on
the real board, so a run that would not fit fails there too instead of borrowing
the host's memory. The limit is the device's whole memory (the host's kernel is
shared, so nothing is kept back for a kernel of its own), without swap (the board
has none).

cgroup v2: the memory controller of the tree the CPU groups are in; ``memory.max``
on the device's group counts its cores and daemons below it. cgroup v1: a group
per device in the memory hierarchy under this process's own memory group
(``<own>/shoal-ID/NODE``, so any limit already above this command still holds), ``memory.limit_in_bytes`` (and
``memory.memsw.limit_in_bytes`` where swap is accounted); the device's processes
join it with its daemons' groups and their ranks inherit it. Without a memory
controller this user may divide, nothing is limited and the run's record says why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from shoal import environment
from shoal.cluster import cpulimit
from shoal.errors import ShoalError


@dataclass(frozen=True)
class MemoryLayout:
    """Where device memory groups go: version 1 or 2, or 0 with the reason there are none."""

    version: int
    base: Path | None  # the groups of clusters go below it (base/ID/NODE)
    why: str = ""

    def describe(self) -> dict:
        return {"version": self.version, "memory": str(self.base) if self.base else None}


def detect(cpu: cpulimit.CgroupLayout, self_cgroup: str | None = None) -> MemoryLayout:
    """The memory controller this process may divide, if any (``self_cgroup`` stands in for
    ``/proc/self/cgroup`` in tests)."""
    root = Path(environment.CGROUP_ROOT.get() or cpulimit.CGROUP_ROOT)
    if (root / "cgroup.controllers").exists():
        # v2: memory beside cpu in the groups cpulimit divides.
        if cpu.version != 2:
            return MemoryLayout(0, None, "no cgroup v2 group this user may divide")
        # A group may enable for its children only what its own cgroup.controllers lists.
        parent = cpu.cpu_base.parent
        if "memory" not in (parent / "cgroup.controllers").read_text().split():
            return MemoryLayout(0, None, f"the memory controller is not delegated to {parent}")
        return MemoryLayout(2, cpu.cpu_base)
    memory = root / "memory"
    if not (memory / "memory.limit_in_bytes").exists():
        return MemoryLayout(0, None, f"no cgroup v1 memory hierarchy at {memory}")
    own = memory / cpulimit.own_groups(self_cgroup).get("memory", "/").lstrip("/")
    if not (own.is_dir() and os.access(own, os.W_OK)):
        return MemoryLayout(0, None, f"this user may not create groups in {own}")
    return MemoryLayout(1, own)


def _v1_cluster(layout: MemoryLayout, cluster_id: str) -> Path:
    # Straight under this process's own group, one level per cluster that goes with it: no
    # shared level stays behind in a group the caller's own supervisor may want to remove.
    return layout.base / f"shoal-{cluster_id}"


def paths(layout: MemoryLayout, cluster_id: str, node: str) -> list[str]:
    """The groups ``create`` makes for a device beyond its CPU groups (v1 only; v2 limits the
    CPU groups' device group), the device's first, for the cluster's record."""
    if layout.version != 1:
        return []
    return [str(_v1_cluster(layout, cluster_id) / node), str(_v1_cluster(layout, cluster_id))]


def _write(path: Path, value: str) -> None:
    cpulimit.write_control(path, value, what="device memory")


def create(layout: MemoryLayout, cluster_id: str, node: str, limit_B: int) -> str:
    """Make (v1) or limit (v2) a device's memory group; returns the group holding the limit.
    v2 expects the device's CPU groups made (cpulimit.create)."""
    if layout.version == 2:
        # memory enabled down to the device's parent: shoal's group and the cluster's.
        levels = [layout.base.parent, layout.base, layout.base / cluster_id]
        for level in levels:
            if "memory" not in (level / "cgroup.subtree_control").read_text().split():
                _write(level / "cgroup.subtree_control", "+memory")
        group = layout.base / cluster_id / node
        _write(group / "memory.max", str(limit_B))
        if (group / "memory.swap.max").exists():
            _write(group / "memory.swap.max", "0")
        return str(group)
    group = _v1_cluster(layout, cluster_id) / node
    try:
        group.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ShoalError(f"cannot create {group}: {exc.strerror}") from exc
    _write(group / "memory.limit_in_bytes", str(limit_B))
    if (group / "memory.memsw.limit_in_bytes").exists():
        # mem+swap no higher than memory alone: the device never swaps.
        _write(group / "memory.memsw.limit_in_bytes", str(limit_B))
    return str(group)


def read_limit(group: str, version: int) -> int | None:
    """The limit a group holds, as the kernel reports it (it rounds to whole pages)."""
    name = "memory.max" if version == 2 else "memory.limit_in_bytes"
    try:
        text = Path(group, name).read_text().strip()
    except OSError:
        return None
    return None if text == "max" else int(text)
