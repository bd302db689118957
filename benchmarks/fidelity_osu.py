#!/usr/bin/env python3
"""Does shoal-bench measure what OSU Micro-Benchmarks measure?

Alternates, `--rounds` times, OSU's programs and shoal-bench on this machine
and MPI (2 ranks), and prints per-size ratios and their median:

- latency: shoal's imb.PingPong (half round trip, s) against osu_latency
  (half round trip, us), 1 B .. 1 MiB. Same pattern, same definition:
  target ratio within 3% of 1.
- bandwidth: shoal's imb.Uniband against osu_bw, 1 KiB .. 4 MiB: the same
  pattern (a window of 64 MPI_Isend, Waitall, an ack per window): target
  ratio within 3% of 1.
- for reference, shoal's mpbench.bandwidth against osu_bw. These are NOT the
  same pattern: osu_bw keeps a window of 64 MPI_Isend in
  flight, waits for all, and then takes a 1-byte ack; MPBench issues
  blocking MPI_Send one after another and takes a 4-byte ack at the end.
  Where MPI completes a send only when the receiver has matched it
  (rendezvous, large messages) the blocking loop cannot overlap one
  message's handshake with the next, so the ratio below 1 there is the
  difference between the two definitions, not an error of either. It is
  reported as measured; no target applies.

OSU itself is run twice per round, and the ratio of its two runs is printed
as a control: how far two runs of the same program drift apart on this
machine, the noise any comparison here carries.

OSU prints the mean of one timed loop per size; shoal reports the median of
many repetitions. On a quiet machine the two agree; on a busy one OSU's mean
carries the slow moments that shoal's median leaves out, so shoal's own mean
over its repetitions is printed beside its median, and so is the ratio of
the two programs' best rounds (the quietest moment each of them saw).

OSU is not part of shoal: build osu_latency and osu_bw yourself with the
same MPI's mpicc and pass their directory:

    .venv/bin/python benchmarks/fidelity_osu.py --osu-dir /tmp/osu-bin [--mpi mpich]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

from shoal.errors import ShoalError
from shoal.mpi import build, discover
from shoal.mpi.launch import Job

from entry import run_main

LATENCY_SIZES = [1 << k for k in range(0, 21)]      # 1 B .. 1 MiB
BANDWIDTH_SIZES = [1 << k for k in range(10, 23)]   # 1 KiB .. 4 MiB


def run(mpi: discover.MPIInstall, argv: list[str]) -> str:
    job = Job(mpi=mpi, ranks=2, argv=argv)
    cmd, _ = job.command()
    proc = subprocess.run(cmd, env=job.popen_env(), capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise ShoalError(f"{Path(argv[0]).name} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


def parse_osu(text: str) -> dict[int, float]:
    """OSU's table: lines of '<size> <value> [...]' below '#' headers."""
    table: dict[int, float] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].isdigit():
            try:
                table[int(fields[0])] = float(fields[1])
            except ValueError:
                continue
    return table


Series = dict[int, list[float]]   # per size, one value per round


def add(series: Series, values: dict[int, float]) -> None:
    for size, value in values.items():
        series.setdefault(size, []).append(value)


def run_osu(mpi, program: Path) -> dict[int, float]:
    return parse_osu(run(mpi, [str(program)]))


def run_shoal(mpi, program: Path, test: str, sizes: list[int], budget: float,
          unit: str) -> tuple[dict[int, float], dict[int, float]]:
    """Per size: the median and the mean of shoal's repetitions, in OSU's unit (us or MB/s)."""
    spec = ",".join(f"{test}:{s}" for s in sizes)
    out = run(mpi, [str(program), "--points", spec, "--budget", str(budget)])
    points = [r for r in map(json.loads, out.splitlines()) if r["type"] == "point"]

    def in_unit(r: dict, seconds: float) -> float:
        return seconds * 1e6 if unit == "us" else r["bytes_per_op"] / seconds / 1e6

    return ({r["size_B"]: in_unit(r, r["median_s"]) for r in points},
            {r["size_B"]: in_unit(r, statistics.fmean(r["samples_s"])) for r in points})


def human(size: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def report(title: str, unit: str, sizes: list[int], osu: Series, shoal: Series, shoal_mean: Series,
           target: float | None, higher_is_better: bool, osu_again: Series) -> None:
    """Per size: OSU and shoal's median (each the median over rounds) and three ratios.

    median/OSU is the comparison the target applies to; mean/OSU uses shoal's
    mean over its repetitions (OSU prints a mean); best/best compares each
    program's best round, which on a busy machine is the quietest moment
    either of them saw; OSU/OSU is OSU's second run of each round against
    its first (the control).
    """
    print(f"\n{title}")
    print(f"{'size':>8} {'OSU ' + unit:>12} {'shoal ' + unit:>12} {'median/OSU':>11} {'mean/OSU':>9} "
          f"{'best/best':>10} {'OSU/OSU':>8}")
    best = max if higher_is_better else min
    columns: list[list[float]] = [[], [], [], []]
    for size in sizes:
        if not osu.get(size) or not shoal.get(size) or not osu_again.get(size):
            continue
        o, s, m, o2 = (statistics.median(v[size]) for v in (osu, shoal, shoal_mean, osu_again))
        row = [s / o, m / o, best(shoal[size]) / best(osu[size]), o2 / o]
        for col, value in zip(columns, row):
            col.append(value)
        print(f"{human(size):>8} {o:12.4f} {s:12.4f} {row[0]:11.4f} {row[1]:9.4f} {row[2]:10.4f} "
              f"{row[3]:8.4f}")
    if not columns[0]:
        print("no sizes in common")
        return
    med, med_mean, med_best, med_control = (statistics.median(col) for col in columns)
    verdict = ""
    if target is not None:
        verdict = f" (target within {target:.0%} of 1: {'PASS' if abs(med - 1) <= target else 'MISS'})"
    print(f"median of per-size ratios: median/OSU {med:.4f}{verdict}; mean/OSU {med_mean:.4f}; "
          f"best/best {med_best:.4f}; control OSU/OSU {med_control:.4f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--osu-dir", required=True, type=Path,
                        help="directory holding osu_latency and osu_bw built with the same MPI")
    parser.add_argument("--mpi", default=None, help="mpich, openmpi or a path (default: mpich)")
    parser.add_argument("--rounds", type=int, default=8, help="alternations of OSU and shoal (default 8)")
    parser.add_argument("--budget", type=float, default=0.5, help="shoal seconds per point (default 0.5)")
    args = parser.parse_args()

    programs = {name: args.osu_dir / name for name in ("osu_latency", "osu_bw")}
    missing = [str(p) for p in programs.values() if not os.access(p, os.X_OK)]
    if missing:
        raise ShoalError(f"--osu-dir {args.osu_dir}: no executable {', '.join(missing)}; "
                         "build OSU's osu_latency and osu_bw with the same MPI's mpicc")
    mpi = discover.resolve(args.mpi)
    program = build.build("bench", mpi)

    names = ("osu_lat", "osu_lat2", "osu_bw", "osu_bw2", "lat", "lat_mean", "bw", "bw_mean",
             "uni", "uni_mean")
    got: dict[str, Series] = {name: {} for name in names}
    for rnd in range(args.rounds):
        add(got["osu_lat"], run_osu(mpi, programs["osu_latency"]))
        for name, values in zip(("lat", "lat_mean"),
                                run_shoal(mpi, program, "imb.PingPong", LATENCY_SIZES, args.budget, "us")):
            add(got[name], values)
        add(got["osu_bw"], run_osu(mpi, programs["osu_bw"]))
        add(got["osu_lat2"], run_osu(mpi, programs["osu_latency"]))
        add(got["osu_bw2"], run_osu(mpi, programs["osu_bw"]))
        for test, prefix in (("mpbench.bandwidth", "bw"), ("imb.Uniband", "uni")):
            for name, values in zip((prefix, prefix + "_mean"),
                                    run_shoal(mpi, program, test, BANDWIDTH_SIZES, args.budget, "MB/s")):
                add(got[name], values)
        print(f"round {rnd + 1}/{args.rounds} done", flush=True)

    print(f"\n{mpi.name}, 2 ranks on one host, {args.rounds} alternating rounds, medians over rounds")
    report("latency: imb.PingPong vs osu_latency (half round trip)", "us", LATENCY_SIZES,
           got["osu_lat"], got["lat"], got["lat_mean"], target=0.03, higher_is_better=False,
           osu_again=got["osu_lat2"])
    report("bandwidth: imb.Uniband vs osu_bw (same windowed pattern)", "MB/s", BANDWIDTH_SIZES,
           got["osu_bw"], got["uni"], got["uni_mean"], target=0.03, higher_is_better=True,
           osu_again=got["osu_bw2"])
    report("bandwidth: mpbench.bandwidth vs osu_bw (different patterns, see the header)", "MB/s",
           BANDWIDTH_SIZES, got["osu_bw"], got["bw"], got["bw_mean"], target=None,
           higher_is_better=True, osu_again=got["osu_bw2"])
    return 0


if __name__ == "__main__":
    run_main(main)
