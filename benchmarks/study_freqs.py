"""The frequency sweep finds the energy-optimal (node count, clock) pair.

Target: on the made-up board of benchmarks/clockboard.toml, whose P-states put the least energy
per unit of work at 1.5 GHz by construction, `shoal study --freqs 1G,1.5G,2G` names 1.5 GHz, in
every round; on `minnowboard` (--profile minnowboard --freqs 500M,1G,1.333G), the pair and its
interval are printed. Each round is one whole sweep (a study per clock); the load average is
printed beside it.
Run as root: .venv/bin/python benchmarks/study_freqs.py [--rounds 2] [--profile clockboard]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from entry import run_main

HERE = Path(__file__).resolve().parent
CONSTRUCTED_HZ = 1.5e9  # clockboard's least busy watts per unit of speed


def sweep(profile: str, freqs: str, devices: int, workloads: str, out: Path) -> tuple[dict, float]:
    env = {**os.environ, "SHOAL_PROFILES": str(HERE / "clockboard.toml")}
    started = time.monotonic()
    argv = [sys.executable, "-m", "shoal", "study", "--emulate", f"{devices}x{profile}", "--freqs", freqs,
            "--reference", "none", "--suite", "none", "--workloads", workloads, "--out", str(out)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the sweep failed: {done.stderr.strip()[-600:]}")
    return json.loads((out / "freq_sweep.json").read_text()), time.monotonic() - started


def name(pair: dict | None) -> str:
    return "none" if pair is None else f"({pair['nodes']}, {pair['clock_Hz'] / 1e6:.0f} MHz)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", default="clockboard")
    parser.add_argument("--freqs", default=None)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--workloads", default="raytrace")
    args = parser.parse_args()
    freqs = args.freqs or ("1G,1.5G,2G" if args.profile == "clockboard" else "500M,1G,1.333G")
    found = []
    for r in range(args.rounds):
        out = Path(tempfile.mkdtemp(prefix="shoal-freqs-")) / "sweep"  # kept: the runs behind the numbers
        result, seconds = sweep(args.profile, freqs, args.devices, args.workloads, out)
        load = os.getloadavg()[0]
        best = result["best"]
        iv = result["best_perf_per_W_rel"] or {}
        print(f"round {r + 1}: measured best {name(best)}, perf/W {iv.get('value', float('nan')):.3f} "
              f"({iv.get('lo', float('nan')):.3f}-{iv.get('hi', float('nan')):.3f}) of 1 device at the "
              f"top clock; tied: {', '.join(name(p) for p in result['tied'])}; model's {name(result['model']['best'])}; "
              f"{seconds:.0f} s, load average {load:.1f}; {out}")
        found.append(best)
    if args.profile == "clockboard":
        hits = sum(1 for b in found if b and abs(b["clock_Hz"] - CONSTRUCTED_HZ) < 1e6)
        print(f"clock found {hits}/{len(found)} rounds (constructed: {CONSTRUCTED_HZ / 1e6:.0f} MHz): "
              f"{'PASS' if hits == len(found) else 'FAIL'}")


if __name__ == "__main__":
    run_main(main)
