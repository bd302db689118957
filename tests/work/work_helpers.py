"""Launching the workload program in tests."""

from __future__ import annotations

import json
import subprocess

from shoal.mpi import build
from shoal.mpi.launch import Job
from shoal.work.catalog import SMALL_SIZES

# Every workload at a size that takes well under a second at any rank count.
SMALL = ",".join(f"{name}:{size}" for name, size in SMALL_SIZES.items())
WORKLOADS = tuple(SMALL_SIZES)


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
