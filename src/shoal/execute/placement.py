"""How ranks are placed: one configuration per rank count here, or per node
count on a cluster, and the limits checked before anything starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal.errors import ShoalError
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
    # The ranks on each node in turn where they differ (a mixed job: --ranks-per-device).
    per_node: tuple[int, ...] | None = None

    @property
    def ranks(self) -> int:
        return sum(self.per_node) if self.per_node else self.nodes * self.ranks_per_node

    @property
    def rank_counts(self) -> int | list[int]:
        """What a cluster's job takes: one count for every node, or one per node."""
        return list(self.per_node) if self.per_node else self.ranks_per_node

    @property
    def most_per_node(self) -> int:
        return max(self.per_node) if self.per_node else self.ranks_per_node


def parse_ranks_per_device(text: str) -> dict[str, int]:
    """``stb=1,xeon-blade=8``: device profile -> ranks on each device of it."""
    from shoal.inputs import grammar

    out: dict[str, int] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            count = grammar.integer(value.strip(), grammar.Bounds(1, grammar.MAX_SLOTS)) if sep else None
        except grammar.GrammarError as exc:
            raise ShoalError(f"--ranks-per-device {item.strip()}: {exc}") from None
        if not name.strip() or count is None:
            raise ShoalError(f"--ranks-per-device {text!r}: give PROFILE=N,... (e.g. stb=1,xeon-blade=8)")
        out[name.strip().lower()] = count
    return out


def config_placements(request: Any, every_count: bool = False) -> list[Placement]:
    """One placement per ``ranks`` on this machine, or per ``nodes`` count on a
    cluster (by default all its nodes; ``every_count``: 1..all)."""
    from shoal import cluster as clusters

    label = request.config_label
    if not request.on_cluster:
        return [Placement(label, 1, r) for r in request.ranks]
    devices = request.inventory().nodes
    size = len(devices)
    default = f"1..{size}" if every_count else str(size)
    counts = clusters.parse_nodes(request.nodes or default, size)
    if request.ranks_per_device:
        return [Placement(label, n, max(request.ranks_on(devices[:n])), per_node=request.ranks_on(devices[:n]))
                for n in counts]
    return [Placement(label, n, request.ranks_per_node) for n in counts]


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
        names = p.node_names or [n.name for n in inv.nodes[:p.nodes]]
        for name, count in zip(names, p.per_node or [p.ranks_per_node] * len(names)):
            per_device[name] = max(per_device.get(name, 0), count)
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
