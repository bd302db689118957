"""`shoal compare` on pairs of runs: the same stack twice, and a stack with a background load.

Per round: bench run A (this host as it is), run A' (the same again) and run B (the same
with an injected background load: a CPU-bound program beside the ranks, named
``noise-burner`` so its command name is its own). Target: compare(A, A') names no stack
difference and (ideally) no moved point; compare(A, B) names the burner and the points it
moved. Prints, per round, what each comparison named.
Run: .venv/bin/python benchmarks/compare_stacks.py [--rounds 2] [--mpi mpich]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from entry import run_main

from shoal.report import stack_compare
from shoal.runs.store import Run

TESTS = "mpbench.latency,mpbench.roundtrip,mpbench.bandwidth,mpbench.broadcast"
SIZES = "8,1K,64K"


def bench(out: Path, mpi: str) -> Run:
    done = subprocess.run([sys.executable, "-m", "shoal", "bench", "--mpi", mpi, "--tests", TESTS,
                           "--sizes", SIZES, "--ranks", "2", "--budget", "1", "--out", str(out)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench failed: {done.stderr.strip()[-300:]}")
    return Run.open(out)


@contextlib.contextmanager
def burner(work: Path, cpus: int):
    """``cpus`` busy loops under the command name noise-burner (a link to this Python)."""
    link = work / "noise-burner"
    if not link.exists():
        link.symlink_to(sys.executable)
    procs = [subprocess.Popen([str(link), "-c", "while True: pass"]) for _ in range(cpus)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def describe(found: stack_compare.Comparison) -> str:
    named = "; ".join(f"{d.fact}: {d.a} -> {d.b}" for d in found.differences) or "none"
    moved = ", ".join(f"{m.test}@{m.size_B} x{m.ratio:.2f}" for m in found.moved) or "none"
    return f"stack differences: {named}\n    moved {len(found.moved)}/{found.points}: {moved}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mpi", default="mpich")
    parser.add_argument("--load-cpus", type=int, default=1)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="compare-stacks-") as tmp:
        work = Path(tmp)
        for r in range(1, args.rounds + 1):
            a = bench(work / f"a{r}", args.mpi)
            again = bench(work / f"a{r}-again", args.mpi)
            with burner(work, args.load_cpus):
                loaded = bench(work / f"b{r}", args.mpi)
            print(f"round {r} (load average {os.getloadavg()[0]:.2f})")
            print(f"  same stack:   {describe(stack_compare.compare(a, again))}")
            print(f"  with burner:  {describe(stack_compare.compare(a, loaded))}")
    return 0


if __name__ == "__main__":
    run_main(main)
