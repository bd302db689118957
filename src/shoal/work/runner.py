"""`shoal work` as a library call: resolve the request, run it, return the run.

One launch of the workload program per repetition and rank (or node)
count; the program prints one ``result`` record (JSON) that becomes one
row of ``results.csv``, with the energy of the run's timed part when power
is measured. Where ranks run comes from shoal.cluster, as for
``shoal bench``; the timing, the build cache and the run store are the
benchmark suite's.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from shoal import cluster as clusters
from shoal import hostfacts, proc
from shoal.bench.runner import (Placement, Where, config_placements, energy_meter, transport_env,
                                wait_setup)
from shoal.errors import ShoalError
from shoal.mpi import build, discover
from shoal.mpi.launch import Job
from shoal.runs.store import Run
from shoal.work import catalog, records

# Seconds a run may take beyond its start-up before it counts as hung.
DEFAULT_TIMEOUT_S = 900.0
# Time for MPI (and an emulated cluster's launcher) to start the ranks.
STARTUP_GRACE_S = 60.0


@dataclass
class WorkRequest(Where):
    """Everything that defines a workload run (saved in the manifest)."""

    workload: str
    size: str | None = None
    reps: int = 3
    check: bool = False
    ranks: list[int] = field(default_factory=lambda: [1])
    # edge: AES implementation (auto, openssl, software).
    aes: str = "auto"
    timeout_s: float = DEFAULT_TIMEOUT_S

    def to_manifest(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Plan:
    request: WorkRequest
    mpi: discover.MPIInstall
    program: Path
    workload: catalog.Workload
    size: str
    memory_per_rank_B: float
    placements: list[Placement]
    # The AES implementation edge runs with, and why (recorded in the manifest).
    aes: str = "auto"
    aes_why: str = ""

    @property
    def total_runs(self) -> int:
        return len(self.placements) * self.request.reps


@dataclass
class Events:
    """Callbacks for progress; all optional."""

    run_done: Callable[[dict[str, Any]], None] = lambda row: None
    run_failed: Callable[[Placement, int, str], None] = lambda placement, rep, reason: None


def _host_memory_B() -> float | None:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return None


def plan(request: WorkRequest) -> Plan:
    """Check the request and build the program, before anything is started."""
    if request.emulate and request.cluster:
        raise ShoalError("give either --emulate or --cluster FILE, not both")
    if request.on_cluster and request.ranks != [1]:
        raise ShoalError("--ranks is for this machine; on a cluster use --nodes and --ranks-per-node")
    if request.nodes and not request.on_cluster:
        raise ShoalError("--nodes needs a cluster: add --emulate 4xminnowboard or --cluster FILE")
    if request.reps < 1:
        raise ShoalError(f"--reps must be at least 1, got {request.reps}")
    if request.ranks_per_node < 1:
        raise ShoalError(f"--ranks-per-node must be at least 1, got {request.ranks_per_node}")
    if not request.ranks or min(request.ranks) < 1:
        raise ShoalError("--ranks must list positive rank counts, e.g. 1..4 or 1,2,4")
    if request.aes not in ("auto", "openssl", "software"):
        raise ShoalError(f"--aes must be auto, openssl or software, not {request.aes!r}")
    if request.timeout_s <= 0:
        raise ShoalError(f"--timeout must be positive, got {request.timeout_s}")
    if request.power:
        from shoal.power import spec

        spec.parse(request.power)
    if request.wait:
        from shoal.wait import parse_mode

        parse_mode(request.wait)
    placements = config_placements(request, every_count=True)
    mpi = discover.resolve(request.mpi)
    program = build.build("work", mpi)
    workload = catalog.find(catalog.load(program), request.workload)
    size = catalog.resolve_size(workload, request.size)
    described = catalog.describe(program, workload, size)
    memory = float(described["memory_per_rank_B"])
    host_memory = _host_memory_B()
    if not request.on_cluster and host_memory and memory * max(request.ranks) > host_memory:
        raise ShoalError(f"{workload.name} size {size} needs about {memory / 2**30:.1f} GiB per rank, "
                         f"more than this machine's {host_memory / 2**30:.1f} GiB for "
                         f"{max(request.ranks)} ranks; choose a smaller --size")
    aes, aes_why = _aes_choice(request)
    return Plan(request, mpi, program, workload, size, memory, placements, aes, aes_why)


def _aes_choice(request: WorkRequest) -> tuple[str, str]:
    """Software AES when a device of the cluster has no AES instructions: the
    host's would make encryption about ten times too fast there."""
    if request.aes != "auto":
        return request.aes, "asked for with --aes"
    if not request.on_cluster:
        return "auto", "this machine: OpenSSL's libcrypto if it loads, else software"
    from shoal.cluster import inventory

    inv = (inventory.from_emulate(request.emulate, request.link) if request.emulate
           else inventory.load(request.cluster))
    without = sorted({n.profile.name for n in inv.nodes if n.profile.aes_instructions is False})
    if without:
        return "software", f"profile(s) {', '.join(without)} have no AES instructions"
    unknown = sorted({n.profile.name for n in inv.nodes if n.profile.aes_instructions is None})
    if unknown:
        return "auto", f"profile(s) {', '.join(unknown)} do not say whether they have AES instructions"
    return "auto", "every device has AES instructions"


def start(request: WorkRequest, command: list[str], out: Path | None) -> tuple[Run, Plan]:
    the_plan = plan(request)
    run = Run.create("work", command, out, request=request.to_manifest(),
                     workload={"name": the_plan.workload.name, "size": the_plan.size,
                               "unit": the_plan.workload.unit,
                               "memory_per_rank_B": the_plan.memory_per_rank_B,
                               "aes": {"requested": request.aes, "used": the_plan.aes,
                                       "why": the_plan.aes_why}},
                     mpi=the_plan.mpi.describe(), host=hostfacts.collect(),
                     transport_env=transport_env())
    return run, the_plan


def execute(run: Run, the_plan: Plan, events: Events | None = None) -> Run:
    """Run every placement ``reps`` times; each finished run is on disk at once."""
    events = events or Events()
    request = the_plan.request
    with clusters.open(emulate=request.emulate, link=request.link,
                       inventory=request.cluster) as where:
        run.update_manifest(clusters={request.config_label: where.describe()})
        with energy_meter(request, where, run) as meter:
            for placement in the_plan.placements:
                make_job, node_names, wait_label = _job_maker(the_plan, where, placement)
                for rep in range(request.reps):
                    _one(run, the_plan, placement, rep, make_job, node_names, wait_label, meter, events)
    failures = len(run.rows("failures"))
    failed_checks = sum(r["check"] == "fail" for r in run.rows("results"))
    run.finish("complete" if not (failures or failed_checks) else "complete-with-failures")
    return run


def program_args(the_plan: Plan) -> list[str]:
    argv = [str(the_plan.program), "--runs", f"{the_plan.workload.name}:{the_plan.size}",
            "--aes", the_plan.aes]
    if the_plan.request.check:
        argv.append("--check")
    return argv


def _job_maker(the_plan: Plan, where: Any, placement: Placement):
    request = the_plan.request
    rank_env, wait_label = wait_setup(request.wait, the_plan.mpi)

    def make_job(argv: list[str]) -> Job:
        if not request.on_cluster:
            return Job(mpi=the_plan.mpi, ranks=placement.ranks, argv=argv, rank_env=dict(rank_env))
        return where.job(the_plan.mpi, placement.nodes, argv,
                         ranks_per_node=placement.ranks_per_node, rank_env=dict(rank_env))

    node_names = where.node_names(placement.nodes)
    return make_job, node_names, wait_label


def _one(run: Run, the_plan: Plan, placement: Placement, rep: int, make_job, node_names: list[str],
         wait_label: str, meter: Any, events: Events) -> None:
    request = the_plan.request
    job = make_job(program_args(the_plan))
    cmd, env_add = job.command()
    pid = records.point_id(placement.label, placement.nodes, placement.ranks, the_plan.workload.name,
                           the_plan.size, rep)
    record, failure = None, None
    try:
        result = proc.run(cmd, env=job.popen_env(), show_env=env_add,
                          timeout=request.timeout_s + STARTUP_GRACE_S, what="the workload job")
        record = _result_record(result.stdout)
        if record is None:
            failure = ("crashed", result.tail() or f"exit status {result.returncode}, no result printed")
    except proc.CommandTimeout:
        failure = ("timeout", f"no result within {request.timeout_s:.0f} s")
    if failure:
        run.append("failures", [{"point_id": pid, "config": placement.label, "nodes": placement.nodes,
                                 "ranks": placement.ranks, "workload": the_plan.workload.name,
                                 "size": the_plan.size, "rep": rep, "reason": failure[0],
                                 "detail": failure[1]}], columns=records.FAILURE_COLUMNS)
        events.run_failed(placement, rep, f"{failure[0]}: {failure[1]}")
        return
    row = records.result_row(record, placement.label, placement.nodes, rep, wait_label)
    if meter is not None:
        records.add_energy(row, meter.energy_between(row["t_start_mono_s"], row["t_end_mono_s"],
                                                     node_names))
    run.append("results", [row], columns=records.RESULT_COLUMNS)
    events.run_done(row)


def _result_record(stdout: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue  # MPI libraries sometimes print warnings on stdout
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("type") == "result":
            return record
    return None
