"""Time dilation: two MinnowBoards at D = 2, times divided by D, against the same at D = 1.

Two MinnowBoards fit this host at D = 1, so D = 1 is the reference, measured
in the same run with rounds interleaved (D = 1, D = 2, D = 1, ...). A
CPU-bound kernel (a fixed loop in every rank, slowest rank's time) and IMB
PingPong at 1 KiB, 64 KiB and 1 MiB (network-bound). Targets: corrected
D = 2 times within 5 % of D = 1 for the kernel, 10 % for the network tests.
Run as root: .venv/bin/python benchmarks/cluster_dilation.py [--rounds 5] [--mpi mpich] [--wait busy]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

from entry import run_main
from mpicc import compile_program

from shoal import cluster
from shoal.bench import runner
from shoal.bench.sweep import Options
from shoal.mpi import discover

SIZES = "1K,64K,1M"


def kernel_time(mpi, exe: Path, d: float, iterations: int) -> float:
    with cluster.open(emulate="2xminnowboard", calibrate=False, dilation=d) as c:
        job = c.job(mpi, nodes=2, argv=[str(exe), str(iterations)])
        argv, _ = job.command()
        proc = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True,
                              timeout=600 * d)
        if proc.returncode != 0:
            raise SystemExit(f"kernel failed at D={d}: {proc.stderr.strip()[-300:]}")
        return float(proc.stdout.split()[0]) / c.dilation


def pingpong(mpi_name: str, d: float, out: Path, wait: str | None) -> dict[int, float]:
    request = runner.BenchRequest(tests="imb.PingPong", sizes=SIZES, mpi=mpi_name,
                                  emulate="2xminnowboard", dilation=d, wait=wait,
                                  options=Options(ci=0.02, budget_s=1.0, min_reps=10))
    run, plan = runner.start(request, ["benchmarks/cluster_dilation.py"], out)
    runner.execute(run, plan)
    return {int(r["size_B"]): float(r["time_median_s"]) for r in run.rows("results")}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--mpi", default="mpich")
    p.add_argument("--iterations", type=int, default=200_000_000)
    p.add_argument("--wait", default=None, help="libshoalwait mode of the ping-pong ranks (default: "
                   "the emulated devices' own, event; busy shows the polling stalls)")
    args = p.parse_args()
    mpi = discover.resolve(args.mpi)
    work = Path(tempfile.mkdtemp(prefix="shoal-dilation-"))
    exe = compile_program(mpi, "dilation_kernel.c", work)
    kernel: dict[float, list[float]] = {1.0: [], 2.0: []}
    network: dict[float, dict[int, list[float]]] = {1.0: {}, 2.0: {}}
    for i in range(args.rounds):
        for d in (1.0, 2.0):
            kernel[d].append(kernel_time(mpi, exe, d, args.iterations))
            for size, t in pingpong(args.mpi, d, work / f"pp-{i}-{d:g}", args.wait).items():
                network[d].setdefault(size, []).append(t)
            print(f"round {i + 1} D={d:g}: kernel {kernel[d][-1]:.3f} s, ping-pong "
                  + ", ".join(f"{s} B {network[d][s][-1] * 1e6:.0f} us" for s in sorted(network[d])),
                  flush=True)
    k1, k2 = statistics.median(kernel[1.0]), statistics.median(kernel[2.0])
    print(f"\nCPU-bound kernel: D=1 median {k1:.3f} s (range {min(kernel[1.0]):.3f}-{max(kernel[1.0]):.3f}), "
          f"D=2 corrected {k2:.3f} s (range {min(kernel[2.0]):.3f}-{max(kernel[2.0]):.3f}); "
          f"ratio {k2 / k1:.3f} {'within 5%' if abs(k2 / k1 - 1) <= 0.05 else 'OUTSIDE 5%'}")
    for size in sorted(network[1.0]):
        n1, n2 = statistics.median(network[1.0][size]), statistics.median(network[2.0][size])
        print(f"PingPong {size:>8d} B: D=1 {n1 * 1e6:10.1f} us, D=2 corrected {n2 * 1e6:10.1f} us; "
              f"ratio {n2 / n1:.3f} {'within 10%' if abs(n2 / n1 - 1) <= 0.10 else 'OUTSIDE 10%'}")
    return 0


if __name__ == "__main__":
    run_main(main)
