"""Shared by the benchmarks/wait_*.py scripts: run a scenario, alternate modes.

Each script measures libshoalwait's modes next to the reference (busy, the
MPI's own spinning) in the same run, alternating them round by round so a
noisy machine hits all of them alike, and prints ratios.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

import numpy as np

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


def run(mpi, mode: str | None, ranks: int, args: list[str], telemetry_dir=None) -> dict:
    """One run of shoal-waittest; mode None runs without the library."""
    data, _, _ = run_program(mpi, Contender(mode or "none", mode), ranks, args,
                             telemetry_dir=telemetry_dir)
    return data


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def interleaved(mpi, modes: list[str], rounds: int, ranks: int, args: list[str]) -> dict[str, list[dict]]:
    """Every mode once per round, alternating (mode "none": without the library): each run's data."""
    runs = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            runs[mode].append(run(mpi, None if mode == "none" else mode, ranks, args))
    return runs


def sleep_lateness(seconds: float, count: int) -> np.ndarray:
    """How late clock_nanosleep(seconds) ends, `count` times (s): the floor
    under any waiter that sleeps, measured on this host in the same run."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(29, 1, 0, 0, 0)   # PR_SET_TIMERSLACK: 1 ns, as libshoalwait asks
    req = _Timespec(int(seconds), int((seconds % 1) * 1e9))
    late = np.empty(count)
    for i in range(count):
        t0 = time.monotonic_ns()
        libc.clock_nanosleep(1, 0, ctypes.byref(req), None)   # CLOCK_MONOTONIC
        late[i] = (time.monotonic_ns() - t0) * 1e-9 - seconds
    return late


def median(values) -> float:
    return statistics.median(values)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"
