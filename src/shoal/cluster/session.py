"""The cluster a command runs on: local, emulated, ssh hosts or a Slurm allocation.

This is the API the benchmark driver uses for node-count sweeps::

    with cluster.open(emulate="4xminnowboard") as c:
        for k in cluster.parse_nodes("1..4", c.size):
            job = c.job(mpi, nodes=k, ranks_per_node=1, argv=[...])
            argv, env = job.command()
        manifest["cluster"] = c.describe()
"""

from __future__ import annotations

import contextlib
from typing import Any

from shoal.cluster import inventory as _inventory
from shoal.cluster import remote
from shoal.cluster.emulated import SUBNET, EmulatedCluster, attach
from shoal.errors import ShoalError
from shoal.mpi.discover import MPIInstall
from shoal.mpi.launch import HostSlots, Job


def transport_env(mpi: MPIInstall) -> tuple[dict[str, str], list[str]]:
    """(rank environment, launcher options) that force traffic onto the emulated links.

    Shared memory between devices must not be used, or messages would bypass
    the shaped links; each MPI's module says how (``namespace_transport``).
    """
    return mpi.impl.namespace_transport(str(SUBNET))


class Cluster:
    """Nodes in order and how to start ranks on the first k of them."""

    def __init__(self, inventory: _inventory.Inventory | None,
                 emulated: EmulatedCluster | None = None, owns: bool = False) -> None:
        self.inventory = inventory
        self.emulated = emulated
        self._owns = owns
        self.preflight: list[str] = []

    @property
    def kind(self) -> str:
        if self.inventory is None:
            return "local"
        return self.inventory.mode

    @property
    def dilation(self) -> float:
        """How many times slower than real time the cluster runs (1 unless emulated)."""
        return float(getattr(self.emulated, "dilation", 1.0)) if self.emulated else 1.0

    @property
    def size(self) -> int:
        return len(self.inventory.nodes) if self.inventory else 1

    def __enter__(self) -> "Cluster":
        if self.emulated is not None and self._owns:
            self.emulated.up()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.emulated is not None and self._owns:
            self.emulated.down()
            self._owns = False

    def job(self, mpi: MPIInstall, nodes: int, argv: list[str], ranks_per_node: int = 1,
            rank_env: dict[str, str] | None = None, names: list[str] | None = None) -> Job:
        """A launch.Job on the first ``nodes`` nodes (or the nodes ``names``),
        ``ranks_per_node`` ranks on each."""
        if nodes < 1 or nodes > self.size:
            raise ShoalError(f"asked for {nodes} nodes but the cluster has {self.size}; "
                             f"use --nodes within 1..{self.size}")
        if ranks_per_node < 1:
            raise ShoalError("ranks per node must be at least 1")
        env = dict(rank_env or {})
        if self.inventory is None:
            return Job(mpi, nodes * ranks_per_node, list(argv), env)
        chosen = self.select(names)[:nodes] if names else self.inventory.nodes[:nodes]
        if self.kind == "emulated":
            if self.emulated is None:
                raise ShoalError("emulated cluster is not up")
            transport, extra = transport_env(mpi)
            env.update(transport)
            hosts = [HostSlots(n.name, ranks_per_node) for n in chosen]
            return Job(mpi, nodes * ranks_per_node, list(argv), env, hosts=hosts,
                       launcher_exec=self.emulated.launcher, extra_args=extra,
                       exec_prefix=self.emulated.head_prefix())
        hosts = [HostSlots(n.address, ranks_per_node) for n in chosen]
        return Job(mpi, nodes * ranks_per_node, list(argv), env, hosts=hosts,
                   launcher_exec=remote.launcher_for(self.kind))

    def switches(self) -> list:
        """The switches (access points, gateways) the nodes' links name, each once."""
        from shoal.cluster import profiles

        if self.inventory is None:
            return []
        seen: dict[str, object] = {}
        for node in self.inventory.nodes:
            switch = profiles.switch_of(node.link)
            if switch is not None:
                seen.setdefault(switch.name, switch)
        return list(seen.values())

    def slack_monitor(self):
        """A context manager that watches whether the host gives emulated devices their CPU
        (``slack.Monitor``); on real hardware there is nothing to watch (None)."""
        if self.emulated is not None:
            return self.emulated.slack_monitor()
        return contextlib.nullcontext()

    def select(self, names: list[str]) -> list:
        """The inventory's nodes with these names, in the order given."""
        by_name = {n.name: n for n in (self.inventory.nodes if self.inventory else [])}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise ShoalError(f"no node named {', '.join(missing)} in the cluster "
                             f"(nodes: {', '.join(by_name) or 'none'})")
        return [by_name[n] for n in names]

    def describe(self) -> dict[str, Any]:
        """What the run manifest records: nodes, profiles, links, emulation and calibration."""
        if self.inventory is None:
            return {"mode": "local"}
        switches = [s.describe() for s in self.switches()]
        if self.emulated is not None:
            return {"mode": "emulated", **self.emulated.describe(), "switches": switches}
        return {**self.inventory.describe(), "switches": switches, "preflight": self.preflight}


def open(emulate: str | None = None, link: str | None = None, inventory: str | None = None,
         attach_to: str | None = None, host_speed: float | None = None,
         calibrate: bool = True, dilation: float | None = None) -> Cluster:
    """Describe where ranks run; a context manager brings an emulated cluster up and down.

    ``emulate`` ("4xminnowboard+1xnuc") or an inventory file with mode
    "emulated" builds a cluster here, ``dilation`` times slower than real time
    (None: the smallest whole factor at which its devices fit this host); ``attach_to`` uses one started by
    ``shoal cluster up``; an inventory with mode "ssh" or "slurm" describes
    real hosts; nothing at all means this machine only.
    """
    chosen = [x for x in (emulate, inventory, attach_to) if x]
    if len(chosen) > 1:
        raise ShoalError("give only one of --emulate, --cluster FILE or an emulated cluster id")
    if attach_to:
        if dilation is not None:
            raise ShoalError("--dilation is set when the cluster comes up ('shoal cluster up "
                             "--dilation D'), not when attaching to it")
        emulated = attach(attach_to)
        return Cluster(emulated.inventory, emulated, owns=False)
    if dilation is not None and not (emulate or inventory):
        raise ShoalError("--dilation applies to emulated clusters (--emulate SPEC)")
    if emulate:
        inv = _inventory.from_emulate(emulate, link, host_speed or 1.0)
        return Cluster(inv, EmulatedCluster(inv, calibrate=calibrate, dilation=dilation), owns=True)
    if inventory:
        inv = _inventory.load(inventory)
        if link is not None:
            raise ShoalError("--link applies to --emulate; set links in the inventory file instead")
        if host_speed:
            inv.host_speed = host_speed
        if inv.mode == "emulated":
            return Cluster(inv, EmulatedCluster(inv, calibrate=calibrate, dilation=dilation),
                           owns=True)
        if dilation is not None:
            raise ShoalError("--dilation applies to emulated clusters only")
        if inv.mode == "slurm":
            inv = remote.slurm_inventory(inv)
        return Cluster(inv)
    return Cluster(None)


def parse_nodes(text: str, available: int | None = None) -> list[int]:
    """Parse ``--nodes``: ``4``, ``1..4``, ``1..8:2`` (step) or ``1,2,4,6``; sorted, unique."""
    from shoal.inputs import grammar

    return grammar.parse("--nodes", grammar.counts, text, 1, available, what="node count")
