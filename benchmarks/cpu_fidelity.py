"""CPU fidelity of emulated devices: a CPU-bound kernel on k = 1..4 MinnowBoards with c = 1..2
ranks each, against one rank on one board measured in the same run.

Per (k, c): time per unit of work / single-rank time, the spread of the
repetitions ((max - min) / median), and the share of its core's budget the
slowest rank got (CPU s / wall s / budget): what the emulation delivered,
apart from how fast the host's CPU ran each second meanwhile. Under both MPIs' launchers, at D = 1 on as
many boards as fit the host at D = 1, and at shoal's automatic D on four.
Targets: every ratio within 3 % of 1 and spreads <= 3 % with cgroups; within 7 %
with the user-space limit (ordinary users; as root: SHOAL_CGROUP_ROOT=an empty directory).

With --workloads, also the issue's workload targets through `shoal work`: raytrace 512
with 2 ranks on one MinnowBoard at D = 1 and D = 2 (rounds interleaved; spread <= 3 % at
each, D = 2 median within 3 % of D = 1), and raytrace and ep on 4 MinnowBoards (speed-up
at n = 2 <= 2.06, at n = 4 <= 4.12, median over interleaved rounds).

Run: .venv/bin/python benchmarks/cpu_fidelity.py [--reps 5] [--mpi mpich,openmpi] [--steps N]
     [--workloads] [--skip-kernel]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

from entry import run_main

from shoal import cluster
from shoal.cluster import cpufidelity, cpulimit, dilation, inventory
from shoal.mpi import discover


def boards_at_real_time(profile: str = "minnowboard") -> int:
    """How many boards fit this host at D = 1."""
    inv = inventory.from_emulate(f"1x{profile}")
    node = inv.nodes[0]
    budget = node.profile.cores * min(1.0, node.profile.speed / inv.host_speed)
    host = cpulimit.capacity()
    room = host - dilation.reserve(host)
    return max(1, min(4, int(room / budget + 1e-9)))


def shoal_work(args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-m", "shoal", "work", *args, "--json",
                               "--out", f"{tmp}/run"], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"shoal work {' '.join(args)} failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


def dilation_agreement(rounds: int, mpi: str) -> dict:
    """raytrace 512, 2 ranks on one MinnowBoard: one repetition at D = 1, then at D = 2, per round."""
    times: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(rounds):
        for d in (1, 2):
            out = shoal_work(["raytrace", "--size", "512", "--emulate", "1xminnowboard",
                              "--ranks-per-node", "2", "--reps", "1", "--dilation", str(d),
                              "--mpi", mpi])
            times[d].append(out["summary"][0]["time_median_s"])
    med = {d: statistics.median(t) for d, t in times.items()}
    return {"mpi": mpi, "times_s": times, "median_s": med,
            "spread": {d: (max(t) - min(t)) / med[d] for d, t in times.items()},
            "d2_over_d1": med[2] / med[1]}


def speedups(workload: str, reps: int, mpi: str) -> dict:
    """The study's placement: 1..4 MinnowBoards, one rank each, repetitions interleaved."""
    out = shoal_work([workload, "--emulate", "4xminnowboard", "--nodes", "1..4", "--reps",
                      str(reps), "--mpi", mpi])
    rows = {r["nodes"]: r for r in out["summary"]}
    return {"workload": workload, "mpi": mpi,
            "speedup": {n: r["speedup"] for n, r in rows.items()},
            "spread": {n: r["time_spread"] for n, r in rows.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--mpi", default="mpich,openmpi")
    parser.add_argument("--steps", type=int, default=cpufidelity.STEPS,
                        help="loop steps per rank (default: about 0.1 s of a host core)")
    parser.add_argument("--workloads", action="store_true", help="also the workload targets")
    parser.add_argument("--skip-kernel", action="store_true", help="only the workload targets")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = []
    for mpi_name in [] if args.skip_kernel else args.mpi.split(","):
        mpi = discover.resolve(mpi_name)
        for boards, d in ((boards_at_real_time(), 1.0), (4, None)):
            spec = f"{boards}xminnowboard"
            with cluster.open(emulate=spec, calibrate=False, dilation=d) as where:
                configs = [(k, c) for k in range(1, boards + 1) for c in (1, 2)]
                result = cpufidelity.measure(where, mpi, configs, args.reps, args.steps)
                limit = where.describe()["emulation"].get("cpu_limit")
            result.update({"mpi": mpi.name, "cluster": spec, "cpu_limit": limit})
            report.append(result)
            if not args.json:
                print(f"{mpi.name}, {spec}, D = {result['dilation']:g}, CPU limit: {limit}; "
                      f"single rank {result['single_rank_s'] * 1e3:.1f} ms")
                for p in result["points"]:
                    print(f"  k={p['devices']} c={p['ranks_per_device']}: time per unit / single "
                          f"rank {p['ratio']:.3f}, spread {p['spread']:.1%}, budget delivered "
                          f"{p['delivered']:.3f}")
    if args.workloads:
        for mpi_name in args.mpi.split(","):
            agreement = dilation_agreement(args.reps, mpi_name)
            report.append(agreement)
            if not args.json:
                print(f"{mpi_name}: raytrace 512, 2 ranks on 1 MinnowBoard: median D=1 "
                      f"{agreement['median_s'][1]:.3f} s (spread {agreement['spread'][1]:.1%}), "
                      f"D=2 {agreement['median_s'][2]:.3f} s (spread {agreement['spread'][2]:.1%}), "
                      f"D=2/D=1 {agreement['d2_over_d1']:.3f}")
            for workload in ("raytrace", "ep"):
                scaling = speedups(workload, args.reps, mpi_name)
                report.append(scaling)
                if not args.json:
                    print(f"{mpi_name}: {workload} on 4 MinnowBoards: speed-up " + ", ".join(
                        f"n={n} {v:.2f} (spread {scaling['spread'][n]:.1%})"
                        for n, v in scaling["speedup"].items()))
    if args.json:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    run_main(main)
