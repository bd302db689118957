"""How ranks are placed: one configuration per rank count here, or per node
count on a cluster, and the limits checked before anything starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal.execute.where import Where
from shoal.inputs import ranklimit


@dataclass(frozen=True)
class Placement:
    """One configuration: a label, how many nodes and ranks, and which nodes.

    ``node_names`` None means the first ``nodes`` nodes of the cluster (or
    this machine when there is no cluster).
    """

    label: str
    nodes: int
    ranks_per_node: int
    node_names: tuple[str, ...] | None = None
    # Charge the switches the nodes' links go through (False for a lone reference machine).
    with_shared: bool = True

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node


def config_placements(request: Any, every_count: bool = False) -> list[Placement]:
    """One placement per ``ranks`` on this machine, or per ``nodes`` count on a
    cluster (by default all its nodes; ``every_count``: 1..all)."""
    from shoal import cluster as clusters

    label = request.config_label
    if not request.on_cluster:
        return [Placement(label, 1, r) for r in request.ranks]
    size = len(request.inventory().nodes)
    default = f"1..{size}" if every_count else str(size)
    return [Placement(label, n, request.ranks_per_node)
            for n in clusters.parse_nodes(request.nodes or default, size)]


def check_ranks(request: Where, placements: list[Placement], buffer_B: float,
                smaller: str = "smaller --sizes") -> None:
    """Refuse rank counts beyond the slots, memory and process limits (before anything starts);
    ``buffer_B`` is what each rank allocates, ``smaller`` how to make it less."""
    if not request.on_cluster:
        for placement in placements:
            ranklimit.check(placement.ranks, buffer_B, oversubscribe=request.oversubscribe,
                            smaller=smaller)
        return
    inv = request.inventory()
    by_name = {n.name: n for n in inv.nodes}
    # Each placement on its own nodes: a study's reference device runs its own rank count.
    per_device: dict[str, int] = {}
    for p in placements:
        for name in (p.node_names or [n.name for n in inv.nodes[:p.nodes]]):
            per_device[name] = max(per_device.get(name, 0), p.ranks_per_node)
    checked: set[tuple] = set()
    for name, per_node in per_device.items():
        node = by_name[name]
        # Devices alike (a profile, its slots, the same ranks) pass or fail alike: the host's
        # limits are read once per kind, not once per box of a 128-box plant.
        kind = (per_node, node.slots, node.profile.name, node.profile.memory_B)
        if kind in checked:
            continue
        checked.add(kind)
        local = inv.runs_here  # every emulated device's ranks run on this machine
        ranklimit.check(per_node, buffer_B, slots=node.slots, where=f"node {node.name}",
                        option="--ranks-per-node", oversubscribe=request.oversubscribe,
                        host_ranks=max(p.ranks for p in placements) if local else None,
                        host=None if local else ranklimit.HostLimits(node.slots, None, None),
                        smaller=smaller)
        if node.profile.memory_B:  # the device's own memory, as on the real board
            ranklimit.check_device(per_node, buffer_B, node.profile.memory_B, smaller=smaller,
                                   where=f"node {node.name} ({node.profile.name} profile, memory_B)")
