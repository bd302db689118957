"""Running shoal-sdsm and shoal-sdsmcheck for the tests."""

from __future__ import annotations

import functools
import json
import subprocess

from shoal.dsm import apps
from shoal.mpi import build
from shoal.mpi.launch import Job
from shoal.wait import apply


@functools.lru_cache(maxsize=None)
def explorer(mpi, *args, mutant: bool = False) -> tuple[int, dict]:
    flags = ("-DSDSM_HOME_MUTANT=1",) if mutant else ()
    exe = build.build("sdsmcheck", mpi, flags)
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300)
    return proc.returncode, json.loads(proc.stdout)


def launch(mpi, ranks: int, args: list[str], mode: str | None = "busy", env=None,
           timeout: float = 300) -> subprocess.CompletedProcess:
    """shoal-sdsm ARGS on `ranks` ranks, raw (for runs expected to fail)."""
    job = Job(mpi, ranks, [str(apps.program(mpi)), *args], rank_env=dict(env or {}))
    if mode is not None:
        job = apply(job, mode)
    argv, _ = job.command()
    return subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True,
                          timeout=timeout)


def last_json(text: str) -> dict:
    return json.loads([ln for ln in text.splitlines() if ln.startswith("{")][-1])
