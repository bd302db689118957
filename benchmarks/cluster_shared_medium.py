"""Shared cable plant: emulated IMB PingPong and Bcast against the link model, N = 2, 8, 32.

docsis-27m is one medium: every device's upstream takes turns on one 27 Mbit/s channel,
each burst after a request-grant wait (1-2 MAP intervals of 2 ms), a device sending at
most at its own cap (5.12 Mbit/s), and the head-end broadcasts on one downstream channel. For each N, N emulated NUCs on docsis-27m run
``shoal bench`` (MPICH, one call per repetition, ranks in event mode,
D = 1 so the link is not dilated); the references computed in the same run are the link
model's (cluster.linkmodel): ping-pong one-way time, and ``bench_bcast_s``, the same
repetition loop (barrier, broadcast, reduction of the slowest time, decision) on the shared
medium. The model with a 27 Mbit/s port per device is printed beside it, to show what
sharing and the cap change. Target: every ratio within +-15 %. Points where the host ran short of CPU are
marked (cluster.slack).
Run as root: .venv/bin/python benchmarks/cluster_shared_medium.py [--nodes 2,8,32] [--rounds 2]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from entry import run_main

from shoal import profiles
from shoal.cluster import linkmodel

LINK = "docsis-27m"


def bench(n: int, tests: str, sizes: str, out: Path) -> list[dict]:
    argv = [sys.executable, "-m", "shoal", "bench", "--mpi", "mpich", "--emulate", f"{n}xnuc",
            "--link", LINK, "--dilation", "1", "--wait", "event", "--nodes", str(n),
            "--tests", tests, "--sizes", sizes, "--rep-time", "1e-6", "--budget", "4",
            "--min-reps", "20", "--out", str(out)]
    # MPICH's binomial tree at every size, the model's (left to itself, from 12 KiB on 8 or
    # more ranks it scatters and gathers). The ranks wait in event mode, so libshoalwait runs
    # each MPI_Bcast as MPI_Ibcast, which shoal gives the twin setting (docs/wait.md).
    env = {**os.environ, "MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if not (out / "results.csv").exists():
        raise SystemExit(f"shoal bench failed: {done.stderr.strip()[-500:]}")
    with open(out / "results.csv") as fh:
        return list(csv.DictReader(fh))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", default="2,8,32")
    p.add_argument("--sizes", default="64,1024,4096")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="shoal-shared-medium-"))
    link = profiles.load_links()[LINK]
    ports = replace(link, shared=False, grant_interval_s=0.0)
    counts = [int(x) for x in args.nodes.split(",")]
    ratios: dict[tuple, list[float]] = {}
    slack: dict[tuple, list[str]] = {}
    for rnd in range(args.rounds):  # interleaved: every N once per round
        for n in counts:
            tests = "imb.PingPong,imb.Bcast" if n == 2 else "imb.Bcast"
            for row in bench(n, tests, args.sizes, out / f"r{rnd}-n{n}"):
                size = int(row["size_B"])
                if row["test"] == "imb.PingPong":
                    model = linkmodel.path(link).one_way_s(size)
                else:
                    model = linkmodel.bench_bcast_s(link, n, size)
                key = (row["test"], n, size)
                ratios.setdefault(key, []).append(float(row["time_median_s"]) / model)
                slack.setdefault(key, []).append(row.get("host_slack", ""))
    print(f"{LINK}: shared medium, {args.rounds} interleaved rounds, results under {out}")
    print(f"{'test':<13}{'N':>4}{'size_B':>8}{'model ms':>10}{'ports ms':>10}  ratio median (min..max)")
    worst = 0.0
    for (test, n, size), values in sorted(ratios.items()):
        if test == "imb.PingPong":
            model, alone = linkmodel.path(link).one_way_s(size), linkmodel.path(ports).one_way_s(size)
        else:
            model, alone = linkmodel.bench_bcast_s(link, n, size), linkmodel.bench_bcast_s(ports, n, size)
        med = statistics.median(values)
        worst = max(worst, abs(med - 1))
        short = sum(1 for s in slack[(test, n, size)] if s == "short")
        print(f"{test:<13}{n:>4}{size:>8}{model * 1e3:>10.2f}{alone * 1e3:>10.2f}  {med:.3f} "
              f"({min(values):.3f}..{max(values):.3f}) {'ok' if abs(med - 1) <= 0.15 else 'OUTSIDE 15%'}"
              f"{f' [host short in {short} of {len(values)}]' if short else ''}")
    print(f"worst deviation of a median ratio: {worst:.3f}")
    return 0


if __name__ == "__main__":
    run_main(main)
