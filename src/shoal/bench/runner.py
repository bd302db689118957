"""`shoal bench` as a library call: resolve the request, run it, return the run.

The request is stored in the manifest, so ``--resume RUN`` repeats exactly
the same sweep and measures only what is missing. Where ranks run comes
from shoal.cluster: this machine (one configuration per ``--ranks``), or a
cluster (emulated, ssh, Slurm) swept over ``--nodes``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from shoal import cluster as clusters
from shoal import hostfacts
from shoal.bench import catalog
from shoal.bench.sweep import Config, Events, Options, Point, Sweep
from shoal.errors import Interrupted, ShoalError
from shoal.inputs import grammar, ranklimit
from shoal.mpi import build, discover
from shoal.runs.store import Run


@dataclass(kw_only=True)
class Where:
    """Where a request's ranks run, with which MPI, and what measures their
    energy: shared by bench and work requests (saved in their manifests)."""

    mpi: str | None = None
    # An emulated cluster ("4xminnowboard"), an inventory file, or neither (this machine).
    emulate: str | None = None
    link: str | None = None
    cluster: str | None = None
    nodes: str | None = None
    ranks_per_node: int = 1
    # Energy: a power source spec (see shoal.power), and seconds of idle baseline before the run.
    power: str | None = None
    idle_s: float = 0.0
    # libshoalwait mode the ranks run under (None: not loaded).
    wait: str | None = None
    # Emulated clusters: how many times slower than real time (None: chosen to fit the host).
    dilation: float | None = None
    # Ranks per CPU (per device core on a cluster) at most; see shoal.inputs.ranklimit.
    oversubscribe: float = ranklimit.DEFAULT_OVERSUBSCRIBE

    @property
    def on_cluster(self) -> bool:
        return bool(self.emulate or self.cluster)

    @property
    def config_label(self) -> str:
        if self.emulate:
            return self.emulate
        if self.cluster:
            return Path(self.cluster).stem
        return "local"


@dataclass
class BenchRequest(Where):
    """Everything that defines a benchmark sweep (saved in the manifest)."""

    tests: str = "mpbench,imb"
    sizes: str = "1..4M"
    ranks: list[int] = field(default_factory=lambda: [2])
    options: Options = field(default_factory=Options)

    def to_manifest(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> "BenchRequest":
        data = dict(data)
        data["options"] = Options(**data.get("options", {}))
        return cls(**data)



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


@dataclass
class Plan:
    """A resolved request: the MPI, the program, the tests and sizes, and
    every configuration they run in."""

    request: BenchRequest
    mpi: discover.MPIInstall
    program: Path
    tests: list[catalog.TestInfo]
    sizes: list[int]
    placements: list[Placement]

    def points(self, ranks: int) -> tuple[list[Point], list[tuple[Point, str]]]:
        """Points to measure at this rank count, and those that cannot run there (with why)."""
        run, skip = [], []
        for test in self.tests:
            for size in ([0] if test.name == "imb.Barrier" else self.sizes):
                point = Point(test.name, size)
                if test.min_ranks > ranks:
                    skip.append((point, f"needs {test.min_ranks} ranks, this configuration has {ranks}"))
                else:
                    run.append(point)
        return run, skip

    @property
    def total_points(self) -> int:
        return sum(len(self.points(p.ranks)[0]) + len(self.points(p.ranks)[1])
                   for p in self.placements)


def cluster_size(request: BenchRequest) -> int:
    """Nodes in the request's cluster, read from its description (nothing is started)."""
    from shoal.cluster import inventory

    if request.emulate:
        return len(inventory.from_emulate(request.emulate, request.link).nodes)
    return len(inventory.load(request.cluster).nodes)


def config_placements(request: Any, every_count: bool = False) -> list[Placement]:
    """One placement per ``ranks`` on this machine, or per ``nodes`` count on a
    cluster (by default all its nodes; ``every_count``: 1..all)."""
    label = request.config_label
    if not request.on_cluster:
        return [Placement(label, 1, r) for r in request.ranks]
    size = cluster_size(request)
    default = f"1..{size}" if every_count else str(size)
    return [Placement(label, n, request.ranks_per_node)
            for n in clusters.parse_nodes(request.nodes or default, size)]


def plan(request: BenchRequest, placements: list[Placement] | None = None) -> Plan:
    """Check the request and build what it needs, before anything is started."""
    if request.on_cluster and request.ranks != [2]:
        raise ShoalError("--ranks is for this machine; on a cluster use --nodes and --ranks-per-node")
    if request.emulate and request.cluster:
        raise ShoalError("give either --emulate or --cluster FILE, not both")
    if request.link and not request.emulate:
        raise ShoalError("--link sets the link of emulated devices and needs --emulate SPEC; "
                             "an inventory's links are set in its file")
    if request.ranks_per_node < 1:
        raise ShoalError(f"--ranks-per-node must be at least 1, got {request.ranks_per_node}")
    if not request.ranks or min(request.ranks) < 1:
        raise ShoalError("no rank counts given; use e.g. --ranks 2 or --ranks 2,4")
    if request.dilation is not None and not request.on_cluster:
        raise ShoalError("--dilation applies to emulated clusters: add --emulate SPEC")
    if request.nodes and not request.on_cluster:
        raise ShoalError("--nodes needs a cluster: add --emulate 4xminnowboard or --cluster FILE")
    placements = placements or config_placements(request)
    sizes = grammar.parse("--sizes", grammar.sizes, request.sizes)
    check_ranks(request, placements, 2 * max(sizes) + request.options.flush_B)
    if request.power:
        _check_power(request)
    if request.wait:
        from shoal.wait import parse_mode

        parse_mode(request.wait)
    mpi = discover.resolve(request.mpi)
    program = build.build("bench", mpi)
    tests = catalog.select(catalog.load(program), request.tests)
    if not request.on_cluster:
        for placement in placements:
            too_many = [t.name for t in tests if t.min_ranks > placement.ranks]
            if too_many:
                raise ShoalError(f"{', '.join(too_many)} need(s) at least "
                                 f"{max(t.min_ranks for t in tests)} ranks but --ranks gives "
                                 f"{placement.ranks}; raise --ranks or choose other tests")
    return Plan(request, mpi, program, tests, sizes, placements)


def _check_power(request: BenchRequest) -> None:
    """Open the named power sources once (then close them): a missing sensor or a meter
    that does not answer is refused before the run starts, not found during it."""
    from shoal.power import spec

    items = spec.parse(request.power)
    if request.emulate:
        if request.power not in ("auto", "model"):
            raise ShoalError(f"--power {request.power}: emulated devices have no sensors of their "
                             "own; use --power model (each device's profile, driven by its CPU use)")
        return
    if request.on_cluster:
        return  # the sources are on the hosts; their samplers report what they find
    sources, _ = spec.build(items)
    for source in sources:
        source.close()


def check_ranks(request: Where, placements: list[Placement], buffer_B: float,
                smaller: str = "smaller --sizes") -> None:
    """Refuse rank counts beyond the slots, memory and process limits (before anything starts);
    ``buffer_B`` is what each rank allocates, ``smaller`` how to make it less."""
    if not request.on_cluster:
        for placement in placements:
            ranklimit.check(placement.ranks, buffer_B, oversubscribe=request.oversubscribe,
                            smaller=smaller)
        return
    from shoal.cluster import inventory

    inv = (inventory.from_emulate(request.emulate, request.link) if request.emulate
           else inventory.load(request.cluster))
    widest = max(p.nodes for p in placements)
    per_node = max(p.ranks_per_node for p in placements)
    for node in inv.nodes[:widest]:
        local = inv.runs_here  # every emulated device's ranks run on this machine
        ranklimit.check(per_node, buffer_B, slots=node.slots, where=f"node {node.name}",
                        option="--ranks-per-node", oversubscribe=request.oversubscribe,
                        host_ranks=max(p.ranks for p in placements) if local else None,
                        host=None if local else ranklimit.HostLimits(node.slots, None, None),
                        smaller=smaller)


def start(request: BenchRequest, command: list[str], out: Path | None) -> tuple[Run, Plan]:
    the_plan = plan(request)
    run = Run.create("bench", command, out, request=request.to_manifest(),
                     mpi=the_plan.mpi.describe(), host=hostfacts.collect(),
                     transport_env=transport_env())
    return run, the_plan


def resume(path: Path) -> tuple[Run, BenchRequest, Plan]:
    run = Run.open(path)
    manifest = run.manifest
    if manifest.get("kind") != "bench" or "request" not in manifest:
        raise ShoalError(f"{path} is not a 'shoal bench' run; give --resume a directory made by shoal bench")
    if manifest.get("status") == "complete":
        raise ShoalError(f"{path} is already complete; nothing to resume (start a new run with another --out)")
    request = BenchRequest.from_manifest(manifest["request"])
    the_plan = plan(request)
    recorded = manifest["mpi"]
    if (the_plan.mpi.kind, the_plan.mpi.version, str(the_plan.mpi.bindir)) != (
            recorded["kind"], recorded["version"], recorded["bindir"]):
        raise ShoalError(f"{path} was measured with {recorded['name']} at {recorded['bindir']}, "
                         f"but {the_plan.mpi.name} at {the_plan.mpi.bindir} would be used now; "
                         "resume with the same MPI")
    run.drop_orphans("samples", "results")   # of a point stopped before its result row
    run.update_manifest(status="running", resumed=manifest.get("resumed", 0) + 1)
    return run, request, the_plan


def measure(run: Run, the_plan: Plan, events: Events | None = None) -> None:
    """Measure every configuration of the plan; each finished point is on disk at once."""
    request = the_plan.request
    with clusters.open(emulate=request.emulate, link=request.link,
                       inventory=request.cluster, dilation=request.dilation) as where:
        with energy_meter(request, where, run) as meter, where.slack_monitor() as slack:
            measure_in(run, the_plan, where, meter, slack, events)


def measure_in(run: Run, the_plan: Plan, where: "clusters.Cluster", meter: Any, slack: Any,
               events: Events | None = None) -> None:
    """Measure the plan's configurations on a cluster that is already up."""
    request = the_plan.request
    where.check_ready(the_plan.mpi, str(the_plan.program))
    described = run.manifest.get("clusters", {})
    described[request.config_label] = where.describe()
    run.update_manifest(clusters=described)
    sweep = Sweep(run, the_plan.program, request.options, events or Events(), meter, slack,
                  hosts_ready=lambda: still_ready(where, the_plan.mpi, the_plan.program, run))
    for placement in the_plan.placements:
        config = _config(the_plan, where, placement)
        todo, impossible = the_plan.points(placement.ranks)
        sweep.skip(config, impossible)
        sweep.run_config(config, todo)


def still_ready(where: "clusters.Cluster", mpi: discover.MPIInstall, program: Path | str,
                run: Run) -> None:
    """After a failed launch: is every host still there? (ssh clusters ask each host again;
    a host that is gone ends the run at once instead of failing every point after it.)"""
    try:
        where.check_ready(mpi, str(program))
    except ShoalError as exc:
        keep = (f"continue with --resume {run.path} when every host answers"
                if run.manifest.get("kind") in ("bench", "study") else f"see {run.path}")
        raise ShoalError(f"{exc} (they were ready when the run began); finished points are "
                         f"kept: {keep}") from None


def execute(run: Run, the_plan: Plan, events: Events | None = None) -> Run:
    """Measure the plan and mark the run complete (or complete with failures).

    A run that stops on an error ends ``failed`` with the reason in its manifest.
    """
    try:
        measure(run, the_plan, events)
    except Interrupted:
        raise
    except ShoalError as exc:
        run.finish("failed", reason=str(exc))
        raise
    failures = len(run.rows("failures"))
    run.finish("complete" if not failures else "complete-with-failures")
    return run


def wait_mode(request: Where, where: "clusters.Cluster", placement: Placement,
              otherwise: str | None = None) -> str | None:
    """How the placement's ranks wait: --wait, else the cluster's own mode for them
    (emulated devices whose quota polling would use up), else ``otherwise``."""
    names = list(placement.node_names) if placement.node_names else None
    cluster_mode = where.default_wait(placement.ranks_per_node, names) if request.on_cluster else None
    return request.wait or cluster_mode or otherwise


def wait_setup(mode: str | None, mpi: discover.MPIInstall) -> tuple[dict[str, str], str]:
    """The ranks' environment and the results' label for libshoalwait ``mode`` (None: not loaded)."""
    if not mode:
        return {}, ""
    from shoal.wait import parse_mode, wait_env

    return wait_env(mode, mpi), parse_mode(mode).text


def _config(the_plan: Plan, where: "clusters.Cluster", placement: Placement) -> Config:
    request = the_plan.request
    names = list(placement.node_names) if placement.node_names else None
    rank_env, wait_label = wait_setup(wait_mode(request, where, placement), the_plan.mpi)

    def make_job(argv: list[str]):
        if not request.on_cluster:
            from shoal.mpi.launch import Job

            return Job(mpi=the_plan.mpi, ranks=placement.ranks, argv=argv, rank_env=dict(rank_env))
        return where.job(the_plan.mpi, placement.nodes, argv,
                         ranks_per_node=placement.ranks_per_node, rank_env=dict(rank_env),
                         names=names)

    node_names = names or where.node_names(placement.nodes)
    return Config(label=placement.label, nodes=placement.nodes, ranks=placement.ranks,
                  make_job=make_job, wait_mode=wait_label, node_names=node_names,
                  dilation=where.dilation, with_shared=placement.with_shared)


@contextlib.contextmanager
def energy_meter(request: Any, where: "clusters.Cluster", run: Run) -> Iterator[Any]:
    """A power meter for the request's runs (``power``, ``idle_s``), or None when
    power is not asked for."""
    if not request.power:
        yield None
        return
    from shoal.bench import energy

    with energy.open_meter(request.power, where, run, idle_s=request.idle_s) as meter:
        yield meter


def transport_env() -> dict[str, str]:
    """MPI transport settings in the environment: they change what is measured."""
    from shoal import environment
    from shoal.mpi import kinds

    prefixes = (*kinds.setting_prefixes(), environment.WAIT.name)
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(prefixes)}
