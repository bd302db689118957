"""`shoal bench` as a library call: resolve the request, run it, return the run.

The request is stored in the manifest, so ``--resume RUN`` repeats exactly
the same sweep and measures only what is missing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal import hostfacts
from shoal.bench import catalog
from shoal.bench.sizes import parse_sizes
from shoal.bench.sweep import Config, Events, Options, Point, Sweep
from shoal.errors import ShoalError
from shoal.mpi import build, discover
from shoal.mpi.launch import Job
from shoal.runs.store import Run


@dataclass
class BenchRequest:
    """Everything that defines a benchmark sweep (saved in the manifest)."""

    tests: str = "mpbench,imb"
    sizes: str = "1..4M"
    ranks: list[int] = field(default_factory=lambda: [2])
    mpi: str | None = None
    options: Options = field(default_factory=Options)

    def to_manifest(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["options"] = dataclasses.asdict(self.options)
        return data

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> "BenchRequest":
        data = dict(data)
        data["options"] = Options(**data.get("options", {}))
        return cls(**data)


@dataclass
class Plan:
    """A resolved request: the MPI, the program, and the points per configuration."""

    mpi: discover.MPIInstall
    program: Path
    configs: list[tuple[Config, list[Point]]]

    @property
    def total_points(self) -> int:
        return sum(len(points) for _, points in self.configs)


def plan(request: BenchRequest) -> Plan:
    mpi = discover.resolve(request.mpi)
    program = build.build("bench", mpi)
    tests = catalog.select(catalog.load(program), request.tests)
    sizes = parse_sizes(request.sizes)
    if not request.ranks:
        raise ShoalError("no rank counts given; use e.g. --ranks 2 or --ranks 2,4")
    configs = []
    for ranks in request.ranks:
        too_many = [t.name for t in tests if t.min_ranks > ranks]
        if too_many:
            raise ShoalError(f"{', '.join(too_many)} need(s) at least "
                             f"{max(t.min_ranks for t in tests)} ranks but --ranks gives {ranks}; "
                             "raise --ranks or choose other tests")
        points = [Point(t.name, size) for t in tests for size in _sizes_for(t, sizes)]
        configs.append((_local_config(mpi, ranks), points))
    return Plan(mpi, program, configs)


def _sizes_for(test: catalog.TestInfo, sizes: list[int]) -> list[int]:
    # A barrier moves no data: measure it once, at size 0.
    return [0] if test.name == "imb.Barrier" else sizes


def _local_config(mpi: discover.MPIInstall, ranks: int) -> Config:
    def make_job(argv: list[str]) -> Job:
        return Job(mpi=mpi, ranks=ranks, argv=argv)

    return Config(label="local", nodes=1, ranks=ranks, make_job=make_job)


def start(request: BenchRequest, command: list[str], out: Path | None) -> tuple[Run, Plan]:
    the_plan = plan(request)
    run = Run.create("bench", command, out, request=request.to_manifest(),
                     mpi=the_plan.mpi.describe(), host=hostfacts.collect(),
                     transport_env=_transport_env())
    return run, the_plan


def resume(path: Path) -> tuple[Run, BenchRequest, Plan]:
    run = Run.open(path)
    manifest = run.manifest
    if manifest.get("kind") != "bench" or "request" not in manifest:
        raise ShoalError(f"{path} is not a 'shoal bench' run; --resume takes a directory made by shoal bench")
    request = BenchRequest.from_manifest(manifest["request"])
    the_plan = plan(request)
    if the_plan.mpi.identity != discover.MPIInstall(**_mpi_fields(manifest["mpi"])).identity:
        raise ShoalError(f"{path} was measured with {manifest['mpi']['name']} at "
                         f"{manifest['mpi']['bindir']}, which is not available now; "
                         "resume with the same MPI")
    run.update_manifest(status="running", resumed=manifest.get("resumed", 0) + 1)
    return run, request, the_plan


def execute(run: Run, the_plan: Plan, options: Options, events: Events | None = None) -> Run:
    sweep = Sweep(run, the_plan.program, options, events or Events())
    for config, points in the_plan.configs:
        sweep.run_config(config, points)
    failures = len(run.rows("failures"))
    run.finish("complete" if not failures else "complete-with-failures")
    return run


def _mpi_fields(described: dict[str, str]) -> dict[str, Any]:
    return {"kind": described["kind"], "version": described["version"],
            "abi": described["abi"], "bindir": Path(described["bindir"])}


def _transport_env() -> dict[str, str]:
    """MPI transport settings in the environment: they change what is measured."""
    import os

    prefixes = ("MPIR_CVAR_", "MPICH_", "UCX_", "FI_", "OMPI_MCA_", "PRTE_MCA_", "SHOAL_WAIT")
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(prefixes)}
