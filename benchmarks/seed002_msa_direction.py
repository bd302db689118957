"""Table I's direction: which cluster gains more on each alignment set, 8 -> 128 set-top
boxes or 1 -> 64 blade processors (seed 002: the boxes on S500-L200, 7.65 against 6.69, and
on S1500-L100, 4.68 against 2.31; the blades on the other five).

The seed's alignment jobs ran with the master on a host of the head-end (§IV: "N = J + K"
nodes, the master and the boxes), so the guide tree and the progressive alignment, which
no worker shares, ran on a server core, and only the pairwise alignments on the boxes. The
study's preset starts rank 0 on the first box, which runs those parts at a box's speed. Both
layouts are measured here:

  boxes   rank 0 on a box: `shoal work msa --emulate 128xstb --launch head --nodes 8,128`;
  master  rank 0 on a blade beside the boxes (the seed's): `--emulate 1xxeon-blade+128xstb
          --ranks-per-device xeon-blade=1,stb=1 --nodes 9,129` (the master and 8 or 128 boxes);
  blades  1 rank on one blade, and 8 on each of 8 (`gigabit-blades`).

Each cluster comes up once a round (`shoal cluster up`, then `--attach` for every set), the
sets at the study's 1/625 of the work (S and L divided by 5), or with `--scale 25` at 1/25
(S divided by 5: each pair the seed's own, 25 times fewer of them). Per round, the speed-ups
beside the seed's; then the medians and spreads over the rounds, and each set's direction.
Run as root: .venv/bin/python benchmarks/seed002_msa_direction.py [--rounds 2] [--reps 1]
    [--sets S500-L200,S1500-L100] [--layouts blades,master] (a 128-box job takes minutes to start)
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
from pathlib import Path

from entry import root_run_dir, run_main

from shoal.hostfacts import cpu_model
from shoal.study import presets, seed002

# The seed's sets in the preset's order, and the study's 1/625 of each.
SEED_SETS = ["S100-L1500", "S200-L300", "S300-L200", "S500-L200", "S200-L500", "S500-L1100", "S1500-L100"]
SCALED = dict(zip(SEED_SETS, presets.SEED002_MSA.split(",")))


def scaled(seed_set: str, scale: int) -> str:
    """The set run for ``seed_set``: the study's 1/625 (S and L divided by 5), or 1/25 (S
    divided by 5, each pair the seed's own, 25 times fewer of them)."""
    if scale == 625:
        return SCALED[seed_set]
    s, l = seed_set[1:].split("-L")
    return f"S{int(s) // 5}-L{l}"
# (cluster name, its emulate spec, its `shoal work` arguments, the two points compared)
LAYOUTS = [
    ("blades", "8xxeon-blade", [["--nodes", "1", "--ranks-per-node", "1"], ["--nodes", "8", "--ranks-per-node", "8"]],
     ((1, 1), (8, 64))),
    ("boxes", "128xstb", [["--launch", "head", "--nodes", "8,128"]], ((8, 8), (128, 128))),
    ("master", "1xxeon-blade+128xstb",
     [["--launch", "head", "--ranks-per-device", "xeon-blade=1,stb=1", "--nodes", "9,129"]], ((9, 9), (129, 129))),
]


def shoal(*argv: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "shoal", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"shoal {' '.join(argv[:3])} failed: {done.stderr.strip()[-600:]}")
    return done


def times(out: Path) -> dict[tuple[int, int], float]:
    with open(out / "summary.csv") as fh:
        return {(int(r["nodes"]), int(r["ranks"])): float(r["time_median_s"]) for r in csv.DictReader(fh)}


def dilation(out: Path) -> float:
    with open(out / "results.csv") as fh:
        return float(next(csv.DictReader(fh))["dilation"])


def seed_speedups() -> dict[str, dict[str, float]]:
    """Per seed set: the seed's boxes 8 -> 128 and blades 1 -> 64 speed-ups (Table I)."""
    t = {(v.machine, v.nodes, v.item): v.value for v in seed002.values() if v.quantity == "msa_time"}
    return {s: {"boxes": t[("stb", 8, s)] / t[("stb", 128, s)],
                "blades": t[("xeon-blade", 1, s)] / t[("xeon-blade", 64, s)]} for s in SEED_SETS}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--sets", default=",".join(SEED_SETS), help="the seed's sets to run (a 128-box job "
                   "takes minutes of host time to start: fewer sets, a shorter run)")
    p.add_argument("--layouts", default=",".join(name for name, *_ in LAYOUTS))
    p.add_argument("--scale", type=int, choices=(625, 25), default=625,
                   help="625: the study's sets (S and L divided by 5); 25: S divided by 5, L kept")
    p.add_argument("--mpi", default="mpich")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    out = root_run_dir(args.out, "seed002-msa-direction-")
    cpu = cpu_model()
    print(f"host: {cpu}; {args.mpi}; {args.reps} counted repetition(s) a point", flush=True)
    seed = seed_speedups()
    sets = [s for s in SEED_SETS if s in args.sets.split(",")]
    layouts = [layout for layout in LAYOUTS if layout[0] in args.layouts.split(",")]
    if not sets or "blades" not in {name for name, *_ in layouts}:
        raise SystemExit(f"--sets: give some of {','.join(SEED_SETS)}; --layouts must include blades")
    got: dict[tuple[str, str], list[float]] = {}
    for rnd in range(args.rounds):
        for name, spec, runs, (small, large) in layouts:
            cluster = f"msa{name[:3]}{rnd}"
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            shoal("cluster", "up", "--emulate", spec, "--name", cluster)
            try:
                for seed_set in sets:
                    measured: dict[tuple[int, int], float] = {}
                    for i, extra in enumerate(runs):
                        run = out / f"r{rnd}-{name}-{seed_set}-{i}"
                        shoal("work", "msa", "--attach", cluster, "--size", scaled(seed_set, args.scale), "--mpi", args.mpi,
                              "--reps", str(args.reps), *extra, "--out", str(run))
                        measured.update(times(run))
                    x = measured[small] / measured[large]
                    got.setdefault((name, seed_set), []).append(x)
                    print(f"round {rnd + 1} {name:6} {seed_set:10} as {scaled(seed_set, args.scale):10} {small[1]:>3} -> "
                          f"{large[1]:>3} ranks: {measured[small]:8.3f} -> {measured[large]:7.3f} s, x{x:5.2f} "
                          f"(D {dilation(run):g})", flush=True)
            finally:
                shoal("cluster", "down", cluster)
            print(f"round {rnd + 1} {name} done; load average at its start {load}", flush=True)
    print("\nmedian (min..max) over the rounds; the seed's speed-ups; who is ahead, boxes' layout by layout:")
    for seed_set in sets:
        row = {name: got[(name, seed_set)] for name, *_ in layouts}
        seed_ahead = "boxes" if seed[seed_set]["boxes"] > seed[seed_set]["blades"] else "blades"
        parts = [f"{name} x{statistics.median(v):.2f} ({min(v):.2f}..{max(v):.2f})" for name, v in row.items()]
        verdicts = []
        for layout in [name for name in row if name != "blades"]:
            ahead = "boxes" if statistics.median(row[layout]) > statistics.median(row["blades"]) else "blades"
            verdicts.append(f"{layout}: {ahead} ahead ({'as' if ahead == seed_ahead else 'unlike'} the seed)")
        print(f"  {seed_set:10} {'; '.join(parts)}; seed boxes x{seed[seed_set]['boxes']:.2f}, blades "
              f"x{seed[seed_set]['blades']:.2f}, {seed_ahead} ahead; {'; '.join(verdicts)}")
    print(f"runs in {out}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    run_main(main)
