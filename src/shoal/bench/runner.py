"""`shoal bench` as a library call: resolve the request, run it, return the run.

The request is stored in the manifest, so ``--resume RUN`` repeats exactly
the same sweep and measures only what is missing. Where ranks run comes
from shoal.execute: this machine (one configuration per ``--ranks``), or a
cluster (emulated, ssh, Slurm) swept over ``--nodes``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal import hostfacts
from shoal.bench import call_model, catalog, plant_calls
from shoal.bench.sweep import Config, Events, Options, Point, Sweep
from shoal.errors import Interrupted, ShoalError
from shoal.execute.lifecycle import still_ready, transport_env
from shoal.execute.placement import Placement, check_ranks, config_placements
from shoal.execute.session import Session
from shoal.execute.waiting import calibration_place, wait_mode, wait_setup
from shoal.execute.where import Where
from shoal.inputs import grammar
from shoal.mpi import build, discover, stack
from shoal.runs.store import Run


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
    # Points planned as not run, (config label, test, size_B, nodes, ranks) -> why (a study's
    # budget: shoal.study.bench_budget).
    not_run: dict[tuple[str, str, int, int, int], str] = field(default_factory=dict)

    def points(self, ranks: int, label: str = "", nodes: int = 0) -> tuple[list[Point], list[tuple[Point, str]]]:
        """Points to measure at this rank count (on ``nodes`` nodes), and those that cannot or
        will not run there (with why)."""
        run, skip = [], []
        for test in self.tests:
            for size in ([0] if test.name == "imb.Barrier" else self.sizes):
                point = Point(test.name, size)
                why = self.not_run.get((label, test.name, size, nodes, ranks))
                if test.min_ranks > ranks:
                    skip.append((point, f"needs {test.min_ranks} ranks, this configuration has {ranks}"))
                elif why:
                    skip.append((point, why))
                else:
                    run.append(point)
        return run, skip

    @property
    def total_points(self) -> int:
        return sum(len(run) + len(skip)
                   for run, skip in (self.points(p.ranks, p.label, p.nodes) for p in self.placements))


def plan(request: BenchRequest, placements: list[Placement] | None = None) -> Plan:
    """Check the request and build what it needs, before anything is started."""
    if request.on_cluster and request.ranks != [2]:
        raise ShoalError("--ranks is for this machine; on a cluster use --nodes and --ranks-per-node")
    if not request.ranks or min(request.ranks) < 1:
        raise ShoalError("no rank counts given; use e.g. --ranks 2 or --ranks 2,4")
    request.validate()
    placements = placements or config_placements(request)
    sizes = grammar.parse("--sizes", grammar.sizes, request.sizes)
    check_ranks(request, placements, 2 * max(sizes) + request.options.flush_B)
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


def start(request: BenchRequest, command: list[str], out: Path | None) -> tuple[Run, Plan]:
    the_plan = plan(request)
    run = Run.create("bench", command, out, request=request.to_manifest(),
                     mpi=the_plan.mpi.describe(), host=hostfacts.collect(),
                     transport_env=transport_env(),
                     stack=stack.software(the_plan.mpi, [the_plan.program]))
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
    with the_plan.request.open(run) as session:
        measure_in(run, the_plan, session, events)


def measure_in(run: Run, the_plan: Plan, session: Session, events: Events | None = None) -> None:
    """Measure the plan's configurations in a session whose cluster is up."""
    request = the_plan.request
    cluster = session.cluster
    cluster.check_ready(the_plan.mpi, str(the_plan.program))
    described = run.manifest.get("clusters", {})
    described[request.config_label] = session.describe()
    run.update_manifest(clusters=described)
    sweep = Sweep(run, the_plan.program, _long_call_options(the_plan, cluster), events or Events(),
                  session.meter, session.slack,
                  hosts_ready=lambda: still_ready(cluster, the_plan.mpi, the_plan.program, run))
    for placement in the_plan.placements:
        config = _config(the_plan, session, placement)
        todo, impossible = the_plan.points(placement.ranks, placement.label, placement.nodes)
        sweep.skip(config, impossible)
        sweep.run_config(config, todo)


def _long_call_options(the_plan: Plan, where: Any) -> Options:
    """The sweep's options. Without --timeout, a point may run as long as its modelled calls
    (and on a shared plant its fixed cost) could: one 256 KiB broadcast to 128 set-top boxes
    is 11 s of device time, a 32 MiB allreduce on six boards on 100 Mbit/s Ethernet 17 s,
    and the usual 4 x budget + 20 s declared them hung."""
    options = the_plan.request.options
    links = {node.link.name: node.link for node in where.nodes if getattr(node, "link", None)}
    if options.point_timeout_s is not None or not links:
        return options
    longest = max((call_model.slowed_call_s(point.test, placement.ranks, point.size_B, link, placement.nodes)
                   for placement in the_plan.placements
                   for point in the_plan.points(placement.ranks, placement.label, placement.nodes)[0]
                   for link in links.values()), default=0.0)
    shared = any(link.shared for link in links.values())
    ranks = max(placement.ranks for placement in the_plan.placements) if shared else 0
    hung = plant_calls.hung_after_s(longest, ranks)
    return dataclasses.replace(options, point_timeout_s=max(options.timeout_s, hung))


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


def _config(the_plan: Plan, session: Session, placement: Placement) -> Config:
    request = the_plan.request
    where = session.cluster
    names = list(placement.node_names) if placement.node_names else None
    rank_env, wait_label = wait_setup(wait_mode(request, where, placement), the_plan.mpi,
                                      calibration_place(request, where, placement))

    def make_job(argv: list[str]):
        if not request.on_cluster:
            from shoal.mpi.launch import Job

            return Job(mpi=the_plan.mpi, ranks=placement.ranks, argv=argv, rank_env=dict(rank_env))
        return where.job(the_plan.mpi, placement.nodes, argv,
                         ranks_per_node=placement.rank_counts, rank_env=dict(rank_env),
                         names=names, layout=request.launch)

    node_names = names or where.node_names(placement.nodes)
    return Config(label=placement.label, nodes=placement.nodes, ranks=placement.ranks,
                  make_job=make_job, wait_mode=wait_label, node_names=node_names,
                  clock=session.clock, with_shared=placement.with_shared, lost=session.lost)
