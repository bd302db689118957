"""Shared cable plant: emulated IMB PingPong and Bcast against the link model, N = 2, 8, 32.

docsis-27m is one medium: every device's upstream takes turns on one 27 Mbit/s channel,
each burst after a request-grant wait (1-2 MAP intervals of 2 ms), a device sending at
most at its own cap (5.12 Mbit/s), and the head-end broadcasts on one downstream channel. For each N, N emulated NUCs on docsis-27m run
``shoal bench`` (MPICH, one call per repetition, ranks in event mode,
D = 1 so the link is not dilated); the references computed in the same run are the link
model's (cluster.linkmodel): ping-pong one-way time, and ``bench_bcast_s``, the same
repetition loop (barrier, broadcast, reduction of the slowest time, decision) on the shared
medium, frame by frame with each connection's TCP window (cluster.tcpmodel: a window that
restarts after idle, as the devices' kernels do), the run's sizes in its order. Beside it:
the message-level model (every message at the link's rate from its first byte), and that
with a 27 Mbit/s port per device, to show what TCP's window, sharing and the cap change.
Target: every ratio within +-15 %. Points where the host ran short of CPU are marked
(cluster.slack). --read --out DIR holds an earlier run's results against the models as
they are now.
Run as root: .venv/bin/python benchmarks/cluster_shared_medium.py [--nodes 2,8,32] [--rounds 2]
             [--sizes 64,1024,4096] [--out DIR] [--read]
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
# Segments a connection may send when the run's first point starts: the ranks' start-up
# has opened the windows by then. Measured with `ss -tin` on rank 0's connection to rank 16
# of a 32-box run (56 segments before its first point); the model reads the same from 16
# to 150 segments, and not from 10 (the 16 KiB point then starts in a window too small).
START_WINDOW = 56


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


def measured_rounds(args, out: Path, counts: list[int]):
    """(round, N, rows) of every bench run: run now, or read from an earlier run's folder."""
    for rnd in range(args.rounds):  # interleaved: every N once per round
        for n in counts:
            tests = "imb.PingPong,imb.Bcast" if n == 2 else "imb.Bcast"
            where = out / f"r{rnd}-n{n}"
            if args.read:
                with open(where / "results.csv") as fh:
                    yield rnd, n, list(csv.DictReader(fh))
            else:
                yield rnd, n, bench(n, tests, args.sizes, where)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", default="2,8,32")
    p.add_argument("--sizes", default="64,1024,4096")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--read", action="store_true",
                   help="hold the results already under --out against the models, run nothing")
    args = p.parse_args()
    if args.read and args.out is None:
        raise SystemExit("--read needs --out: the folder of an earlier run")
    out = args.out or Path(tempfile.mkdtemp(prefix="shoal-shared-medium-"))
    link = profiles.load_links()[LINK]
    ports = replace(link, shared=False, grant_interval_s=0.0)
    counts = [int(x) for x in args.nodes.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")]
    times: dict[tuple, list[float]] = {}
    slack: dict[tuple, list[str]] = {}
    for _, n, rows in measured_rounds(args, out, counts):
        for row in rows:
            key = (row["test"], n, int(row["size_B"]))
            times.setdefault(key, []).append(float(row["time_median_s"]))
            slack.setdefault(key, []).append(row.get("host_slack", ""))
    # The model: one run's sizes in order, frame by frame with TCP's window, from the
    # window the start-up leaves open.
    tcp = {n: linkmodel.bench_bcast_run_s(link, n, sizes, tcp=True, window=START_WINDOW) for n in counts}
    print(f"{LINK}: shared medium, {args.rounds} interleaved rounds, results under {out}")
    print(f"{'test':<13}{'N':>4}{'size_B':>8}{'model ms':>10}  {'ratio median (min..max)':<28}"
          f"{'messages':>9}{'ports ms':>9}  ratio to messages")
    worst = worst_messages = 0.0
    for (test, n, size), measured in sorted(times.items()):
        if test == "imb.PingPong":
            model = messages = linkmodel.path(link).one_way_s(size)
            alone = linkmodel.path(ports).one_way_s(size)
        else:
            model = tcp[n][size]
            messages = linkmodel.bench_bcast_s(link, n, size)
            alone = linkmodel.bench_bcast_s(ports, n, size)
        values = [t / model for t in measured]
        med = statistics.median(values)
        worst = max(worst, abs(med - 1))
        by_messages = statistics.median(measured) / messages
        worst_messages = max(worst_messages, abs(by_messages - 1))
        short = sum(1 for s in slack[(test, n, size)] if s == "short")
        print(f"{test:<13}{n:>4}{size:>8}{model * 1e3:>10.2f}  "
              f"{f'{med:.3f} ({min(values):.3f}..{max(values):.3f})':<20}"
              f"{'ok' if abs(med - 1) <= 0.15 else 'OUTSIDE':<8}{messages * 1e3:>9.1f}{alone * 1e3:>9.1f}  "
              f"{by_messages:.3f}{f' [host short in {short} of {len(values)}]' if short else ''}")
    print(f"worst deviation of a median ratio: {worst:.3f} (model), {worst_messages:.3f} (messages)")
    return 0

if __name__ == "__main__":
    run_main(main)
