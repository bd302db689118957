"""Running shoal-sdsm and shoal-sdsmcheck for the tests."""

from __future__ import annotations

import functools
import json

from shoal import proc
from shoal.dsm import apps
from shoal.mpi import build
from shoal.mpi.launch import Job
from shoal.wait import apply


@functools.lru_cache(maxsize=None)
def explorer(mpi, *args, mutant: bool = False) -> tuple[int, dict]:
    flags = ("-DSDSM_HOME_MUTANT=1",) if mutant else ()
    exe = build.build("sdsmcheck", mpi, flags)
    done = proc.run([str(exe), *args], timeout=300)
    return done.returncode, json.loads(done.stdout)


def launch(mpi, ranks: int, args: list[str], mode: str | None = "busy", env=None,
           timeout: float = 300):
    """shoal-sdsm ARGS on `ranks` ranks, raw (for runs expected to fail)."""
    job = Job(mpi, ranks, [str(apps.program(mpi)), *args], rank_env=dict(env or {}))
    if mode is not None:
        job = apply(job, mode)
    return job.run(timeout=timeout)


def last_json(text: str) -> dict:
    return json.loads([ln for ln in text.splitlines() if ln.startswith("{")][-1])
