#!/usr/bin/env python3
"""shoal's `ep` and `is` against the NAS Parallel Benchmarks' own, built from a copy of NPB.

    .venv/bin/python benchmarks/npb_reference.py PATH_TO_NPB [PATH ...] [--rounds 3] [--classes S,W]

NPB is not part of shoal: give the directory (or directories) holding your
copy. Under them the script finds a C EP (a suite with EP/ep.c, such as
NPB3.0-omp-C or NPB3.3-SER-C/OMP-C: NPB3.x-MPI's and -OMP's EP are Fortran)
and NPB3.x-MPI's IS (IS/is.c). It copies each suite to a temporary
directory, writes its config/make.def for this MPI's mpicc with NPB's `-O3`
(`-fopenmp` for the OpenMP suite, run with one thread), and builds EP at
one rank and IS for two ranks, class by class.

Each round runs, per kernel and class, NPB's program and `shoal-work` one
after the other (the order alternating between rounds, so that load from
other processes falls on both alike) and reads the Mop/s each reports
(shoal: units of work / time_s / 10^6; the same counts as NPB's); with
--best-of K a round's figure is the best of K alternating runs. It prints
every round, then per kernel and class the median and range of each and of
the per-round ratio shoal / NPB, and the ratio of the best runs. For EP (one process) it also divides the
operations by the CPU seconds each used (NPB's process; shoal's rank 0 over
the run): on a host other jobs load, that ratio moves far less than the
wall-clock one. Target: the median ratio within 0.90..1.10, and both
verifying. Exit 0 when every case verifies, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from shoal.errors import ShoalError
from shoal.mpi import build, discover
from shoal.mpi.launch import Job

from entry import run_main

# Kernel -> ranks it is compared at (issue 26: EP at one rank, IS at two).
RANKS = {"ep": 1, "is": 2}
TARGET = 0.10
# EP's operations per class: 2^(M+1) random numbers (NPB's count).
EP_OPS = {"S": 2.0 ** 25, "W": 2.0 ** 26, "A": 2.0 ** 29}


@dataclass
class Suite:
    """One NPB suite directory and how its make.def is written."""

    kernel: str
    root: Path
    openmp: bool


@dataclass
class Case:
    kernel: str
    cls: str
    npb_exe: Path | None = None
    npb: list[float] = field(default_factory=list)
    shoal: list[float] = field(default_factory=list)
    # Mop/s per CPU second (EP): what a loaded host's other processes do not change.
    npb_cpu: list[float] = field(default_factory=list)
    shoal_cpu: list[float] = field(default_factory=list)
    verified: list[bool] = field(default_factory=list)


def _is_suite(d: Path) -> bool:
    return (d / "sys" / "setparams.c").is_file() and (d / "config").is_dir()


def find_suites(paths: list[Path], kernels: list[str]) -> dict[str, Suite]:
    """The C EP suite and the MPI IS suite (those of kernels) under the given directories."""
    found: dict[str, Suite] = {}
    for top in paths:
        if not top.is_dir():
            raise ShoalError(f"{top} is not a directory: give the directory holding your copy of NPB")
        candidates = [top] + sorted(p.parent.parent for p in top.rglob("sys/setparams.c"))
        for d in candidates:
            if not _is_suite(d):
                continue
            ep_c, is_c = d / "EP" / "ep.c", d / "IS" / "is.c"
            if "ep" not in found and ep_c.is_file():
                found["ep"] = Suite("ep", d, openmp="#pragma omp" in ep_c.read_text(errors="replace"))
            if "is" not in found and is_c.is_file() and "MPI_Init" in is_c.read_text(errors="replace"):
                found["is"] = Suite("is", d, openmp=False)
    missing = [k for k in kernels if k not in found]
    if missing:
        what = {"ep": "a C EP (a suite with EP/ep.c: NPB3.0-omp-C, NPB3.3-SER-C or -OMP-C)",
                "is": "NPB3.x-MPI's IS (a suite with IS/is.c calling MPI_Init)"}
        raise ShoalError(f"no {' and no '.join(what[k] for k in missing)} under "
                         f"{', '.join(map(str, paths))}: give the directories holding them")
    return found


def make_def(mpicc: Path, openmp: bool) -> str:
    """A make.def both NPB families read (the C suites' and the MPI suites' variable names)."""
    cflags = "-O3 -fopenmp" if openmp else "-O3"
    return "\n".join([
        f"CC = {mpicc}", f"UCC = {mpicc}", f"MPICC = {mpicc}", f"CLINK = {mpicc}",
        f"CFLAGS = {cflags}", f"CLINKFLAGS = {cflags}",
        "C_LIB = -lm", "C_INC = -I../common", "CMPI_LIB = -lm", "CMPI_INC =",
        "F77 = false", "FLINK = false", "MPIF77 = false", "MPIFC = false", "FFLAGS = -O3",
        "BINDIR = ../bin", "RAND = randdp", "WTIME = wtime.c", "CONVERTFLAG = -DFORTRAN_REC_SIZE=1", "",
    ])


def build_npb(suite: Suite, cls: str, mpi: discover.MPIInstall, work: Path) -> Path:
    """NPB's program for one class, built in a copy of the suite."""
    copy = work / f"{suite.kernel}-{cls}"
    if not copy.exists():
        shutil.copytree(suite.root, copy, symlinks=True,
                        ignore=shutil.ignore_patterns("*.o", "bin", ".git"))
    (copy / "config" / "make.def").write_text(make_def(mpi.mpicc, suite.openmp))
    (copy / "bin").mkdir(exist_ok=True)
    kdir = copy / suite.kernel.upper()
    # NPROCS: NPB3.3-MPI fixes the rank count at build time; NPB3.4 ignores it.
    proc = subprocess.run(["make", "-C", str(kdir), f"CLASS={cls}", f"NPROCS={RANKS[suite.kernel]}"],
                          capture_output=True, text=True, env={**os.environ, **mpi.env()})
    exes = sorted((copy / "bin").glob(f"{suite.kernel}.{cls}*"), key=lambda p: p.stat().st_mtime)
    if proc.returncode != 0 or not exes:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        raise ShoalError(f"building NPB {suite.kernel.upper()} class {cls} in {suite.root} failed: "
                         f"{' / '.join(tail)[:400]}")
    return exes[-1]


def run_job(mpi: discover.MPIInstall, ranks: int, argv: list[str], env: dict[str, str]) -> str:
    job = Job(mpi=mpi, ranks=ranks, argv=argv, rank_env=env)
    cmd, _ = job.command()
    proc = subprocess.run(cmd, env={**job.popen_env(), **env}, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise ShoalError(f"{Path(argv[0]).name} failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return proc.stdout


def run_direct(argv: list[str], env: dict[str, str]) -> tuple[str, float]:
    """A one-process program run without mpiexec: its output and the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=1800)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise ShoalError(f"{Path(argv[0]).name} failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return proc.stdout, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def run_npb(mpi: discover.MPIInstall, case: Case) -> tuple[float, float | None, bool]:
    """NPB's Mop/s, its Mop/s per CPU second (EP only), and whether it verified."""
    cpu = None
    if RANKS[case.kernel] == 1:
        # EP is an OpenMP program, not an MPI one: run on its own, so its CPU time is its own.
        out, cpu = run_direct([str(case.npb_exe)], {"OMP_NUM_THREADS": "1"})
    else:
        out = run_job(mpi, RANKS[case.kernel], [str(case.npb_exe)], {})
    mops = re.search(r"Mop/s total\s*=\s*([0-9.eE+-]+)", out)
    ver = re.search(r"Verification\s*=\s*(\S+)", out)
    if not mops or not ver:
        raise ShoalError(f"{case.npb_exe.name} printed no Mop/s or verification: {out.strip()[-300:]}")
    cpu_mops = EP_OPS[case.cls] / cpu / 1e6 if cpu else None
    return float(mops.group(1)), cpu_mops, ver.group(1) == "SUCCESSFUL"


def run_shoal(mpi: discover.MPIInstall, program: Path, case: Case) -> tuple[float, float | None, bool]:
    """shoal's Mop/s (work / time_s), per CPU second of rank 0 (EP only), and NPB's verification."""
    out = run_job(mpi, RANKS[case.kernel], [str(program), "--runs", f"{case.kernel}:{case.cls}"], {})
    (rec,) = [r for r in map(json.loads, filter(None, out.splitlines())) if r["type"] == "result"]
    cpu_mops = rec["work"] / rec["rank_cpu_s"][0] / 1e6 if RANKS[case.kernel] == 1 else None
    return rec["work"] / rec["time_s"] / 1e6, cpu_mops, bool(rec["extra"].get("npb_verified"))


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.2f} [{min(values):.2f}..{max(values):.2f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("npb", nargs="+", type=Path, help="directory (or directories) holding your copy of NPB")
    parser.add_argument("--mpi", default=None, help="mpich, openmpi or a path (default: mpich)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--classes", default="S,W", help="NPB classes, comma-separated (default S,W)")
    parser.add_argument("--kernels", default="ep,is", help="ep, is or both (default ep,is)")
    parser.add_argument("--best-of", type=int, default=1,
                        help="a round's figure is the best of this many alternating runs of each (default 1; "
                             "IS class S runs last tens of milliseconds, and on a loaded host 5 helps)")
    args = parser.parse_args()
    classes = [c.strip().upper() for c in args.classes.split(",") if c.strip()]
    kernels = [k.strip().lower() for k in args.kernels.split(",") if k.strip()]
    if not classes or any(c not in ("S", "W", "A") for c in classes):
        raise ShoalError(f"--classes {args.classes!r}: give classes among S, W, A (e.g. S,W)")
    if not kernels or any(k not in RANKS for k in kernels):
        raise ShoalError(f"--kernels {args.kernels!r}: give ep, is or ep,is")
    if args.rounds < 1 or args.best_of < 1:
        raise ShoalError(f"--rounds {args.rounds} --best-of {args.best_of}: give at least 1 for each")

    suites = find_suites(args.npb, kernels)
    mpi = discover.resolve(args.mpi)
    program = build.build("work", mpi)
    cases = [Case(k, c) for k in kernels for c in classes]
    with tempfile.TemporaryDirectory(prefix="shoal-npb-") as tmp:
        for case in cases:
            case.npb_exe = build_npb(suites[case.kernel], case.cls, mpi, Path(tmp))
        for k in kernels:
            kind = ("OpenMP, 1 thread" if suites[k].openmp else "serial") if k == "ep" else "MPI"
            print(f"{k.upper()} from {suites[k].root} ({kind}) at {RANKS[k]} rank(s)")
        print(f"{mpi.name}, {args.rounds} interleaved rounds, each figure the best of {args.best_of} run(s)",
              flush=True)
        for rnd in range(args.rounds):
            for case in cases:
                order = ("npb", "shoal") if rnd % 2 == 0 else ("shoal", "npb")
                best: dict[str, tuple[float, float | None]] = {}
                for _ in range(args.best_of):
                    for who in order:
                        mops, cpu_mops, ok = run_npb(mpi, case) if who == "npb" else run_shoal(mpi, program, case)
                        case.verified.append(ok)
                        if who not in best or mops > best[who][0]:
                            best[who] = (mops, cpu_mops)
                for who, (mops, cpu_mops) in best.items():
                    getattr(case, who).append(mops)
                    if cpu_mops is not None:
                        getattr(case, f"{who}_cpu").append(cpu_mops)
                line = (f"round {rnd + 1}: {case.kernel.upper()} {case.cls}  NPB {case.npb[-1]:8.2f} Mop/s  "
                        f"shoal {case.shoal[-1]:8.2f} Mop/s  ratio {case.shoal[-1] / case.npb[-1]:.3f}")
                if case.npb_cpu:
                    line += (f"   per CPU s: NPB {case.npb_cpu[-1]:.2f}  shoal {case.shoal_cpu[-1]:.2f}  "
                             f"ratio {case.shoal_cpu[-1] / case.npb_cpu[-1]:.3f}")
                print(line, flush=True)

    print("\nMop/s, median [min..max] over the rounds; ratio = shoal / NPB, per round; "
          "best = shoal's highest / NPB's highest (the runs other processes disturbed least)")
    print(f"{'kernel':6} {'class':5} {'ranks':5} {'measure':10} {'NPB':>22} {'shoal':>22} {'ratio':>22} "
          f"{'best':>6}  verified  target")
    all_ok = True
    for case in cases:
        verified = all(case.verified)
        all_ok &= verified
        rows = [("wall", case.npb, case.shoal)]
        if case.npb_cpu:
            rows.append(("per CPU s", case.npb_cpu, case.shoal_cpu))
        for measure, npb, ours in rows:
            ratios = [s / n for s, n in zip(ours, npb)]
            met = abs(statistics.median(ratios) - 1) <= TARGET and verified
            print(f"{case.kernel.upper():6} {case.cls:5} {RANKS[case.kernel]:5} {measure:10} {spread(npb):>22} "
                  f"{spread(ours):>22} {spread(ratios):>22} {max(ours) / max(npb):6.2f}  "
                  f"{'yes' if verified else 'NO':8}  {'met' if met else 'MISSED'}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    run_main(main)
