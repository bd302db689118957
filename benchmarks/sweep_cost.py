#!/usr/bin/env python3
"""Wall time of a full adaptive shoal sweep vs OSU's fixed iteration counts.

Runs, on this machine and MPI, OSU Micro-Benchmarks' tests that have a
counterpart in shoal's suites (each with OSU's default iteration counts and
sizes) and then `shoal bench` over the same tests and sizes, each point
stopping when its 95% CI of the median is within 2%. Prints both wall times,
their ratio (target: shoal / OSU < 1) and the CI each point reached.

OSU is not part of shoal: build it yourself against the same MPI and pass
its directory (the one holding osu_latency, osu_bw, ...) with --osu-dir.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

# OSU program -> (shoal test, OSU's default largest size). OSU's collectives
# stop at 1 MiB by default, its point-to-point tests at 4 MiB.
PAIRS = {
    "osu_latency": ("imb.PingPong", 4 << 20),
    "osu_bw": ("imb.Uniband", 4 << 20),
    "osu_bibw": ("mpbench.bibw", 4 << 20),
    "osu_bcast": ("imb.Bcast", 1 << 20),
    "osu_reduce": ("imb.Reduce", 1 << 20),
    "osu_allreduce": ("imb.Allreduce", 1 << 20),
    "osu_alltoall": ("imb.Alltoall", 1 << 20),
    "osu_gather": ("imb.Gather", 1 << 20),
    "osu_scatter": ("imb.Scatter", 1 << 20),
    "osu_allgather": ("imb.Allgather", 1 << 20),
    "osu_reduce_scatter": ("imb.Reduce_scatter", 1 << 20),
}


def find_osu(osu_dir: Path, name: str) -> Path | None:
    hits = [p for p in osu_dir.rglob(name) if p.is_file() and os.access(p, os.X_OK)]
    return hits[0] if hits else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--osu-dir", type=Path, required=True)
    parser.add_argument("--mpi", default="mpich")
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()

    from shoal.mpi import discover
    from shoal.mpi.launch import Job

    mpi = discover.resolve(args.mpi)
    programs = {name: find_osu(args.osu_dir, name) for name in PAIRS}
    missing = [n for n, p in programs.items() if p is None]
    if missing:
        print(f"missing in {args.osu_dir}: {', '.join(missing)} (compared without them)")
    chosen = {n: PAIRS[n] for n, p in programs.items() if p is not None}

    t0 = time.monotonic()
    for name in chosen:
        argv, env = Job(mpi, args.ranks, [str(programs[name])]).command()
        subprocess.run(argv, env={**os.environ, **env}, check=True, capture_output=True)
    osu_wall = time.monotonic() - t0

    # shoal over the same tests; sizes 1 B up to each test's OSU maximum.
    groups: dict[int, list[str]] = {}
    for test, top in chosen.values():
        groups.setdefault(top, []).append(test)
    shoal_wall = 0.0
    cis: list[float] = []
    unconverged = 0
    with tempfile.TemporaryDirectory() as tmp:
        for top, tests in groups.items():
            out = Path(tmp) / f"run-{top}"
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "shoal", "bench", "--mpi", args.mpi,
                            "--ranks", str(args.ranks), "--tests", ",".join(tests),
                            "--sizes", f"1..{top}", "--ci", "0.02", "--out", str(out), "--json"],
                           check=True, capture_output=True)
            shoal_wall += time.monotonic() - t0
            rows = pd.read_csv(out / "results.csv")
            cis += [float(c) for c in rows["ci_rel"].dropna()]
            unconverged += int((rows["converged"].astype(str).str.lower() != "true").sum())

    cis.sort()
    print(f"tests compared: {len(chosen)} ({', '.join(chosen)})")
    print(f"OSU fixed iterations : {osu_wall:8.1f} s wall (CI not estimated by OSU)")
    print(f"shoal adaptive (2%)  : {shoal_wall:8.1f} s wall, {len(cis)} points, "
          f"median CI half-width {100 * cis[len(cis) // 2]:.2f}%, worst {100 * cis[-1]:.2f}%, "
          f"{unconverged} not converged")
    print(f"ratio shoal/OSU      : {shoal_wall / osu_wall:.3f}  (target < 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
