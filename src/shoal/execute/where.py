"""Where a request's ranks run: one tagged description and the one check of it.

``Where`` is saved in the manifests of bench and work runs (its fields flat,
so older runs resume); its ``kind`` is the tag:

- ``local``: this machine, ranks counted with ``--ranks``;
- ``emulated``: devices emulated here from a shorthand (``--emulate 4xminnowboard``);
- ``inventory``: the nodes of an inventory file (``--cluster FILE``), emulated
  here when its mode is "emulated", else real hosts over ssh or Slurm;
- ``attached``: an emulated cluster already up (``shoal cluster up``).

``validate()`` is the one set of rules for these options, used by bench,
work, study and dsm before anything is started; ``open(run)`` gives the
running half, one ``execute.session.Session``.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from shoal.errors import ShoalError
from shoal.inputs import ranklimit

if TYPE_CHECKING:
    from shoal.cluster.hostspeed import HostSpeed
    from shoal.cluster.inventory import Inventory
    from shoal.execute.session import Session
    from shoal.runs.store import Run

KINDS = ("local", "emulated", "inventory", "attached")


@dataclass(kw_only=True)
class Where:
    """Where a request's ranks run, with which MPI, and what measures their energy."""

    mpi: str | None = None
    # An emulated cluster ("4xminnowboard"), an inventory file, an emulated cluster
    # already up, or none of them (this machine).
    emulate: str | None = None
    link: str | None = None
    cluster: str | None = None
    attach: str | None = None
    nodes: str | None = None
    ranks_per_node: int = 1
    # Energy: a power source spec (see shoal.power), and seconds of idle baseline before the run.
    power: str | None = None
    idle_s: float = 0.0
    # libshoalwait mode the ranks run under (None: not loaded).
    wait: str | None = None
    # Emulated clusters: how many times slower than real time (None: chosen to fit the host).
    dilation: float | None = None
    # Emulated clusters: this host's core in reference cores (None: measured and cached,
    # shoal.cluster.hostspeed), and whether to measure it again rather than use the cache.
    host_speed: float | None = None
    recalibrate: bool = False
    # Ranks per CPU (per device core on a cluster) at most; see shoal.inputs.ranklimit.
    oversubscribe: float = ranklimit.DEFAULT_OVERSUBSCRIBE
    # Where the MPI's launch daemons run: "box" (its own launch, one on every node) or
    # "head" (emulated clusters: in the head, starting each rank into its device).
    launch: str = "box"
    # How a large MPI_Bcast travels: "mpi" (the MPI's own tree) or "multicast" (emulated
    # clusters: down the medium once, shoal.cluster.plantcast).
    bcast: str = "mpi"
    # The clock: ``freq`` (Hz) holds emulated devices at that P-state, ``governor``
    # (performance, powersave) at their highest or lowest; both are folded into ``emulate``
    # (4xminnowboard@500M), so the devices carry their clock. On this machine ``governor``
    # is the kernel's, set for the run where permitted (shoal.cluster.governor).
    freq: float | None = None
    governor: str | None = None
    # What emulated devices keep doing beside their ranks, by device profile (--background
    # stb=mpeg2-sd: shoal.cluster.background); folded into ``emulate`` (8xstb@mpeg2-sd), so
    # the devices carry it as they carry their clock.
    background: dict[str, str] | None = None
    # Each profile's upstream service flow on a shared plant (--qos stb=10M, bit/s as typed:
    # shoal.cluster.qos); folded into ``emulate`` (8xstb@qos=10M) like ``background``.
    qos: dict[str, str] | None = None
    # The file server each profile's devices write their output to (--storage
    # xeon-blade=seed002-nas: shoal.cluster.storage); folded into ``emulate`` like ``qos``.
    storage: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if self.freq is not None and self.governor is not None:
            raise ShoalError(f"--freq and --governor {self.governor} both name a clock; give one")
        if self.emulate and (self.freq is not None or self.governor is not None):
            from shoal.profiles import clock

            self.emulate = clock.with_clock(self.emulate, clock.text(self.freq or self.governor))
            self.freq = self.governor = None
        if self.emulate and self.background:
            from shoal.cluster import background

            self.emulate = background.with_background(self.emulate, self.background)
            self.background = None
        if self.emulate and self.qos:
            from shoal.cluster import qos

            self.emulate = qos.with_qos(self.emulate, self.qos)
            self.qos = None
        if self.emulate and self.storage:
            from shoal.cluster import storage

            self.emulate = storage.with_storage(self.emulate, self.storage)
            self.storage = None
    # A mixed cluster's ranks by device profile (--ranks-per-device stb=1,xeon-blade=8): each
    # device runs its profile's count, as seed 002's one job over boxes and blades did.
    ranks_per_device: dict[str, int] | None = None

    @property
    def kind(self) -> str:
        """The tag: local, emulated, inventory or attached (the first given, as validate() checks)."""
        if self.emulate:
            return "emulated"
        if self.cluster:
            return "inventory"
        if self.attach:
            return "attached"
        return "local"

    @property
    def on_cluster(self) -> bool:
        return self.kind != "local"

    @property
    def config_label(self) -> str:
        if self.emulate:
            return self.emulate
        if self.cluster:
            return Path(self.cluster).stem
        if self.attach:
            return self.attach
        return "local"

    def inventory(self) -> "Inventory":
        """The nodes, read from their description (nothing is started)."""
        from shoal.cluster import inventory

        if self.kind == "emulated":
            return inventory.from_emulate(self.emulate, self.link)
        if self.kind == "inventory":
            from shoal.cluster import remote

            nodes = inventory.load(self.cluster)
            # Inside an allocation a Slurm inventory's nodes are the allocation's hosts (what
            # --nodes counts), each with its entry in the file, else the file's first node's.
            if nodes.mode == "slurm" and os.environ.get("SLURM_JOB_ID"):
                return remote.slurm_inventory(nodes)
            return nodes
        if self.kind == "attached":
            from shoal.cluster.session import attach

            return attach(self.attach).inventory
        raise ShoalError("this machine has no inventory; add --emulate SPEC or --cluster FILE")

    @property
    def named_emulated(self) -> bool:
        """Emulated devices by their name alone (--emulate, --attach), no file read."""
        return self.kind in ("emulated", "attached")

    def emulated_here(self) -> bool:
        """Whether the devices are emulated on this machine (so dilation applies)."""
        return self.kind in ("emulated", "attached") or (
            self.kind == "inventory" and self.inventory().mode == "emulated")

    def validate(self) -> None:
        """Refuse options that do not fit together, before anything is started."""
        from shoal.cluster import rules

        rules.one_cluster(self.emulate, self.cluster, self.attach)
        rules.link_needs_emulate(self.link, self.emulate)
        if self.ranks_per_node < 1:
            raise ShoalError(f"--ranks-per-node must be at least 1, got {self.ranks_per_node}")
        if self.nodes and not self.on_cluster:
            raise ShoalError("--nodes needs a cluster: add --emulate 4xminnowboard or --cluster FILE")
        # Before the dilation, which may measure this host's core first (and warn of it).
        from shoal.cluster import plantcast

        plantcast.refuse_unless_emulated(plantcast.check(self.bcast), self.kind)
        if self.bcast == "multicast" and self.kind == "emulated":
            plantcast.refuse_without_a_medium(self.bcast, [n.link for n in self.inventory().nodes])
        self._validate_dilation()
        self._validate_ranks_per_device()
        if self.kind == "emulated" or (self.kind == "inventory" and self.emulated_here()):
            from shoal.cluster import capacity

            devices = self.inventory().nodes
            # A mixed job's devices cost what their ranks do on average (capacity counts per rank).
            capacity.check(len(devices), sum(self.ranks_on(devices)) / len(devices))
        if self.power:
            from shoal.execute import meter

            meter.check_power(self)
        if self.wait:
            from shoal.wait import parse_mode

            parse_mode(self.wait)
        self._validate_launch()
        self._validate_clock()
        if self.background:   # folded into --emulate when there is one
            given = ",".join(f"{k}={v}" for k, v in self.background.items())
            raise ShoalError(f"--background {given} runs beside the ranks of devices emulated here: "
                             "add --emulate SPEC (a cluster already up keeps what it came up with: "
                             "'shoal cluster up --emulate 8xstb@mpeg2-sd')")
        if self.qos:
            given = ",".join(f"{k}={v}" for k, v in self.qos.items())
            raise ShoalError(f"--qos {given} sets the service flows of devices emulated here: add "
                             "--emulate SPEC (a cluster already up keeps its own: 'shoal cluster up "
                             "--emulate 8xstb@qos=10M')")
        if self.storage:
            given = ",".join(f"{k}={v}" for k, v in self.storage.items())
            raise ShoalError(f"--storage {given} gives devices emulated here a file server: add "
                             "--emulate SPEC (a cluster already up keeps its own: 'shoal cluster up "
                             "--emulate 8xxeon-blade@storage=seed002-nas')")

    def _validate_clock(self) -> None:
        """--freq is an emulated device's; --governor also this machine's (it must offer it)."""
        if self.freq is None and self.governor is None:
            return
        option = "--freq" if self.freq is not None else f"--governor {self.governor}"
        if self.kind != "local":
            raise ShoalError(f"{option}: the devices of {self.config_label} keep the clock they came up "
                             "with; give it with --emulate (e.g. --emulate 4xminnowboard@500M, or "
                             "'shoal cluster up --emulate 4xminnowboard@powersave')")
        if self.freq is not None:
            raise ShoalError("--freq holds emulated devices at a P-state: add --emulate SPEC; on this "
                             "machine use --governor performance|powersave")
        from shoal.cluster import governor

        governor.check(self.governor)

    def ranks_on(self, devices: list) -> tuple[int, ...]:
        """The ranks on each of ``devices`` (inventory nodes): their profile's count, or
        --ranks-per-node on every one."""
        if not self.ranks_per_device:
            return tuple(self.ranks_per_node for _ in devices)
        return tuple(self.ranks_per_device[d.profile.name] for d in devices)

    def _validate_ranks_per_device(self) -> None:
        """A mixed job places its ranks by profile: every profile of the cluster needs its count."""
        if not self.ranks_per_device:
            return
        given = ", ".join(f"{k}={v}" for k, v in self.ranks_per_device.items())
        if not self.on_cluster:
            raise ShoalError(f"--ranks-per-device {given} places ranks on a cluster's devices: add --emulate "
                             "SPEC, --cluster FILE or --attach ID (this machine takes --ranks)")
        if self.ranks_per_node != 1:
            raise ShoalError("--ranks-per-node and --ranks-per-device both place ranks; give one of them")
        profiles = list(dict.fromkeys(n.profile.name for n in self.inventory().nodes))
        missing = [p for p in profiles if p not in self.ranks_per_device]
        unknown = [p for p in self.ranks_per_device if p not in profiles]
        if missing or unknown:
            raise ShoalError(f"--ranks-per-device {given}: the cluster's devices are {', '.join(profiles)}; "
                             f"give a rank count for each of them and no other "
                             f"(e.g. {','.join(f'{p}=1' for p in profiles)})")

    def _validate_launch(self) -> None:
        from shoal.cluster.session import LAYOUTS

        if self.launch not in LAYOUTS:
            raise ShoalError(f"--launch {self.launch}: use one of {', '.join(LAYOUTS)}")
        if self.launch == "head" and not (self.on_cluster and self.emulated_here()):
            raise ShoalError("--launch head starts ranks from an emulated cluster's head: add "
                             "--emulate SPEC or --attach ID (real hosts run the MPI's own launch)")

    def _validate_dilation(self) -> None:
        """Dilation slows devices emulated here; it is set when they come up."""
        if self.kind in ("emulated", "inventory") and self.emulated_here():
            # Every device core must be one the kernel can hold to its budget at that D.
            self.planned_dilation()
        if self.dilation is not None:
            from shoal.cluster import rules

            here = self.emulated_here()
            mode = self.inventory().mode if self.kind == "inventory" else None
            rules.dilation_applies(self.dilation, self.kind, here, self.cluster, mode)

    def planned_dilation(self, at_once: list[tuple[str, ...]] | None = None) -> float:
        """The dilation devices emulated here will run at (asked, or the smallest whole D at which
        those that compute at once fit this host), decided as the cluster decides it at up."""
        from shoal.cluster.emulated import EmulatedCluster

        if self.kind == "attached":
            from shoal.cluster.session import attach

            return attach(self.attach).dilation
        return EmulatedCluster(self.inventory(), dilation=self.dilation, at_once=at_once,
                               host=self.host()).choose_dilation()

    def host(self) -> "HostSpeed":
        """This host's speed for devices emulated here (asked, the inventory's, or measured)."""
        from shoal.cluster import hostspeed

        asked = self.host_speed if self.host_speed is not None else self.inventory().host_speed
        return hostspeed.resolve(asked, self.mpi, self.recalibrate)

    @contextlib.contextmanager
    def open(self, run: "Run | None" = None,
             at_once: list[tuple[str, ...]] | None = None) -> Iterator["Session"]:
        """The session these ranks run in: the cluster brought up (and down after the block),
        the energy meter of its nodes (with ``power``; it writes to ``run``), the slack
        monitor, the watch on real hosts' answers, the host speed (recorded in ``run``'s manifest) and the device clock.
        ``at_once``: the sets of emulated devices that compute at the same time (None: all)."""
        from shoal import cluster as clusters
        from shoal.execute.meter import energy_meter
        from shoal.execute.session import Session

        with clusters.open(emulate=self.emulate, link=self.link, inventory=self.cluster,
                           attach_to=self.attach, dilation=self.dilation, at_once=at_once,
                           host_speed=self.host_speed, recalibrate=self.recalibrate,
                           mpi=self.mpi) as cluster:
            cluster.bcast = self.bcast
            with energy_meter(self, cluster, run) as meter, cluster.slack_monitor() as slack, \
                    cluster.liveness() as watch:
                session = Session(cluster, meter, slack, watch)
                host = session.host_speed_record()
                if run is not None and host is not None:
                    run.update_manifest(host_speed=host)
                with self._governor(run):
                    yield session
                # Did the boxes keep playing? Their decoders' frames, late and dropped, since up.
                counters = cluster.background_counters()
                if run is not None and counters:
                    run.update_manifest(backgrounds=counters)
                stored = cluster.storage_counters()
                if run is not None and stored:
                    run.update_manifest(storage=stored)

    @contextlib.contextmanager
    def _governor(self, run: "Run | None") -> Iterator[None]:
        """This machine's governor set for the block (asked with --governor), recorded in ``run``."""
        if not self.governor or self.kind != "local":
            yield
            return
        from shoal.cluster import governor

        with governor.held(self.governor) as record:
            if run is not None:
                run.update_manifest(governor=record)
            yield
