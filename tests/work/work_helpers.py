"""Launching the workload program in tests."""

from __future__ import annotations

import json
import subprocess

from shoal.mpi import build
from shoal.mpi.launch import Job
from shoal.work import catalog


def small(program) -> str:
    """Every workload at its small size (well under a second at any rank count), as the
    program's --list gives them."""
    return ",".join(f"{w.name}:{w.small_size}" for w in catalog.load(program))


def workloads(program) -> list[str]:
    return [w.name for w in catalog.load(program)]


def work_program(mpi, cache):
    if mpi.kind not in cache:
        cache[mpi.kind] = build.build("work", mpi)
    return cache[mpi.kind]


def launch(mpi, program, ranks, args, timeout=240):
    """Run shoal-work under mpiexec; return (exit code, result records by workload, stderr)."""
    job = Job(mpi=mpi, ranks=ranks, argv=[str(program), *args])
    argv, _ = job.command()
    proc = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True, timeout=timeout)
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    results = {r["workload"]: r for r in records if r["type"] == "result"}
    return proc.returncode, results, proc.stderr
