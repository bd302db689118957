"""A library built for one MPI, loaded into a program of the other, refuses."""

from __future__ import annotations

import subprocess

import pytest

from shoal.mpi.launch import Job
from shoal.wait.library import library_for
from tests.wait.helpers import waittest


@pytest.mark.parametrize("built_for,runs", [("mpich", "openmpi"), ("openmpi", "mpich")])
def test_wrong_mpi_is_named_and_refused(request, built_for, runs):
    lib_mpi = request.getfixturevalue(built_for)
    prog_mpi = request.getfixturevalue(runs)
    job = Job(prog_mpi, 2, [str(waittest(prog_mpi)), "result"],
              rank_env={"LD_PRELOAD": str(library_for(lib_mpi)), "SHOAL_WAIT": "backoff"})
    argv, _ = job.command()
    proc = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("shoalwait:")]
    assert len(lines) == 1, proc.stderr
    built = "MPICH 5" if built_for == "mpich" else "Open MPI v5"
    running = "Open MPI v5" if runs == "openmpi" else "MPICH 5"
    assert f"built for {built}" in lines[0] and f"program runs {running}" in lines[0]
    assert '"result"' not in proc.stdout
