"""The plant's future as "what if" rows beside seed 002's DOCSIS 2.0: IMB Bcast of 64 B and
256 KiB on N set-top boxes on docsis-27m (the seed's plant, each box's upstream capped at
5.12 Mbit/s), on docsis-27m with a service flow per box (`--qos`), and on docsis3-8x4 (8
channels bonded down, 4 up, 15 Mbit/s a box) with and without a faster flow.

Per round, interleaved: one `shoal bench --emulate Nxstb --link L [--qos stb=R] --tests
imb.Bcast --sizes 64,262144 --nodes N` per plant (MPICH's binomial broadcast, as the link
model's); beside each measured time the model's (`linkmodel.bench_bcast_s`, the benchmark's
own loop frame by frame with TCP's windows, computed in the same run) and the ratio to the
seed's plant of the same round. Median and spread over the rounds; the load average beside
every run.
Run as root: .venv/bin/python benchmarks/seed002_plant_future.py [--boxes 8] [--rounds 2]
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
from shoal.cluster import inventory, linkmodel

# (label, link, --qos)
PLANTS = [("DOCSIS 2.0 (seed)", "docsis-27m", None),
          ("DOCSIS 2.0, 10 Mbit/s a box", "docsis-27m", "stb=10M"),
          ("DOCSIS 3.0 8x4, 15 Mbit/s a box", "docsis3-8x4", None),
          ("DOCSIS 3.0 8x4, 50 Mbit/s a box", "docsis3-8x4", "stb=50M")]
SIZES = (64, 262144)


def bench(boxes: int, link: str, flow: str | None, mpi: str, out: Path) -> dict[int, dict]:
    argv = [sys.executable, "-m", "shoal", "bench", "--mpi", mpi, "--emulate", f"{boxes}xstb",
            "--link", link, "--nodes", str(boxes), "--tests", "imb.Bcast",
            "--sizes", ",".join(map(str, SIZES)), "--warmup", "1", "--min-reps", "3",
            "--max-reps", "7", "--budget", "2", "--out", str(out)]
    if flow:
        argv += ["--qos", flow]
    env = {**os.environ, "MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if not (out / "results.csv").exists():
        raise SystemExit(f"shoal bench failed: {done.stderr.strip()[-600:]}")
    with open(out / "results.csv") as fh:
        return {int(r["size_B"]): r for r in csv.DictReader(fh) if int(r["nodes"]) == boxes}


def model_s(boxes: int, link: str, flow: str | None) -> dict[int, float]:
    spec = f"{boxes}xstb" + (f"@qos={flow.split('=', 1)[1]}" if flow else "")
    plant = inventory.from_emulate(spec, link).nodes[0].link
    return linkmodel.bench_bcast_run_s(plant, boxes, list(SIZES), tcp=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boxes", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--mpi", default="mpich")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    out = root_run_dir(args.out, "seed002-future-")
    cpu = cpu_model()
    print(f"host: {cpu}; {args.boxes} boxes; {args.mpi}", flush=True)
    models = {label: model_s(args.boxes, link, flow) for label, link, flow in PLANTS}
    got: dict[tuple[str, int], list[float]] = {}
    ratios: dict[tuple[str, int], list[float]] = {}
    for rnd in range(args.rounds):
        seed_plant = {}
        for i, (label, link, flow) in enumerate(PLANTS):
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            rows = bench(args.boxes, link, flow, args.mpi, out / f"r{rnd}-p{i}")
            for size in SIZES:
                t = float(rows[size]["time_median_s"])
                got.setdefault((label, size), []).append(t)
                if i == 0:
                    seed_plant[size] = t
                ratios.setdefault((label, size), []).append(t / seed_plant[size])
                print(f"round {rnd + 1} {label:34} {size:>7} B {t * 1e3:9.1f} ms (model "
                      f"{models[label][size] * 1e3:8.1f} ms, x{t / models[label][size]:.2f}; "
                      f"/ seed's plant {t / seed_plant[size]:.3f}) [{rows[size].get('host_slack')}] "
                      f"load {load}", flush=True)
    print("\nmedian (min..max) over the rounds; against the seed's plant of the same round:")
    for label, _, _ in PLANTS:
        for size in SIZES:
            ts, rs = got[(label, size)], ratios[(label, size)]
            print(f"  {label:34} {size:>7} B {statistics.median(ts) * 1e3:9.1f} ms "
                  f"({min(ts) * 1e3:.1f}..{max(ts) * 1e3:.1f}); model {models[label][size] * 1e3:.1f} ms; "
                  f"x{statistics.median(rs):.3f} ({min(rs):.3f}..{max(rs):.3f}) of the seed's plant")
    print(f"runs in {out}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    run_main(main)
