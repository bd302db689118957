"""Table I's direction at 1/25 of the work: which cluster gains more, 8 -> 128 set-top boxes
or 1 -> 64 blade processors, on the two sets where seed 002's boxes were ahead (S500-L200:
7.65 against 6.69; S1500-L100: 4.68 against 2.31).

At 1/625 of the work (the study's scaled sets, S and L both divided by 5) the boxes stop
scaling: a pair's alignment shrinks 25 times while its messages over the plant do not. Here
only the number of sequences is divided by 5, so each pair is the seed's own (L kept) and
there are 25 times fewer of them: the pairs' computation against their traffic stays the
seed's.

Per round, for each set: `shoal work msa` on 8 emulated blades (`gigabit-blades`) with 1
rank on one blade and with 8 ranks on each, and on 128 boxes (`docsis-27m`, launched from the
head, one rank a box) at 8 and 128 boxes. Medians and spreads over the rounds beside the
seed's speed-ups; the load average beside every run.
Run as root: .venv/bin/python benchmarks/seed002_msa_direction.py [--rounds 2] [--reps 1]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from entry import run_main

# (the seed's set, the size run here, the seed's boxes 8 -> 128 and blades 1 -> 64 speed-ups)
SETS = [("S500-L200", "S100-L200", 7.65, 6.69), ("S1500-L100", "S300-L100", 4.68, 2.31)]


def work(argv: list[str], out: Path) -> dict[tuple[int, int], float]:
    """Median time of each (nodes, ranks) point of one `shoal work msa` run."""
    done = subprocess.run([sys.executable, "-m", "shoal", "work", "msa", *argv, "--out", str(out)],
                          capture_output=True, text=True)
    if done.returncode != 0 or not (out / "summary.csv").exists():
        raise SystemExit(f"shoal work failed: {done.stderr.strip()[-600:]}")
    with open(out / "summary.csv") as fh:
        return {(int(r["nodes"]), int(r["ranks"])): float(r["time_median_s"]) for r in csv.DictReader(fh)}


def dilation(out: Path) -> float:
    with open(out / "results.csv") as fh:
        return float(next(csv.DictReader(fh))["dilation"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--mpi", default="mpich")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (emulated clusters in the host's namespaces)")
    out = args.out or Path(tempfile.mkdtemp(prefix="seed002-msa-direction-"))
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    print(f"host: {cpu}; {args.mpi}; {args.reps} counted repetition(s) a point", flush=True)
    common = ["--mpi", args.mpi, "--reps", str(args.reps)]
    speedups: dict[tuple[str, str], list[float]] = {}
    for rnd in range(args.rounds):
        for seed_set, size, _, _ in SETS:
            tag = f"r{rnd}-{seed_set}"
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            one = work(["--size", size, "--emulate", "8xxeon-blade", "--link", "gigabit-blades",
                        "--nodes", "1", "--ranks-per-node", "1", *common], out / f"{tag}-blade1")
            many = work(["--size", size, "--emulate", "8xxeon-blade", "--link", "gigabit-blades",
                         "--nodes", "8", "--ranks-per-node", "8", *common], out / f"{tag}-blade64")
            boxes = work(["--size", size, "--emulate", "128xstb", "--link", "docsis-27m", "--launch",
                          "head", "--nodes", "8,128", *common], out / f"{tag}-boxes")
            blade_1, blade_64 = one[(1, 1)], many[(8, 64)]
            box_8, box_128 = boxes[(8, 8)], boxes[(128, 128)]
            speedups.setdefault((seed_set, "blades"), []).append(blade_1 / blade_64)
            speedups.setdefault((seed_set, "boxes"), []).append(box_8 / box_128)
            print(f"round {rnd + 1} {seed_set} as {size}: blades 1 -> 64 {blade_1:.3f} -> {blade_64:.3f} s "
                  f"(x{blade_1 / blade_64:.2f}, D {dilation(out / f'{tag}-blade64'):g}); boxes 8 -> 128 "
                  f"{box_8:.3f} -> {box_128:.3f} s (x{box_8 / box_128:.2f}, D {dilation(out / f'{tag}-boxes'):g}); "
                  f"load at the start {load}", flush=True)
    print("\nmedian (min..max) over the rounds, against the seed's:")
    for seed_set, size, seed_boxes, seed_blades in SETS:
        b, s = speedups[(seed_set, "boxes")], speedups[(seed_set, "blades")]
        ahead = "boxes" if statistics.median(b) > statistics.median(s) else "blades"
        seed_ahead = "boxes" if seed_boxes > seed_blades else "blades"
        print(f"  {seed_set} as {size}: boxes 8 -> 128 x{statistics.median(b):.2f} ({min(b):.2f}..{max(b):.2f}), "
              f"seed x{seed_boxes}; blades 1 -> 64 x{statistics.median(s):.2f} ({min(s):.2f}..{max(s):.2f}), "
              f"seed x{seed_blades}; {ahead} ahead ({'as' if ahead == seed_ahead else 'unlike'} the seed)")
    print(f"runs in {out}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    run_main(main)
