"""`shoal work` as a library call: resolve the request, run it, return the run.

One launch of the workload program per repetition and rank (or node)
count; the program prints one ``result`` record (JSON) that becomes one
row of ``results.csv``, with the energy of the run's timed part when power
is measured. Where ranks run comes from shoal.execute, as for
``shoal bench``; the timing, the build cache and the run store are the
benchmark suite's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from shoal import hostfacts, proc
from shoal.errors import ShoalError
from shoal.execute.lifecycle import still_ready, transport_env
from shoal.execute.placement import Placement, check_ranks, config_placements
from shoal.execute.session import Session
from shoal.execute.waiting import calibration_place, wait_mode, wait_setup
from shoal.execute.where import Where
from shoal.mpi import build, discover, stack
from shoal.mpi.launch import Job, startup_grace_s
from shoal.cluster import slack as host_slack
from shoal.runs.store import Run
from shoal.work import catalog, records

# Seconds a run may take beyond its start-up before it counts as hung.
DEFAULT_TIMEOUT_S = 900.0


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
    # The wait mode where neither ``wait`` nor the cluster names one (the study's
    # backoff: waiting shows as idle power); None: libshoalwait not loaded.
    wait_otherwise: str | None = None

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


def workloads(mpi: str | None) -> tuple[catalog.Workload, ...]:
    """The workloads the program built with this MPI (None: the default) has."""
    return catalog.load(build.build("work", discover.resolve(mpi)))


def plan(request: WorkRequest, placements: list[Placement] | None = None) -> Plan:
    """Check the request and build the program, before anything is started
    (``placements``: where to run, instead of the request's rank or node counts)."""
    if request.on_cluster and request.ranks != [1]:
        raise ShoalError("--ranks is for this machine; on a cluster use --nodes and --ranks-per-node")
    if request.reps < 1:
        raise ShoalError(f"--reps must be at least 1, got {request.reps}")
    if not request.ranks or min(request.ranks) < 1:
        raise ShoalError("--ranks must list positive rank counts, e.g. 1..4 or 1,2,4")
    if request.aes not in ("auto", "openssl", "software"):
        raise ShoalError(f"--aes must be auto, openssl or software, not {request.aes!r}")
    if request.timeout_s <= 0:
        raise ShoalError(f"--timeout must be positive, got {request.timeout_s}")
    request.validate()
    placements = placements or config_placements(request, every_count=True)
    mpi = discover.resolve(request.mpi)
    program = build.build("work", mpi)
    workload = catalog.find(catalog.load(program), request.workload)
    size = catalog.resolve_size(workload, request.size)
    described = catalog.describe(program, workload, size)
    memory = float(described["memory_per_rank_B"])
    # Ranks the slots allow, and memory and processes this machine has for them.
    check_ranks(request, placements, memory, smaller=f"a smaller --size ({workload.name} {size} needs "
                                                     f"about {memory / 2**20:.0f} MiB per rank)")
    aes, aes_why = _aes_choice(request)
    return Plan(request, mpi, program, workload, size, memory, placements, aes, aes_why)


def _aes_choice(request: WorkRequest) -> tuple[str, str]:
    """Software AES when a device of the cluster has no AES instructions: the
    host's would make encryption about ten times too fast there."""
    if request.aes != "auto":
        return request.aes, "asked for with --aes"
    if not request.on_cluster:
        return "auto", "this machine: OpenSSL's libcrypto if it loads, else software"
    inv = request.inventory()
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
                     transport_env=transport_env(),
                     stack=stack.software(the_plan.mpi, [the_plan.program]))
    return run, the_plan


def execute(run: Run, the_plan: Plan, events: Events | None = None) -> Run:
    """Run every placement ``reps`` times; each finished run is on disk at once.

    Repetitions are interleaved (rep 1 at every count, then rep 2, ...), so a
    slow spell of a shared host spreads over the counts instead of biasing one.
    """
    events = events or Events()
    request = the_plan.request
    with request.open(run) as session:
        session.cluster.check_ready(the_plan.mpi, str(the_plan.program))
        run.update_manifest(clusters={request.config_label: session.describe()})
        for rep in range(request.reps):
            for placement in the_plan.placements:
                measure_one(run, the_plan, placement, rep, session, events)
    failures = len(run.rows(Tables().failures))
    failed_checks = sum(r["check"] == "fail" for r in run.rows(Tables().results))
    run.finish("complete" if not (failures or failed_checks) else "complete-with-failures")
    return run


def program_args(the_plan: Plan, more: list[Plan] = ()) -> list[str]:
    """The workload program's command line: this plan's run, then ``more`` in the same launch."""
    runs = ",".join(f"{p.workload.name}:{p.size}" for p in [the_plan, *more])
    argv = [str(the_plan.program), "--runs", runs, "--aes", the_plan.aes]
    if the_plan.request.check:
        argv.append("--check")
    return argv


@dataclass(frozen=True)
class Tables:
    """The run tables rows go to (a study keeps its workloads beside its benchmark points)."""

    results: str = "results"
    failures: str = "failures"
    traffic: str = "traffic"


def measure_one(run: Run, the_plan: Plan, placement: Placement, rep: int, session: Session,
                events: Events, tables: Tables = Tables()) -> dict[str, Any] | None:
    """One launch of the workload at one placement; its row (or failure) is appended at once."""
    return measure_batch(run, [the_plan], placement, rep, session, events, tables)[0]


def measure_batch(run: Run, plans: list[Plan], placement: Placement, rep: int, session: Session,
                  events: Events, tables: Tables = Tables()) -> list[dict[str, Any] | None]:
    """One launch running each plan's workload once, in order, at one placement (plans share
    the program, MPI, wait mode and --check); each row (or failure) is appended at once.

    One launch for several workloads saves the MPI start-up, which on an emulated
    cluster costs more than a small workload's run.
    """
    first = plans[0]
    request = first.request
    where, clock, meter, slack = session.cluster, session.clock, session.meter, session.slack
    names = list(placement.node_names) if placement.node_names else None
    rank_env, wait_label = wait_setup(wait_mode(request, where, placement, request.wait_otherwise),
                                      first.mpi, calibration_place(request, where, placement))
    tel_dir = None
    if wait_label and where.shares_files:   # libshoalwait loaded: who talks to whom
        tel_dir = run.path / "telemetry" / f"{placement.label}-{placement.nodes}-{placement.ranks}-{rep}"
        rank_env = {**rank_env, **telemetry_env(tel_dir)}
    argv = program_args(first, plans[1:])
    if request.on_cluster:
        job = where.job(first.mpi, placement.nodes, argv, ranks_per_node=placement.rank_counts,
                        rank_env=dict(rank_env), names=names, layout=request.launch)
    else:
        job = Job(mpi=first.mpi, ranks=placement.ranks, argv=argv, rank_env=dict(rank_env))
    node_names = names or where.node_names(placement.nodes)
    cmd, env_add = job.command()
    timeout_s = clock.timeout(sum(p.request.timeout_s for p in plans) + startup_grace_s(placement.ranks))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    why = None
    try:
        result = proc.run(cmd, env=job.popen_env(), show_env=env_add, timeout=timeout_s,
                          leaves=job.leaves, what="the workload job", stop_if=session.lost)
        found = {(r["workload"], r["size"]): r for r in _result_records(result.stdout)}
        why = ("crashed", result.tail() or f"exit status {result.returncode}, no result printed")
    except proc.CommandTimeout:
        why = ("timeout", f"no result within {timeout_s:.0f} s")
    except proc.CommandStopped as stopped:
        why = ("lost", f"a host stopped answering: {stopped.reason}")
    rows: list[dict[str, Any] | None] = []
    for the_plan in plans:
        record = found.get((the_plan.workload.name, the_plan.size))
        if record is None:
            pid = records.point_id(placement.label, placement.nodes, placement.ranks,
                                   the_plan.workload.name, the_plan.size, rep)
            run.append(tables.failures, [{"point_id": pid, "config": placement.label, "nodes": placement.nodes,
                                          "ranks": placement.ranks, "workload": the_plan.workload.name,
                                          "size": the_plan.size, "rep": rep, "reason": why[0],
                                          "detail": why[1]}], columns=records.FAILURE_COLUMNS)
            events.run_failed(placement, rep, f"{why[0]}: {why[1]}")
            rows.append(None)
            continue
        row = records.result_row(clock.record(record, records.TIME_KEYS, records.RATE_KEYS),
                                 placement.label, placement.nodes, rep, wait_label, clock.dilation)
        # Whether the devices got their CPU budgets during the run (emulated clusters only).
        if slack is not None:
            row.update(host_slack.row_columns(slack.between(row["t_start_mono_s"],
                                                            row["t_end_mono_s"])))
        if meter is not None:
            records.add_energy(row, meter.energy_between(row["t_start_mono_s"], row["t_end_mono_s"],
                                                         node_names, placement.with_shared), clock)
        run.append(tables.results, [row], columns=records.RESULT_COLUMNS)
        events.run_done(row)
        rows.append(row)
    if tel_dir is not None:
        keep_traffic(run, tables.traffic, tel_dir, placement, rep, plans)
    if None in rows:   # a host that is gone ends the run here
        still_ready(where, first.mpi, first.program, run)
    return rows


def telemetry_env(directory: Path) -> dict[str, str]:
    """The ranks' environment that has libshoalwait write its telemetry into ``directory``
    (made empty)."""
    from shoal.environment import WAIT_TELEMETRY

    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return {WAIT_TELEMETRY.name: str(directory.resolve())}


def keep_traffic(run: Run, table: str, directory: Path, placement: Placement, rep: int,
                 plans: list[Plan]) -> None:
    """One launch's traffic matrix appended to ``table`` (the launch's workloads named in
    each row); the rank files are dropped. Ranks that did not reach MPI_Finalize leave
    no row."""
    from shoal.wait import telemetry, traffic

    try:
        rows = traffic.rows(telemetry.read_dir(directory))
    except ShoalError:
        rows = []
    workloads = "+".join(f"{p.workload.name}:{p.size}" for p in plans)
    run.append(table, [{"config": placement.label, "nodes": placement.nodes, "ranks": placement.ranks,
                        "rep": rep, "workloads": workloads, **row} for row in rows],
               columns=records.TRAFFIC_COLUMNS)
    shutil.rmtree(directory, ignore_errors=True)
    with contextlib.suppress(OSError):   # the last launch leaves no empty folder behind
        directory.parent.rmdir()


def _result_records(stdout: str) -> list[dict[str, Any]]:
    """The ``result`` records the program printed, in order."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue  # MPI libraries sometimes print warnings on stdout
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("type") == "result":
            out.append(record)
    return out
