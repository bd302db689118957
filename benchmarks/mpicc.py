"""Compile one of the benchmarks' own C programs with an MPI's mpicc.

Shared by the scripts that measure shoal against a hand-written reference
program (harness_overhead.py, wait_instructions.py).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from shoal.errors import ShoalError
from shoal.mpi import discover

HERE = Path(__file__).resolve().parent


def compile_program(mpi: discover.MPIInstall, source: str, out_dir: Path) -> Path:
    """benchmarks/<source> built with -O2 by this MPI's mpicc into out_dir."""
    exe = out_dir / f"{Path(source).stem}_{mpi.kind}"
    cmd = [str(mpi.mpicc), "-O2", "-o", str(exe), str(HERE / source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **mpi.env()})
    if proc.returncode != 0:
        raise ShoalError(f"compiling {source} failed: {proc.stderr.strip()[:300]}")
    return exe
