"""Shared by the benchmarks/wait_*.py scripts: run a scenario, alternate modes.

Each script measures libshoalwait's modes next to the reference (busy, the
MPI's own spinning) in the same run, alternating them round by round so a
noisy machine hits all of them alike, and prints ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from shoal.mpi import discover  # noqa: E402
from shoal.wait.lab import Contender, run_program  # noqa: E402


def parser(description: str, rounds: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mpi", default="mpich,openmpi", help="comma list of MPIs")
    p.add_argument("--rounds", type=int, default=rounds, help="alternating rounds per mode")
    return p


def mpis(spec: str):
    return [discover.resolve(s) for s in spec.split(",") if s]


def run(mpi, mode: str | None, ranks: int, args: list[str]) -> dict:
    """One run of shoal-waittest; mode None runs without the library."""
    data, _, _ = run_program(mpi, Contender(mode or "none", mode), ranks, args)
    return data


def median(values) -> float:
    return statistics.median(values)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"
