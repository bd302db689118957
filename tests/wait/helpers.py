"""Running shoal-waittest scenarios under a wait mode, for the tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from shoal.mpi import build
from shoal.mpi.launch import Job
from shoal.wait import apply

MODES = ["busy", "yield", "sleep:0", "sleep:50", "linear", "linear:1000,20000,1000", "backoff",
         "backoff:0,2000", "auto"]


def waittest(mpi) -> Path:
    return build.build("waittests", mpi)


def run_scenario(mpi, mode, ranks, *args, telemetry=None, env=None, timeout=120,
                 preload=True):
    """Run shoal-waittest under ``mode``; return the CompletedProcess."""
    job = Job(mpi, ranks, [str(waittest(mpi)), *args], rank_env=dict(env or {}))
    if preload:
        job = apply(job, mode, telemetry_dir=telemetry)
    argv, _ = job.command()
    return subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True,
                          timeout=timeout)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]
