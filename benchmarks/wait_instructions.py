#!/usr/bin/env python3
"""Instructions the wait path adds per round of messages, counted by callgrind.

Wall-clock ratios of a 200 ns ping-pong on a shared machine move by ±3%
between two identical runs; instruction counts do not. This builds
benchmarks/wait_selfloop.c (rounds of two 8-byte messages to self:
Isend, Recv and Wait, then Irecv, Send and Wait; nothing ever waits, so
only the call path is counted), runs it under `valgrind --tool=callgrind`
without the library and under each mode, and prints instructions per round
and what each mode adds to the program without the library. Deterministic for
a given build: a change to the wait path shows up here as a number.

    .venv/bin/python benchmarks/wait_instructions.py [--mpi mpich,openmpi]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from shoal.errors import ShoalError
from shoal.mpi import discover
from shoal.mpi.launch import Job
from shoal.wait.library import wait_env

from entry import run_main
from mpicc import compile_program

MODES = ["busy", "backoff", "auto"]
LOOPS = 10000


def instructions(mpi: discover.MPIInstall, exe: Path, mode: str | None, out: Path) -> int:
    """Instructions executed inside send_receive_loop, one rank."""
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            "--toggle-collect=send_receive_loop", str(exe), str(LOOPS)]
    job = Job(mpi=mpi, ranks=1, argv=argv,
              rank_env=wait_env(mode, mpi) if mode else {})
    cmd, _ = job.command()
    try:
        proc = subprocess.run(cmd, env=job.popen_env(), capture_output=True, text=True,
                              timeout=600)
    except subprocess.TimeoutExpired as exc:
        raise ShoalError(f"callgrind run ({mode or 'no library'}) did not end in 600 s") from exc
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise ShoalError(f"callgrind run ({mode or 'no library'}) failed: "
                         f"{proc.stderr.strip()[-300:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpi", default="mpich,openmpi", help="comma list of MPIs")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        raise ShoalError("valgrind is not installed; install it (apt install valgrind)")
    with tempfile.TemporaryDirectory(prefix="shoal-wait-instr-") as tmp:
        for spec in args.mpi.split(","):
            mpi = discover.resolve(spec)
            exe = compile_program(mpi, "wait_selfloop.c", Path(tmp))
            base = instructions(mpi, exe, None, Path(tmp) / "none.out") / LOOPS
            print(f"{mpi.name}: instructions per round of two 8 B messages to self "
                  f"({LOOPS} rounds)")
            print(f"  {'no library':10s} {base:8.0f}")
            for mode in MODES:
                per = instructions(mpi, exe, mode, Path(tmp) / f"{mode}.out") / LOOPS
                print(f"  {mode:10s} {per:8.0f}   added {per - base:+6.0f}   "
                      f"ratio to no library {per / base:.3f}")
    return 0


if __name__ == "__main__":
    run_main(main)
