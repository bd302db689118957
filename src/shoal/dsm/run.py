"""`shoal dsm run` as a library call: one S-DSM program under a wait mode, here or on a cluster,
with each rank's time split and, with a Table 1 preset, each device's modelled power.

``plan`` checks every input (the program, its options, the ranks, the preset against the
program, where the ranks run) before anything starts; ``run`` runs the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.dsm import apps, placement
from shoal.errors import ShoalError
from shoal.execute.where import Where
from shoal.inputs import ranklimit
from shoal.runs import jsonout
from shoal.wait.modes import parse_mode


@dataclass
class RunRequest:
    """Which program, how it waits, how many ranks, and where they run."""

    app: str                                # full, burst, lock, hough or video
    program_args: list[str] = field(default_factory=list)   # shoal-sdsm's own options
    wait: str = "backoff"
    impl: str = "sdsm"                      # sdsm, mpi (plain MPI) or seq
    ranks: int | None = None                # None: the program's
    oversubscribe: float | None = None
    preset: str | None = None               # a Table 1 placement for the power model
    where: Where = field(default_factory=Where)
    out: str | None = None                  # a run directory for the report and the traffic matrix
    command: list[str] = field(default_factory=list)   # the command line, for its manifest


@dataclass
class RunPlan:
    """A request checked; on a cluster, the ranks per node (the cluster comes up in ``run``)."""

    request: RunRequest
    mode: str
    ranks: int
    preset: placement.Preset | None
    blocks: list[tuple[str, int]] | None = None


@dataclass
class RunResult:
    """The program's report and ranks, each rank's time split, the devices' modelled power
    (with a preset) and where it ran (on a cluster)."""

    result: apps.Result
    mode: str
    mpi: str
    time_split: list[dict[str, Any]]
    devices: list[dict[str, Any]]
    cluster: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "mpi": self.mpi, "report": self.result.report,
                "time_split": self.time_split, "devices": self.devices, "cluster": self.cluster,
                "traffic": self.result.traffic()}


def bytes_option(program_args: list[str]) -> int | None:
    """The chunk size the program is given with ``--bytes``, if any."""
    if "--bytes" in program_args and program_args.index("--bytes") + 1 < len(program_args):
        value = program_args[program_args.index("--bytes") + 1]
        try:
            return int(float(value))
        except ValueError:
            raise ShoalError(f"--bytes {value}: expected a number of bytes") from None
    return None


def plan(request: RunRequest) -> RunPlan:
    """Check every input; on a cluster, describe it (its nodes) without bringing it up."""
    apps.app(request.app)
    mode = parse_mode(request.wait).text
    ranks = request.ranks or apps.default_ranks(request.app, request.impl)
    apps.check_args(request.app, request.impl, ranks, bytes_option(request.program_args))
    ranklimit.check(ranks, option="-n", smaller="a smaller problem",
                    oversubscribe=request.oversubscribe or ranklimit.DEFAULT_OVERSUBSCRIBE)
    chosen = placement.for_program(request.preset, request.app, ranks) if request.preset else None
    if request.out is not None and (Path(request.out) / "manifest.json").exists():
        raise ShoalError(f"{request.out} already holds a run; choose another --out")
    out = RunPlan(request, mode, ranks, chosen)
    if request.where.emulate:
        # Where the preset's ranks go is known from the spec alone: refused before validation,
        # which may measure this host's core first (a minute, and its warnings, on a fresh host).
        out.blocks = placement.on_nodes(chosen, ranks, [n.name for n in request.where.inventory().nodes])
    request.where.validate()
    if request.where.on_cluster and not out.blocks:
        out.blocks = placement.on_nodes(chosen, ranks, [n.name for n in request.where.inventory().nodes])
    return out


def run(planned: RunPlan) -> RunResult:
    """Run the program (on the cluster, brought up for it, in device time) and split its time."""
    from shoal.dsm.lab import run_wall
    from shoal.mpi import discover

    request = planned.request
    mpi = discover.resolve(request.where.mpi)
    on = None
    if request.where.on_cluster:
        with request.where.open() as session:
            session.cluster.check_ready(mpi, str(apps.program(mpi)))
            result = apps.run_on_cluster(session, mpi, request.app, request.program_args, planned.blocks,
                                         planned.mode, impl=request.impl)
            on = {**session.describe(), "dilation": session.dilation,
                  "host_speed": session.host_speed_record(),
                  "placement": [{"node": n, "ranks": c} for n, c in planned.blocks]}
    else:
        result = apps.run(mpi, request.app, request.program_args, planned.ranks, planned.mode,
                          impl=request.impl, own_cores=planned.preset is not None)
    split = result.time_split()
    devices = (placement.modelled_power(planned.preset, split, run_wall(result))
               if planned.preset else [])
    done = RunResult(result, planned.mode, mpi.name, split, devices, on)
    if request.out is not None:
        keep(done, request)
    return done


def keep(done: RunResult, request: RunRequest) -> Path:
    """The run directory of one program run: its manifest, the whole report (report.json)
    and who talked to whom (traffic.csv, traffic.json, traffic.png)."""
    from shoal.runs.store import Run
    from shoal.wait import traffic

    run = Run.create("dsm-run", request.command, request.out, app=request.app, impl=request.impl,
                     mode=done.mode, mpi=done.mpi, ranks=len(done.result.ranks))
    (run.path / "report.json").write_text(jsonout.dumps(done.to_json()) + "\n")
    roles = ", ".join(f"{r['rank']} {r['role']}" for r in done.result.ranks)
    traffic.write(run.path, done.result.traffic(), len(done.result.ranks),
                  f"{request.app} ({request.impl}) under {done.mode}, {done.mpi}: ranks {roles}")
    run.finish()
    return run.path
