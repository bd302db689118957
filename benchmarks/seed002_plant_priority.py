"""A service flow's traffic priority on a busy plant, as a "what if" beside seed 002's DOCSIS
2.0: IMB Bcast of 64 B and 256 KiB on N set-top boxes on docsis-27m while U other subscribers
upload at their full service flow (`@subscriber-upload`, 5.12 Mbit/s each: six fill the
27 Mbit/s upstream channel), with the boxes' flows at the subscribers' priority and at
DOCSIS's highest (`@qos=5.12M/7`).

Per round, interleaved, one `shoal bench --nodes N` per plant on the same N + U devices (the
job on the first N):
  quiet        N boxes, U subscribers idle;
  uploads      the U subscribers uploading, every flow at priority 0;
  priority 7   the same uploads, the boxes' flows at priority 7.
Beside each time its ratio to the quiet plant of the same round and what the head-end
received from the uploads while it ran. Median and spread over the rounds; the load average
beside every run.
Run as root: .venv/bin/python benchmarks/seed002_plant_priority.py [--boxes 8] [--uploads 6] [--rounds 2]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from entry import root_run_dir, run_main

from shoal.hostfacts import cpu_model

SIZES = (64, 262144)
RATE = "5.12M"  # docsis-27m's own service flow: only the priority differs
# A broadcast behind a full upstream takes tens of seconds a call: measured, not called hung.
TIMEOUT_S = 600


def plants(boxes: int, uploads: int) -> list[tuple[str, str]]:
    return [("quiet", f"{boxes}xstb+{uploads}xstb"),
            ("uploads", f"{boxes}xstb+{uploads}xstb@subscriber-upload"),
            ("priority 7", f"{boxes}xstb@qos={RATE}/7+{uploads}xstb@subscriber-upload")]


def bench(spec: str, boxes: int, mpi: str, out: Path) -> tuple[dict[int, dict], dict]:
    argv = [sys.executable, "-m", "shoal", "bench", "--mpi", mpi, "--emulate", spec,
            "--link", "docsis-27m", "--nodes", str(boxes), "--tests", "imb.Bcast",
            "--sizes", ",".join(map(str, SIZES)), "--warmup", "1", "--min-reps", "2",
            "--max-reps", "7", "--budget", "2", "--timeout", str(TIMEOUT_S), "--out", str(out)]
    env = {**os.environ, "MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if not (out / "results.csv").exists():
        raise SystemExit(f"shoal bench failed: {done.stderr.strip()[-600:]}")
    with open(out / "results.csv") as fh:
        rows = {int(r["size_B"]): r for r in csv.DictReader(fh) if int(r["nodes"]) == boxes}
    manifest = json.loads((out / "manifest.json").read_text())
    return rows, manifest


def uploaded(manifest: dict) -> str:
    """What the head-end received from the uploads while the cluster was up."""
    seen = manifest.get("backgrounds", {}).get("uploads_received", {}).get("head")
    if not seen:
        return "no uploads"
    return f"head-end received {seen['received_B'] / 1e6:.1f} MB in {seen['wall_s']:.0f} s"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boxes", type=int, default=8)
    p.add_argument("--uploads", type=int, default=6)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--mpi", default="mpich")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    out = root_run_dir(args.out, "seed002-priority-")
    cpu = cpu_model()
    print(f"host: {cpu}; {args.boxes} boxes beside {args.uploads} uploading subscribers; {args.mpi}",
          flush=True)
    got: dict[tuple[str, int], list[float]] = {}
    ratios: dict[tuple[str, int], list[float]] = {}
    for rnd in range(args.rounds):
        quiet = {}
        for i, (label, spec) in enumerate(plants(args.boxes, args.uploads)):
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            rows, manifest = bench(spec, args.boxes, args.mpi, out / f"r{rnd}-p{i}")
            for size in SIZES:
                t = float(rows[size]["time_median_s"])
                got.setdefault((label, size), []).append(t)
                if i == 0:
                    quiet[size] = t
                ratios.setdefault((label, size), []).append(t / quiet[size])
                print(f"round {rnd + 1} {label:11} {size:>7} B {t * 1e3:9.1f} ms (x{t / quiet[size]:.2f} "
                      f"of the quiet plant) [{rows[size].get('host_slack')}] D {float(rows[size]['dilation']):g} "
                      f"load {load}", flush=True)
            print(f"round {rnd + 1} {label:11} {uploaded(manifest)}", flush=True)
    print("\nmedian (min..max) over the rounds; against the quiet plant of the same round:")
    for label, _ in plants(args.boxes, args.uploads):
        for size in SIZES:
            ts, rs = got[(label, size)], ratios[(label, size)]
            print(f"  {label:11} {size:>7} B {statistics.median(ts) * 1e3:9.1f} ms "
                  f"({min(ts) * 1e3:.1f}..{max(ts) * 1e3:.1f}); x{statistics.median(rs):.3f} "
                  f"({min(rs):.3f}..{max(rs):.3f}) of the quiet plant")
    print(f"runs in {out}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    run_main(main)
