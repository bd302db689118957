"""Workloads: speed-up at 1..4 ranks, the spread at one rank, msa over seed 002's Table I.

Three measurements, each printed with the command's own reference:

1. speed-up T(1)/T(n) for every workload at n = 1..4 ranks on this machine,
   rounds interleaved (one run of every n per round), median and range over
   the rounds; with --emulate SPEC also at 1..N nodes of that cluster;
2. the spread (max - min)/median of time_s over 5 repetitions at one rank
   (target <= 3%);
3. msa's speed-up at --msa-ranks over the seven Table I sets of seed 002,
   scaled by --msa-scale s: N/s sequences of L/s bases multiply every set's
   tree-to-alignment ratio N/L^2 (the tree's N^3 against the alignments'
   N^2 L^2) by the same s, so their order is kept and the serial tree is big
   enough to see (--msa-keep-ratio: N/s^2, the ratio itself kept); ordered,
   seed 002 has S1500-L100 last.

Run: .venv/bin/python benchmarks/work_scaling.py [--rounds 3] [--emulate 4xminnowboard]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from entry import run_main  # noqa: E402

from shoal import proc  # noqa: E402
from shoal.errors import ShoalError  # noqa: E402
from shoal.mpi import build, discover  # noqa: E402
from shoal.mpi.launch import Job  # noqa: E402

# Sizes of a few seconds on one host core.
SIZES = {"raytrace": "384", "msa": "S60-L200", "videostream": "640x360x24", "edge": "24@512x408",
         "ep": "S", "is": "W"}
TABLE_I = ["S100-L1500", "S200-L300", "S300-L200", "S500-L200", "S200-L500", "S500-L1100", "S1500-L100"]


def once(mpi, program, ranks: int, item: str) -> dict:
    job = Job(mpi=mpi, ranks=ranks, argv=[str(program), "--runs", item])
    argv, env_add = job.command()
    done = proc.run(argv, env=job.popen_env(), show_env=env_add, timeout=1800, what=item)
    for line in done.stdout.splitlines():
        if line.startswith("{") and json.loads(line).get("type") == "result":
            return json.loads(line)
    raise ShoalError(f"{item} at {ranks} ranks printed no result: {done.tail()}")


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def local_speedups(mpi, program, rounds: int, ranks: list[int]) -> None:
    print(f"speed-up on this machine ({mpi.name}), {rounds} interleaved rounds; median [min, max]")
    for name, size in SIZES.items():
        times: dict[int, list[float]] = {n: [] for n in ranks}
        for _ in range(rounds):
            for n in ranks:
                times[n].append(once(mpi, program, n, f"{name}:{size}")["time_s"])
        base = statistics.median(times[ranks[0]])
        cells = []
        for n in ranks:
            ups = [base / t for t in times[n]]
            cells.append(f"n={n} {statistics.median(ups):.2f} [{min(ups):.2f}, {max(ups):.2f}]")
        print(f"  {name:11} {size:12} T(1) {base:.3f} s   " + "   ".join(cells[1:]))


def one_rank_spread(mpi, program, reps: int) -> None:
    print(f"spread over {reps} repetitions at one rank (target <= 3%): wall time_s, and rank 0's CPU "
          "time (the control: what other processes on the cores cannot stretch)")
    for name, size in SIZES.items():
        results = [once(mpi, program, 1, f"{name}:{size}") for _ in range(reps)]
        times = [r["time_s"] for r in results]
        cpus = [r["rank_cpu_s"][0] for r in results]
        print(f"  {name:11} {size:12} time median {statistics.median(times):.3f} s spread "
              f"{100 * spread(times):.1f}% {'ok' if spread(times) <= 0.03 else 'ABOVE 3%'};  cpu median "
              f"{statistics.median(cpus):.3f} s spread {100 * spread(cpus):.1f}%")


def msa_table_i(mpi, program, scale: int, ranks: int, rounds: int, keep_ratio: bool) -> None:
    n_scale = scale ** 2 if keep_ratio else scale
    print(f"msa over seed 002 Table I, scaled 1/{n_scale} sequences, 1/{scale} length "
          f"({'N/L^2 kept' if keep_ratio else f'N/L^2 x {scale} for every set, its order kept'}); "
          f"speed-up at {ranks} ranks, median of {rounds} interleaved rounds")
    rows = []
    for name in TABLE_I:
        n, l = (int(x[1:]) for x in name.split("-"))
        size = f"S{max(3, round(n / n_scale))}-L{max(4, round(l / scale))}"
        t1, tn, serial = [], [], []
        for _ in range(rounds):
            one = once(mpi, program, 1, f"msa:{size}")
            t1.append(one["time_s"])
            serial.append(one["serial_s"] / one["time_s"])
            tn.append(once(mpi, program, ranks, f"msa:{size}")["time_s"])
        rows.append((statistics.median(t1) / statistics.median(tn), name, size, statistics.median(t1),
                     statistics.median(serial)))
    for up, name, size, t1, serial in sorted(rows, reverse=True):
        print(f"  {name:11} as {size:10} T(1) {t1:.3f} s  serial share {100 * serial:.1f}%  "
              f"speed-up {up:.2f}")
    print(f"  last: {sorted(rows, reverse=True)[-1][1]} (seed 002: S1500-L100)")


def emulated(spec: str, rounds: int) -> None:
    from shoal.work import runner

    print(f"speed-up on --emulate {spec} (nodes, one rank each), {rounds} repetitions; median")
    for name, size in SIZES.items():
        request = runner.WorkRequest(workload=name, size=size, reps=rounds, emulate=spec)
        run, plan = runner.start(request, ["benchmarks/work_scaling.py"], None)
        runner.execute(run, plan)
        from shoal.work import summary

        rows = summary.write(run)
        print(f"  {name:11} {size:12} " + "   ".join(
            f"n={r['nodes']} {r['speedup']:.2f} (spread {100 * r['time_spread']:.0f}%)" for r in rows)
            + f"   [{run.path}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mpi", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ranks", default="1,2,3,4")
    parser.add_argument("--spread-reps", type=int, default=5)
    parser.add_argument("--msa-scale", type=int, default=3)
    parser.add_argument("--msa-ranks", type=int, default=2)
    parser.add_argument("--msa-keep-ratio", action="store_true",
                        help="scale N by 1/s^2 (keeps each set's tree-to-alignment ratio N/L^2); by "
                             "default N and L are both scaled by 1/s, which multiplies every set's "
                             "N/L^2 by s: the order of the sets is kept and the serial tree is "
                             "large enough to measure")
    parser.add_argument("--emulate", default=None)
    parser.add_argument("--only", default="speedup,spread,msa",
                        help="which parts: speedup, spread, msa (comma-separated)")
    args = parser.parse_args()
    mpi = discover.resolve(args.mpi)
    program = build.build("work", mpi)
    parts = set(args.only.split(","))
    if "speedup" in parts:
        local_speedups(mpi, program, args.rounds, [int(x) for x in args.ranks.split(",")])
    if "spread" in parts:
        one_rank_spread(mpi, program, args.spread_reps)
    if "msa" in parts:
        msa_table_i(mpi, program, args.msa_scale, args.msa_ranks, args.rounds, args.msa_keep_ratio)
    if args.emulate:
        emulated(args.emulate, args.rounds)
    return 0


if __name__ == "__main__":
    run_main(main)
