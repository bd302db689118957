"""`shoal compare` on pairs of runs: the same stack twice, and a stack with a background load.

Per round: bench run A (this host as it is), run A' (the same again) and run B (the same
with an injected background load: a CPU-bound program beside the ranks, named
``noise-burner`` so its command name is its own; with ``--noise PROFILE``, the runs are on
two emulated MinnowBoards and B's carry that OS noise profile instead). Target:
compare(A, A') names no stack difference and no moved point; compare(A, B) names the load
and the points it moved. With ``--runs N`` each side is N runs (interleaved A, A', B), the
first of each compared with the others as repeats (``compare --again-a/--again-b``).
Prints, per round, what each comparison named.
Run: .venv/bin/python benchmarks/compare_stacks.py [--rounds 2] [--runs 4] [--mpi mpich] [--noise busy]
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
from os_noise_cost import BUSY

from shoal.report import stack_compare
from shoal.runs.store import Run

TESTS = "mpbench.latency,mpbench.roundtrip,mpbench.bandwidth,mpbench.bcast"
SIZES = "8,1K,64K"


def bench(out: Path, mpi: str, emulate: str | None = None) -> Run:
    where = ["--emulate", emulate, "--nodes", "2"] if emulate else ["--ranks", "2"]
    profiles = out.parent / "busy.toml"   # os_noise_cost.py's made-up busy desktop
    profiles.write_text(BUSY)
    done = subprocess.run([sys.executable, "-m", "shoal", "bench", "--mpi", mpi, "--tests", TESTS,
                           "--sizes", SIZES, *where, "--budget", "1", "--out", str(out)],
                          capture_output=True, text=True,
                          env={**os.environ, "SHOAL_PROFILES": str(profiles)})
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
    chance = f" (by chance: {found.chance * found.points:.2f} expected)" if found.repeats else ""
    return f"stack differences: {named}\n    moved {len(found.moved)}/{found.points}{chance}: {moved}"


def compared(a: list[Run], b: list[Run]) -> stack_compare.Comparison:
    return stack_compare.compare(a[0], b[0], tuple(a[1:]), tuple(b[1:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1, help="runs a side (repeats for compare)")
    parser.add_argument("--mpi", default="mpich")
    parser.add_argument("--load-cpus", type=int, default=1)
    parser.add_argument("--noise", default=None, metavar="PROFILE",
                        help="emulated devices; B's carry this OS noise profile")
    args = parser.parse_args()
    plain = "2xminnowboard" if args.noise else None
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="compare-stacks-") as tmp:
        work = Path(tmp)
        for r in range(1, args.rounds + 1):
            a, again, loaded = [], [], []
            for k in range(args.runs):
                a.append(bench(work / f"a{r}-{k}", args.mpi, plain))
                again.append(bench(work / f"a{r}-{k}-again", args.mpi, plain))
                if args.noise:
                    loaded.append(bench(work / f"b{r}-{k}", args.mpi, f"{plain}@{args.noise}"))
                else:
                    with burner(work, args.load_cpus):
                        loaded.append(bench(work / f"b{r}-{k}", args.mpi))
            print(f"round {r} (load average {os.getloadavg()[0]:.2f}, {args.runs} run(s) a side)")
            print(f"  same stack:   {describe(compared(a, again))}")
            print(f"  with {args.noise or 'burner'}:  {describe(compared(a, loaded))}")
    return 0


if __name__ == "__main__":
    run_main(main)
