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
import dataclasses
from dataclasses import dataclass
from typing import Any

from shoal import environment
from shoal.cluster import inventory as _inventory
from shoal.cluster import hostengine, hostspeed, liveness, remote, rules
from shoal.cluster import emulated as _emulated
from shoal.cluster.emulated import SUBNET, EmulatedCluster
from shoal.cluster.spread import SpreadCluster
from shoal.errors import ShoalError
from shoal.mpi.discover import MPIInstall
from shoal.mpi.launch import HostSlots, Job


def transport_env(mpi: MPIInstall) -> tuple[dict[str, str], list[str]]:
    """(rank environment, launcher options) that force traffic onto the emulated links.

    Shared memory between devices must not be used, or messages would bypass
    the shaped links; each MPI's module says how (``namespace_transport``).
    """
    return mpi.impl.namespace_transport(str(SUBNET))


LAYOUTS = ("box", "head")  # where the MPI's launch daemons run (Cluster.job)
SHARED_PREFIX = "switch:"  # power nodes shared by every configuration (a switch's draw)
EMULATED_WAIT = "event"  # how ranks wait on devices whose CPU quota polling would use up


@dataclass(frozen=True)
class NodePower:
    """How one node's power is measured: a ``--power`` spec, opened on this machine
    or, when ``remote`` is given, by a sampler started on the node with that argv prefix."""

    node: str
    spec: str
    remote: tuple[str, ...] = ()
    named: bool = True  # samples carry ``node``; False: this machine's host name


def _head_launch(mpi: MPIInstall, chosen: list, counts: list[int], env: dict[str, str]):
    """The MPI's head-side launch for ``chosen`` (``counts`` ranks each): (its settings, the
    launcher's extra arguments, the "NODE:K,..." layout ranks fill); ``env`` gains the
    ranks' transport and launch variables."""
    head = mpi.impl.head_launch(str(SUBNET), kinds=len({n.profile.name for n in chosen}))
    if head is None:
        raise ShoalError(f"{mpi.name} has no head-side launch; use the default layout")
    transport, extra = transport_env(mpi)
    env.update({**transport, **head.rank_env})
    return head, extra, ",".join(f"{n.name}:{c}" for n, c in zip(chosen, counts))


def _models_only(spec: str) -> None:
    if spec not in ("auto", "model"):
        raise ShoalError(f"--power {spec}: emulated devices have no sensors of their own; "
                         "use --power model (each device's profile, driven by its CPU use)")


def _modelled(node, usage: tuple[str, float] | None) -> NodePower:
    """A device's power: its profile's model, driven by what counts its CPU time (``usage``:
    the counter and the device's CPU budget)."""
    if usage is None:
        raise ShoalError(f"nothing counts {node.name}'s CPU time, so its power cannot be "
                         "modelled; is the emulated cluster up?")
    where, budget_cpus = usage
    return NodePower(node.name, f"model:{node.profile.idle_W},{node.profile.busy_W},"
                                f"cores={budget_cpus:.6g},{where}")


class Cluster:
    """Where ranks run: the one protocol every kind of cluster implements.

    Callers (bench, study, power, workloads) ask the cluster: its nodes and
    slots (``nodes``, ``size``, ``select``), how to launch ranks on the first
    k nodes (``job``: hosts, launcher, rank environment), whether its hosts
    are ready (``check_ready``), how each node's power is measured
    (``node_power``), how it comes up and goes down (a context manager), and
    what the run manifest records (``describe``). They never test its kind.
    """

    kind = ""  # recorded as "mode" in manifests; compared only inside this package
    # The ranks write files this process reads (per-rank telemetry): they run on this host.
    shares_files = False

    def __init__(self, inventory: _inventory.Inventory | None) -> None:
        self.inventory = inventory
        self.emulated: EmulatedCluster | None = None  # set by emulated devices
        self.preflight: list[str] = []
        # How a job's large MPI_Bcast travels: "mpi" or "multicast" (shoal.cluster.plantcast).
        self.bcast = "mpi"

    @property
    def nodes(self) -> list[_inventory.Node]:
        return list(self.inventory.nodes) if self.inventory else []

    @property
    def dilation(self) -> float:
        """How many times slower than real time the cluster runs (1 unless emulated)."""
        return float(getattr(self.emulated, "dilation", 1.0)) if self.emulated else 1.0

    @property
    def size(self) -> int:
        return len(self.inventory.nodes) if self.inventory else 1

    def up(self) -> None:
        """Bring the cluster up (nothing to do for hosts that are already there)."""

    def down(self) -> None:
        """Undo ``up``; safe to call twice."""

    def __enter__(self) -> "Cluster":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.down()

    def job(self, mpi: MPIInstall, nodes: int, argv: list[str],
            ranks_per_node: int | list[int] = 1, rank_env: dict[str, str] | None = None,
            names: list[str] | None = None, wildcard: bool = False, layout: str = "box") -> Job:
        """A launch.Job on the first ``nodes`` nodes (or the nodes ``names``),
        ``ranks_per_node`` ranks on each, or a list: that many on each node in turn
        (ranks fill the nodes in order). ``wildcard``: its ranks receive from
        MPI_ANY_SOURCE (the cluster may need another transport for that). ``layout``:
        "box", the MPI's own launch (a daemon on every node), or "head" (emulated
        clusters: the daemon stays in the head and starts each rank into its device)."""
        if layout not in LAYOUTS:
            raise ShoalError(f"launch layout {layout!r}: use one of {', '.join(LAYOUTS)}")
        if nodes < 1 or nodes > self.size:
            raise ShoalError(f"asked for {nodes} nodes but the cluster has {self.size}; "
                             f"use --nodes within 1..{self.size}")
        counts = list(ranks_per_node) if isinstance(ranks_per_node, list) else [ranks_per_node] * nodes
        if len(counts) != nodes:
            raise ShoalError(f"{len(counts)} rank counts for {nodes} nodes; give one per node")
        if min(counts) < 1:
            raise ShoalError("ranks per node must be at least 1")
        chosen = self.select(names)[:nodes] if names else self.nodes[:nodes]
        if layout == "head":
            job = self._head_job(mpi, chosen, counts, list(argv), dict(rank_env or {}))
        else:
            job = self._job(mpi, chosen, counts, list(argv), dict(rank_env or {}))
        if wildcard:
            job.rank_env.update(self._wildcard_env(mpi))
        # Rank 0's output to the file server its device writes to, where it has one.
        job.rank_env.update(self._storage_env(chosen[0]))
        if self.dilation != 1.0:
            # libshoalwait's durations are the device's: its sleeps stretch with the clock.
            job.rank_env.setdefault(environment.WAIT_DILATION.name, f"{self.dilation:.9g}")
        if self.bcast == "multicast":
            from shoal.cluster import plantcast

            links = [node.link for node in chosen]
            if plantcast.applies_to(links):
                job.rank_env = plantcast.preloaded(job.rank_env, plantcast.rank_env(mpi, links, self.dilation))
        return job

    def _head_job(self, mpi: MPIInstall, chosen: list, counts: list[int], argv: list[str],
                  env: dict[str, str]) -> Job:
        raise ShoalError("the head launch layout needs an emulated cluster (its head "
                         "namespace); real hosts run the MPI's own launch")

    def _wildcard_env(self, mpi: MPIInstall) -> dict[str, str]:
        """Rank environment a job receiving from any source needs here (none on real hosts)."""
        return {}

    def _storage_env(self, first) -> dict[str, str]:
        """Rank environment naming the file server a job whose rank 0 is on ``first`` writes
        its output to (none on real hosts: their output stays where their rank 0 runs)."""
        return {}

    def _job(self, mpi: MPIInstall, chosen: list, counts: list[int], argv: list[str],
             env: dict[str, str]) -> Job:
        """The job with ``counts[i]`` ranks on ``chosen[i]``."""
        raise NotImplementedError

    def node_names(self, nodes: int) -> list[str]:
        """Names of the first ``nodes`` nodes (what power and results are keyed by)."""
        return [n.name for n in self.nodes[:nodes]]

    def switches(self) -> list:
        """The switches (access points, gateways) the nodes' links name, each once."""
        return self.inventory.switches() if self.inventory is not None else []

    def switch_power(self) -> list[NodePower]:
        """The switches' draw, once each: a constant (idle_W = busy_W in the model, their
        draw barely follows traffic), charged to every configuration of the cluster."""
        return [NodePower(f"{SHARED_PREFIX}{s.name}", f"model:{s.idle_W},{s.idle_W}")
                for s in self.switches()]

    def node_switches(self) -> dict[str, str]:
        """The switch each node's link goes through (nodes whose link names none are left out)."""
        if self.inventory is None:
            return {}
        return {node.name: node.link.switch for node in self.inventory.nodes if node.link.switch}

    def slack_monitor(self):
        """A context manager that watches whether the host gives emulated devices their CPU
        (``slack.Monitor``); on real hardware there is nothing to watch (None)."""
        if self.emulated is not None:
            return self.emulated.slack_monitor()
        return contextlib.nullcontext()

    def liveness(self):
        """A context manager whose ``lost()`` names a host that stopped answering while the
        run went on (``liveness.Watch``); only real hosts reached over ssh are asked."""
        return liveness.NoWatch()

    def background_counters(self) -> dict:
        """What the devices' backgrounds have done since the cluster came up (decoded, late and
        dropped frames, stream bytes: ``cluster.background.counters``); {} where none runs."""
        if self.emulated is not None:
            return self.emulated.background_counters()
        return {}

    def storage_counters(self) -> dict:
        """What each file server the devices write to has stored since the cluster came up
        (files, bytes, blocks: ``cluster.storage.counters``); {} where there is none."""
        if self.emulated is not None:
            from shoal.cluster import state, storage

            return storage.counters(state.read(self.emulated.id) or self.emulated.record)
        return {}

    def device_core_share(self, name: str) -> float:
        """Host CPU seconds per CPU second of node ``name``'s own cores: the share of a host
        core each of its cores is held to (an emulated device); 1 for a real host."""
        return 1.0

    def default_wait(self, ranks_per_node: int = 1, names: list[str] | None = None) -> str | None:
        """The libshoalwait mode ranks run under when none is asked for (None: not loaded),
        with ``ranks_per_node`` ranks on the first nodes or the nodes ``names``."""
        return None

    def select(self, names: list[str]) -> list:
        """The inventory's nodes with these names, in the order given."""
        by_name = {n.name: n for n in self.nodes}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise ShoalError(f"no node named {', '.join(missing)} in the cluster "
                             f"(nodes: {', '.join(by_name) or 'none'})")
        return [by_name[n] for n in names]

    def check_ready(self, mpi: MPIInstall, program: str | None = None) -> None:
        """Raise ShoalError naming every host that cannot run the job (no-op where all is local)."""

    def node_power(self, spec: str) -> list[NodePower]:
        """How to measure every node's power for the ``--power`` spec."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """What the run manifest records: nodes, profiles, links, emulation and calibration."""
        return {**self.inventory.describe(), "switches": [s.describe() for s in self.switches()],
                "preflight": self.preflight}


class LocalCluster(Cluster):
    """This machine only: ranks start with the MPI's own launcher, no host list."""

    kind = "local"
    shares_files = True

    def __init__(self) -> None:
        super().__init__(None)

    def _job(self, mpi, chosen, counts, argv, env) -> Job:
        return Job(mpi, sum(counts), argv, env)

    def node_power(self, spec: str) -> list[NodePower]:
        return [NodePower("local", spec, named=False)]

    def describe(self) -> dict[str, Any]:
        return {"mode": self.kind}


class EmulatedDevices(Cluster):
    """Devices emulated here: namespaces, shaped links and cgroup CPU limits (``emulated.py``)."""

    kind = "emulated"
    shares_files = True

    def __init__(self, inventory: _inventory.Inventory, emulated: EmulatedCluster,
                 owns: bool = False) -> None:
        super().__init__(inventory)
        self.emulated = emulated
        self._owns = owns

    def up(self) -> None:
        if self._owns:
            self.emulated.up()

    def down(self) -> None:
        if self._owns:
            self.emulated.down()
            self._owns = False

    def _job(self, mpi, chosen, counts, argv, env) -> Job:
        transport, extra = transport_env(mpi)
        env.update(transport)
        hosts = [HostSlots(n.name, c) for n, c in zip(chosen, counts)]
        # Each rank onto a core of its device (its own CPU budget), by its local rank.
        placed = [self.emulated.placement, mpi.impl.local_rank_variable or "-",
                  *argv]
        return Job(mpi, sum(counts), placed, env, hosts=hosts,
                   launcher_exec=self.emulated.launcher, extra_args=extra,
                   exec_prefix=self.emulated.head_prefix(), on_this_host=True)

    def _head_job(self, mpi, chosen, counts, argv, env) -> Job:
        """Every rank started by the launcher's daemon in the head namespace, each through
        the launcher helper into its device by rank number (``nsexec --rank``), then onto
        its core; nothing of the MPI's runtime runs in a device but the rank."""
        head, extra, layout = _head_launch(mpi, chosen, counts, env)
        placed = [*self.emulated.rank_prefix(head.rank_variable, layout),
                  self.emulated.placement, environment.DEVICE_RANK.name, *argv]
        return Job(mpi, sum(counts), placed, env, launcher_env=dict(head.launcher_env),
                   extra_args=[*head.launcher_args, *extra],
                   exec_prefix=self.emulated.head_prefix(), on_this_host=True)

    def _wildcard_env(self, mpi: MPIInstall) -> dict[str, str]:
        return mpi.impl.wildcard_transport()

    def _storage_env(self, first) -> dict[str, str]:
        from shoal.cluster import state, storage

        return storage.rank_env(state.read(self.emulated.id) or self.emulated.record, first.name)

    def default_wait(self, ranks_per_node: int = 1, names: list[str] | None = None) -> str | None:
        # Ranks that poll while they wait, more of them than a device has CPUs of
        # budget, spend its quota waiting and then stall until the quota's next
        # period (a 1 KiB ping-pong read 4 ms instead of 0.25 ms at dilation 2):
        # there they sleep until a socket event. Where the budget covers every
        # rank's polling, they poll, as the MPI does on the real device (the
        # wake-up would add 20-60 us to every small message).
        nodes = self.select(names) if names else self.nodes
        if any(self.emulated.polling_stalls(n.name, ranks_per_node) for n in nodes):
            return EMULATED_WAIT
        return None

    def device_core_share(self, name: str) -> float:
        return self.emulated.device_core_share(name)

    def node_power(self, spec: str) -> list[NodePower]:
        """Each device's profile model, driven by the CPU time its cgroup (or namespace) counts."""
        _models_only(spec)
        return [_modelled(node, self.emulated.usage_counter(node.name)) for node in self.nodes] \
            + self.switch_power()

    def describe(self) -> dict[str, Any]:
        return {"mode": self.kind, **self.emulated.describe(),
                "switches": [s.describe() for s in self.switches()],
                "node_stacks": "the host's: emulated devices run on this host's kernel and "
                               "distribution (the manifest's stack); a device's OS noise is in its node"}


# Each share's placement program (``oncore``) is at a path of its own host; the device's
# launcher helper says where (DEVICE_PLACEMENT), so one rank command line serves every host.
_ON_ITS_HOSTS_PLACEMENT = ["/bin/sh", "-c", f'exec "${{{environment.DEVICE_PLACEMENT.name}:?not started in a device}}" "$@"',
                           "oncore"]


class SpreadDevices(Cluster):
    """Devices emulated on several hosts (``cluster up --hosts``): ranks start from the
    cluster's head through the launcher helper into devices of every host (``spread``)."""

    kind = "spread"

    def __init__(self, spread: SpreadCluster) -> None:
        super().__init__(spread.inventory)
        self.spread = spread

    @property
    def dilation(self) -> float:
        return self.spread.dilation

    def _job(self, mpi, chosen, counts, argv, env) -> Job:
        self._no_multicast()
        transport, extra = transport_env(mpi)
        env.update(transport)
        placed = [*_ON_ITS_HOSTS_PLACEMENT, mpi.impl.local_rank_variable or "-", *argv]
        return Job(mpi, sum(counts), placed, env, hosts=[HostSlots(n.name, c) for n, c in zip(chosen, counts)],
                   launcher_exec=self.spread.launcher,
                   extra_args=[*extra, *mpi.impl.launcher_from_mpiexec_only()],
                   exec_prefix=self.spread.head_prefix())

    def _no_multicast(self) -> None:
        if self.bcast == "multicast":
            # The hosts' forwarders keep group frames on their own host.
            raise ShoalError("--bcast multicast needs the devices on one host: a cluster spread "
                             "over hosts carries no multicast between them; leave --bcast out")

    def _head_job(self, mpi, chosen, counts, argv, env) -> Job:
        """As on one host (``EmulatedDevices._head_job``): the launcher's daemon stays in the
        cluster's head and starts every rank, here through the launcher helper, which takes
        a rank on another host there as it takes a daemon (srun or ssh, with the rank's
        environment), then onto its core by its host's placement program."""
        self._no_multicast()
        head, extra, layout = _head_launch(mpi, chosen, counts, env)
        placed = [*self.spread.rank_prefix(head.rank_variable, layout), *_ON_ITS_HOSTS_PLACEMENT,
                  environment.DEVICE_RANK.name, *argv]
        return Job(mpi, sum(counts), placed, env,
                   launcher_env=dict(head.launcher_env), extra_args=[*head.launcher_args, *extra],
                   exec_prefix=self.spread.head_prefix(), on_this_host=True)

    def default_wait(self, ranks_per_node: int = 1, names: list[str] | None = None) -> str | None:
        nodes = self.select(names) if names else self.nodes
        entries = self.spread.record.get("nodes", {})
        if any(_emulated._polling_stalls(self.spread.limited(), float(entries[n.name].get("cpu_fraction", 1)),
                                         int(entries[n.name].get("cores", 1)), ranks_per_node) for n in nodes):
            return EMULATED_WAIT
        return None

    def device_core_share(self, name: str) -> float:
        return _emulated.held_core_share(self.spread.limited(), self.spread.record.get("nodes", {}).get(name, {}),
                                         self.dilation)

    def liveness(self):
        # The hosts of an ssh inventory are asked as real hosts are; Slurm watches its own.
        engine = hostengine.from_record(self.spread.record["hosts"])
        if engine.kind == hostengine.SLURM:
            return liveness.NoWatch()
        return liveness.Watch([engine.addresses[h] for h in self.spread.record["shares"]])

    def node_power(self, spec: str) -> list[NodePower]:
        """Each device's profile model, driven by the CPU time its cgroup (or namespace)
        counts, sampled on its host, in its share's head (``SpreadCluster.in_share``)."""
        _models_only(spec)
        entries = self.spread.record.get("nodes", {})
        return [dataclasses.replace(_modelled(node, _emulated.usage_of(entries.get(node.name, {}))),
                                    remote=tuple(self.spread.in_share(entries[node.name]["host"])))
                for node in self.nodes] + self.switch_power()

    def describe(self) -> dict[str, Any]:
        return {**self.spread.describe(), "mode": self.kind,
                "switches": [s.describe() for s in self.switches()],
                "node_stacks": "the hosts': emulated devices run on their hosts' kernels"}


def attach(cluster_id: str) -> "EmulatedCluster | SpreadCluster":
    """A cluster brought up with ``shoal cluster up``: on this host, or spread over hosts."""
    from shoal.cluster import multihost, state

    record = state.read(cluster_id)
    if record is not None and multihost.is_spread(record):
        return SpreadCluster(record, _emulated.inventory_from_description(record["inventory"],
                                                                           f"cluster {cluster_id}"))
    return _emulated.attach(cluster_id)


class SshHosts(Cluster):
    """Real hosts reached with ssh (or SHOAL_SSH) by the MPI's own launcher."""

    kind = "ssh"
    _stacks: dict[str, dict] | None = None

    def _job(self, mpi, chosen, counts, argv, env) -> Job:
        hosts = [HostSlots(n.address, c) for n, c in zip(chosen, counts)]
        return Job(mpi, sum(counts), argv, env, hosts=hosts, launcher_exec=self._launcher())

    def _launcher(self) -> str | None:
        return remote.ssh_override()

    def liveness(self):
        return liveness.Watch([n.address for n in self.nodes])

    def check_ready(self, mpi: MPIInstall, program: str | None = None) -> None:
        self._stacks = {}
        problems = remote.preflight(self.inventory, mpi, program, self._stacks)
        if problems:
            raise ShoalError("hosts not ready: " + " | ".join(problems))

    def node_power(self, spec: str) -> list[NodePower]:
        # A sampler on each host, over the same ssh the launcher uses; the switch modelled here.
        return [NodePower(n.name, spec, (remote.ssh_program(), "-o", "BatchMode=yes", n.address))
                for n in self.nodes] + self.switch_power()

    def describe(self) -> dict[str, Any]:
        """With each host's own stack (kernel, configuration, governor: they may differ),
        as the hosts answered the check before the run."""
        return {**super().describe(),
                "node_stacks": self._stacks if self._stacks is not None else "not read (hosts not checked)"}


class SlurmAllocation(SshHosts):
    """The hosts of the current Slurm allocation; the MPI launcher uses its Slurm support."""

    kind = "slurm"

    def _launcher(self) -> str | None:
        return None

    def check_ready(self, mpi: MPIInstall, program: str | None = None) -> None:
        """Slurm already placed the job on hosts it manages: each host's stack is read there,
        by one srun task per host."""
        self._stacks = remote.slurm_stacks([n.address for n in self.nodes])

    def liveness(self):
        # Slurm watches its own nodes (a node that fails ends the job step); its hosts need
        # not take ssh.
        return liveness.NoWatch()


def open(emulate: str | None = None, link: str | None = None, inventory: str | None = None,
         attach_to: str | None = None, host_speed: float | None = None,
         calibrate: bool = True, dilation: float | None = None,
         at_once: list[tuple[str, ...]] | None = None, recalibrate: bool = False,
         mpi: str | None = None) -> Cluster:
    """Describe where ranks run; a context manager brings an emulated cluster up and down.

    ``emulate`` ("4xminnowboard+1xnuc") or an inventory file with mode
    "emulated" builds a cluster here, ``dilation`` times slower than real time
    (None: the smallest whole factor at which its devices fit this host); ``attach_to`` uses one started by
    ``shoal cluster up``; an inventory with mode "ssh" or "slurm" describes
    real hosts; nothing at all means this machine only. ``at_once`` lists the
    sets of emulated devices that compute at the same time (None: all), so the
    automatic dilation fits the largest of them rather than every device at once.
    Emulated devices are held against this host's speed (``host_speed`` as given, else the
    inventory's, else measured with ``mpi``'s workload program: shoal.cluster.hostspeed).
    """
    rules.one_cluster(emulate, inventory, attach_to)
    if attach_to:
        rules.dilation_applies(dilation, "attached", True)
        emulated = attach(attach_to)
        if isinstance(emulated, SpreadCluster):
            return SpreadDevices(emulated)
        return EmulatedDevices(emulated.inventory, emulated, owns=False)
    if not (emulate or inventory):
        rules.dilation_applies(dilation, "local", False)
        return LocalCluster()
    inv = emulated_inventory(emulate, inventory, link, host_speed)
    if inv.mode == "emulated":
        host = hostspeed.resolve(inv.host_speed, mpi, recalibrate)
        return EmulatedDevices(inv, EmulatedCluster(inv, calibrate=calibrate, dilation=dilation,
                                                    at_once=at_once, host=host), owns=True)
    rules.dilation_applies(dilation, "inventory", False, inventory, inv.mode)
    if inv.mode == "slurm":
        return SlurmAllocation(remote.slurm_inventory(inv))
    return SshHosts(inv)


def emulated_inventory(emulate: str | None, inventory: str | None, link: str | None,
                        host_speed: float | None) -> _inventory.Inventory:
    """The nodes of ``--emulate SPEC`` or of an inventory file, with the host speed asked for."""
    if emulate:
        return _inventory.from_emulate(emulate, link, host_speed)
    rules.link_needs_emulate(link, emulate)
    inv = _inventory.load(inventory)
    if host_speed is not None:
        inv.host_speed = host_speed
    return inv


def bring_up(emulate: str | None, inventory: str | None, link: str | None = None,
             host_speed: float | None = None, name: str | None = None,
             calibrate: bool = True, dilation: float | None = None,
             recalibrate: bool = False, mpi: str | None = None) -> EmulatedCluster:
    """An emulated cluster that stays up after the command (``shoal cluster up``)."""
    rules.up_needs_one(emulate, inventory)
    inv = emulated_inventory(emulate, inventory, link, host_speed)
    if inv.mode != "emulated":
        raise ShoalError(f"{inventory}: mode is {inv.mode!r}; 'cluster up' builds emulated "
                         "clusters (set [cluster] mode = \"emulated\")")
    host = hostspeed.resolve(inv.host_speed, mpi, recalibrate)
    return EmulatedCluster(inv, name, persistent=True, calibrate=calibrate, dilation=dilation,
                           host=host).up()


def parse_nodes(text: str, available: int | None = None) -> list[int]:
    """Parse ``--nodes``: ``4``, ``1..4``, ``1..8:2`` (step) or ``1,2,4,6``; sorted, unique."""
    from shoal.inputs import grammar

    return grammar.parse("--nodes", grammar.counts, text, 1, available, what="node count")
