#!/usr/bin/env python3
"""What shoal-bench's shared harness costs, against a bare hand-written ping-pong.

Builds benchmarks/pingpong_bare.c with the same mpicc as shoal-bench, then
alternates the two programs (`--rounds` short runs each, same size, same
inner count, same number of repetitions; alternating finely so that load
from other processes falls on both alike) and compares the medians of the
pooled half round-trip times (the 10th percentiles too, which stay in the
quiet part of the distribution on a busy machine). The harness keeps its barrier, cache flush, --check,
decisions and reductions outside the timed loop, and the kernel is called
once per repetition through the test table, so the target is a ratio within
2% of 1.

    .venv/bin/python benchmarks/harness_overhead.py [--mpi mpich] [--size 8]

Run it on a machine as quiet as you can make it; it prints both medians
and the ratio shoal-bench / bare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from shoal.errors import ShoalError
from shoal.mpi import build, discover
from shoal.mpi.launch import Job

from entry import run_main
from mpicc import compile_program



def run(mpi: discover.MPIInstall, argv: list[str]) -> str:
    job = Job(mpi=mpi, ranks=2, argv=argv)
    cmd, _ = job.command()
    proc = subprocess.run(cmd, env=job.popen_env(), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise ShoalError(f"{Path(argv[0]).name} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpi", default=None, help="mpich, openmpi or a path (default: mpich)")
    parser.add_argument("--size", type=int, default=8, help="message size in bytes (default 8)")
    parser.add_argument("--inner", type=int, default=1000, help="round trips per repetition (default 1000)")
    parser.add_argument("--reps", type=int, default=60, help="repetitions per run (default 60)")
    parser.add_argument("--rounds", type=int, default=15, help="alternations of the two programs (default 15)")
    args = parser.parse_args()

    mpi = discover.resolve(args.mpi)
    bench = build.build("bench", mpi)
    bare_samples: list[float] = []
    shoal_samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix="shoal-overhead-") as tmp:
        bare = compile_program(mpi, "pingpong_bare.c", Path(tmp))
        for rnd in range(args.rounds):
            out = run(mpi, [str(bare), str(args.size), str(args.inner), str(args.reps)])
            bare_samples += [float(x) for x in out.split()]
            # The same work: fixed inner count and repetitions, no adaptive stop.
            out = run(mpi, [str(bench), "--points", f"imb.PingPong:{args.size}", "--inner", str(args.inner),
                            "--min-reps", str(args.reps), "--max-reps", str(args.reps), "--ci", "0",
                            "--budget", "1e9"])
            (point,) = [r for r in map(json.loads, out.splitlines()) if r["type"] == "point"]
            shoal_samples += point["samples_s"]
            print(f"round {rnd + 1:2d}: bare {statistics.median(bare_samples[-args.reps:]) * 1e6:.4f} us  "
                  f"shoal-bench {point['median_s'] * 1e6:.4f} us", flush=True)

    print(f"{mpi.name}, {args.size} B, {args.inner} round trips x {args.reps} repetitions x "
          f"{args.rounds} alternating rounds")
    for label, q in (("median", 50), ("10th percentile", 10)):
        b, s = np.percentile(bare_samples, q), np.percentile(shoal_samples, q)
        print(f"{label:>15} of half round trips: bare {b * 1e6:.4f} us, shoal-bench {s * 1e6:.4f} us, "
              f"ratio {s / b:.4f}")
    ratio = statistics.median(shoal_samples) / statistics.median(bare_samples)
    print(f"ratio of medians shoal-bench / bare = {ratio:.4f} (target 0.98..1.02): "
          f"{'PASS' if abs(ratio - 1) <= 0.02 else 'MISS'}")
    return 0


if __name__ == "__main__":
    run_main(main)
