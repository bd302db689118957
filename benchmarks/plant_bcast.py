"""A broadcast down the cable plant once (--bcast multicast) against the MPI's tree.

Seed 002 §V: the plant's downstream is a broadcast medium, yet MPI_Bcast of 256 KiB to N
boxes sends N - 1 copies up the shared upstream and down again. For each N and MPI,
``shoal bench --emulate Nxstb --tests imb.Bcast --sizes 256K --check`` runs twice, with the
MPI's own broadcast and with ``--bcast multicast`` (libshoalplantcast), rounds interleaved.
Every byte of every repetition is checked at every rank (``--check``). It prints each
median (device seconds), the speed-up of multicast over the tree (target at 128 boxes:
10x or more) and how many datagrams were sent again (SHOAL_PLANTCAST_STATS).

Run as root: .venv/bin/python benchmarks/plant_bcast.py [--nodes 8,32,128] [--mpis mpich,openmpi]
             [--rounds 2] [--profile stb] [--size 256K]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from entry import run_main

TARGET = 10.0
LINK = "docsis-27m"


def bench(n: int, mpi: str, mode: str, args, out: Path) -> dict:
    stats = out / "plantcast"
    stats.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "shoal", "bench", "--mpi", mpi, "--emulate", f"{n}x{args.profile}",
            "--link", LINK, "--nodes", str(n), "--tests", "imb.Bcast", "--sizes", args.size, "--check",
            "--budget", str(args.budget), "--bcast", mode, "--out", str(out / "run")]
    started = time.monotonic()
    done = subprocess.run(argv, env={**os.environ, "SHOAL_PLANTCAST_STATS": str(stats)},
                          capture_output=True, text=True)
    wall = time.monotonic() - started
    if not (out / "run" / "results.csv").exists():
        raise SystemExit(f"shoal bench failed ({n} {mpi} {mode}): {done.stderr.strip()[-500:]}")
    with open(out / "run" / "results.csv") as fh:
        (row,) = list(csv.DictReader(fh))
    manifest = json.loads((out / "run" / "manifest.json").read_text())
    dilation = next(iter(manifest["clusters"].values()))["emulation"]["dilation"]
    ranks = [json.loads(p.read_text()) for p in stats.glob("plantcast-*.json")]
    return {"time_s": float(row["time_median_s"]), "check": row["check"], "wall_s": wall, "dilation": dilation,
            "resent": sum(r["resent_chunks"] for r in ranks), "fallbacks": sum(r["fallbacks"] for r in ranks),
            "bcasts": max((r["bcasts"] for r in ranks), default=0)}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", default="8,32,128")
    p.add_argument("--mpis", default="mpich,openmpi")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--profile", default="stb")
    p.add_argument("--size", default="256K")
    p.add_argument("--budget", type=float, default=1.0, help="--budget of each bench (host seconds)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="plant-bcast-"))
    counts = [int(n) for n in args.nodes.split(",")]
    mpis = args.mpis.split(",")
    found: dict[tuple, list[dict]] = {}
    for rnd in range(args.rounds):
        for n in counts:
            for mpi in mpis:
                # Interleaved, the order turned each round.
                for mode in (("mpi", "multicast") if rnd % 2 == 0 else ("multicast", "mpi")):
                    got = bench(n, mpi, mode, args, out / f"r{rnd}-n{n}-{mpi}-{mode}")
                    found.setdefault((n, mpi, mode), []).append(got)
                    print(f"round {rnd + 1} {n:4d} {args.profile} {mpi:8s} {mode:9s} {got['time_s']:.4g} s "
                          f"check {got['check']} D {got['dilation']:g} (wall {got['wall_s']:.0f} s"
                          + (f"; {got['bcasts']} broadcasts, {got['resent']} datagrams sent again" if mode == "multicast" else "")
                          + ")", flush=True)
    print(f"\n{'N':>4} {'MPI':8s} {'tree (s)':>10} {'spread':>7} {'multicast (s)':>14} {'spread':>7} "
          f"{'speed-up':>9} {'checked':>8}")
    worst = None
    for n in counts:
        for mpi in mpis:
            tree, cast = found[(n, mpi, "mpi")], found[(n, mpi, "multicast")]
            t, c = (statistics.median(r["time_s"] for r in rows) for rows in (tree, cast))
            spread = [(max(r["time_s"] for r in rows) - min(r["time_s"] for r in rows)) / m
                      for rows, m in ((tree, t), (cast, c))]
            ok = all(r["check"] == "ok" for r in tree + cast)
            print(f"{n:4d} {mpi:8s} {t:10.4g} {spread[0]:7.1%} {c:14.4g} {spread[1]:7.1%} {t / c:9.1f} "
                  f"{'yes' if ok else 'NO':>8}")
            if n == max(counts):
                worst = min(worst, t / c) if worst is not None else t / c
    print(f"\nat {max(counts)} boxes the multicast broadcast is {worst:.1f}x the tree's speed "
          f"(target {TARGET:g}x); runs in {out}")
    return 0 if worst is not None and worst >= TARGET else 1


if __name__ == "__main__":
    run_main(main)
