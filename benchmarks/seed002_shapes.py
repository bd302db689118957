"""Seed 002's shapes on emulated set-top boxes, each measured number beside the seed's.

Three figures of seed 002 §V, measured with shoal's own commands:

a. IMB PingPong averaged over the seed's six sizes (64 B..256 KiB): two ``stb`` on
   ``docsis-27m`` against two ``xeon-blade`` on their ``gigabit-blades`` link (seed: 122 ms against
   0.9 ms; bandwidth 0.39 MB/s against 45-50 MB/s);
b. IMB Bcast at 8 and 128 boxes, averaged over the six sizes (seed: 840 ms and 7.1 s, x8.5;
   target: shoal's ratio within a factor 1.5 of it);
c. ray tracing 512x512 from 8 to 64 boxes (seed 6.9 s to 1.27 s, speed-up 5.4; target +-25 %)
   and 2048x2048 speed-ups from 8 boxes at 64 and 128 (seed 2.5 and 5.3; target: the same
   order, S(64) < S(128)).

Each call does one round of one part and appends its measurements to ``--results`` (JSON
lines), so rounds of different parts interleave and a round that failed is simply repeated:

    python benchmarks/seed002_shapes.py pingpong --results R.jsonl   # 2 + 2 devices
    python benchmarks/seed002_shapes.py small --results R.jsonl      # 8 boxes: 2048x2048
    flock LOCK python benchmarks/seed002_shapes.py big --results R.jsonl   # one 128-box plant
    python benchmarks/seed002_shapes.py table --results R.jsonl

A full ``shoal study --preset seed002`` run holds the same numbers (one counted round of its
workloads, IMB's Bcast at every size); ``study RUN`` records them as one round and prints the
table, with the host time each part of the study took (from its rows' monotonic stamps):

    python benchmarks/seed002_shapes.py study --run /var/tmp/seed002-full --results R.jsonl

``big`` brings one 128-box plant up, runs Bcast at 8 and 128 boxes and ray tracing at 8, 64
and 128 boxes on it with ``--attach``, and brings it down. ``table`` prints the median over
rounds (min..max) of each number beside the seed's (``shoal/data/seed002.csv``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from entry import run_main  # noqa: E402

from shoal.errors import ShoalError  # noqa: E402
from shoal.study import seed002  # noqa: E402

SIZES = "64,1K,8K,32K,128K,256K"  # seed 002 §V: 64, 1K, 8K, 32K, 128K and 256K bytes
BIG = 128
RAYTRACE_NODES = "8,64,128"
RAYTRACE_BIG_NODES = "64,128"  # 2048x2048 at 8 boxes runs on an 8-box plant (part small)


def shoal(*argv: str) -> tuple[dict | list, float]:
    """Run one shoal command with --json; its parsed output and wall time (a run with failed
    points exits non-zero but prints its JSON: kept)."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "shoal", *argv, "--json"], capture_output=True, text=True)
    took = time.monotonic() - start
    if done.returncode != 0 and done.stdout.strip().startswith("{"):
        return json.loads(done.stdout), took
    if done.returncode != 0:
        raise ShoalError(f"shoal {' '.join(argv)} failed after {took:.0f} s: {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout), took


def record(results: Path, row: dict) -> None:
    with results.open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def bench_rows(out: dict) -> list[dict]:
    for f in out["failures"]:  # kept out of the table, printed for the record
        print(f"FAILED {f['test']} {f['size_B']} B at {f['nodes']}: {f['reason']} {f['detail'][:300]}", flush=True)
    return out["results"]


def part_pingpong(results: Path, rnd: int, mpi: str) -> None:
    for machine, link in (("stb", "docsis-27m"), ("xeon-blade", "gigabit-blades")):
        out, took = shoal("bench", "--emulate", f"2x{machine}", "--link", link, "--tests", "imb.PingPong",
                          "--sizes", SIZES, "--mpi", mpi)
        for r in bench_rows(out):
            record(results, {"part": "pingpong", "round": rnd, "machine": machine, "size_B": r["size_B"],
                             "time_s": r["time_median_s"], "bandwidth_Bps": r["bandwidth_median_Bps"],
                             "reps": r["reps"], "dilation": r["dilation"], "wall_s": took})
        print(f"pingpong {machine}: {took:.0f} s", flush=True)


def raytrace(results: Path, rnd: int, where: list[str], size: str, nodes: str, mpi: str) -> None:
    out, took = shoal("work", "raytrace", *where, "--size", size, "--nodes", nodes, "--reps", "1", "--mpi", mpi)
    if out["failures"]:
        raise ShoalError(f"raytrace {size} failed: {out['failures'][:2]}")
    for r in out["summary"]:
        record(results, {"part": "raytrace", "round": rnd, "image": int(size), "nodes": r["nodes"],
                         "time_s": r["time_median_s"], "wall_s": took})
    print(f"raytrace {size} at {nodes} boxes: {took:.0f} s", flush=True)


def with_plant(name: str, boxes: int, body) -> None:
    start = time.monotonic()
    shoal("cluster", "up", "--emulate", f"{boxes}xstb", "--link", "docsis-27m", "--name", name)
    print(f"{boxes} boxes up in {time.monotonic() - start:.0f} s", flush=True)
    try:
        body(["--attach", name])
    finally:
        subprocess.run([sys.executable, "-m", "shoal", "cluster", "down", name], capture_output=True)


def part_small(results: Path, rnd: int, mpi: str) -> None:
    with_plant(f"shapes8r{rnd}", 8, lambda where: raytrace(results, rnd, where, "2048", "8", mpi))


def part_big(results: Path, rnd: int, mpi: str) -> None:
    def body(where: list[str]) -> None:
        # A 256 KiB broadcast to 128 boxes is about 10 s a call on the plant (15 s measured), and
        # a point makes at least three (two warm-ups): 150 s of device time before it counts as hung.
        out, took = shoal("bench", *where, "--nodes", f"8,{BIG}", "--tests", "imb.Bcast", "--sizes", SIZES,
                          "--mpi", mpi, "--timeout", "150")
        for r in bench_rows(out):
            record(results, {"part": "bcast", "round": rnd, "nodes": r["nodes"], "size_B": r["size_B"],
                             "time_s": r["time_median_s"], "reps": r["reps"], "dilation": r["dilation"],
                             "wall_s": took})
        print(f"bcast at 8 and {BIG} boxes: {took:.0f} s", flush=True)
        raytrace(results, rnd, where, "512", RAYTRACE_NODES, mpi)
        raytrace(results, rnd, where, "2048", RAYTRACE_BIG_NODES, mpi)
    with_plant(f"shapes{BIG}r{rnd}", BIG, body)


def part_study(results: Path, rnd: int, run_dir: Path) -> None:
    """Record a seed002 study run's counted workload runs and IMB medians as round ``rnd``, and
    print the host time of each part (first start to last end of its rows)."""
    import pandas as pd

    manifest = json.loads((run_dir / "manifest.json").read_text())
    warmup = int(manifest["study"].get("work_warmup", 0))
    label = manifest["cluster_label"]
    work = pd.read_csv(run_dir / "work.csv")
    bench = pd.read_csv(run_dir / "results.csv")
    counted = work[work["rep"].astype(int) >= warmup]
    for (config, nodes, size), rows in counted[counted["workload"] == "raytrace"].groupby(["config", "nodes", "size"]):
        if config == label:
            record(results, {"part": "raytrace", "round": rnd, "image": int(size), "nodes": int(nodes),
                             "time_s": float(rows["time_s"].median()), "wall_s": 0.0})
    for r in bench.itertuples():
        if r.test == "imb.Bcast" and r.config == label:
            record(results, {"part": "bcast", "round": rnd, "nodes": int(r.nodes), "size_B": int(r.size_B),
                             "time_s": float(r.time_median_s), "reps": int(r.reps), "dilation": float(r.dilation),
                             "wall_s": 0.0})
        if r.test == "imb.PingPong" and (r.config == "reference" or (r.config == label and r.nodes == 8)):
            record(results, {"part": "pingpong", "round": rnd, "size_B": int(r.size_B),
                             "machine": "xeon-blade" if r.config == "reference" else "stb",
                             "time_s": float(r.time_median_s), "bandwidth_Bps": float(r.bandwidth_median_Bps),
                             "reps": int(r.reps), "dilation": float(r.dilation), "wall_s": 0.0})

    def span(rows) -> str:
        if rows.empty:
            return "none"
        return f"{rows['t_end_mono_s'].max() - rows['t_start_mono_s'].min():.0f} s, {len(rows)} rows"

    print(f"workloads (warm-up and counted rounds): {span(work)}")
    for (config, nodes), rows in work.groupby(["config", "nodes"]):
        print(f"  {config} at {nodes}: {rows['t_end_mono_s'].sub(rows['t_start_mono_s']).sum():.0f} s of runs")
    skipped = pd.read_csv(run_dir / "skipped.csv") if (run_dir / "skipped.csv").exists() else pd.DataFrame()
    for (config, nodes), rows in bench.groupby(["config", "nodes"]):
        left = 0 if skipped.empty else int(((skipped["config"] == config) & (skipped["nodes"] == nodes)).sum())
        print(f"IMB {config} at {nodes}: {span(rows)} measured, {left} not run")


def spread(xs: list[float], fmt: str = "{:.3g}") -> str:
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}..{fmt.format(max(xs))}, {len(xs)} rounds)"


def per_round(rows: list[dict], key, value) -> dict:
    """{round: value(rows of that round)} over the rounds that have every row ``key`` selects."""
    by_round: dict[int, list[dict]] = {}
    for r in rows:
        if key(r):
            by_round.setdefault(r["round"], []).append(r)
    return {rnd: value(rs) for rnd, rs in by_round.items() if value(rs) is not None}


def mean_over_sizes(rs: list[dict], field: str = "time_s") -> float | None:
    return statistics.mean(r[field] for r in rs) if len(rs) == 6 else None


def table(results: Path) -> int:
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    seed = seed002.find
    lines = []

    def line(what: str, measured: list[float], seed_value: float | None, verdict: str = "", fmt: str = "{:.3g}"):
        ratio = f"{statistics.median(measured) / seed_value:.2f}" if measured and seed_value else "-"
        shown = spread(measured, fmt) if measured else "not measured"
        lines.append(f"{what:44} {shown:>34} {('-' if seed_value is None else fmt.format(seed_value)):>9} "
                     f"{ratio:>6}  {verdict}")

    pp = {m: per_round(rows, lambda r, m=m: r["part"] == "pingpong" and r["machine"] == m, mean_over_sizes)
          for m in ("stb", "xeon-blade")}
    bw = {m: per_round(rows, lambda r, m=m: r["part"] == "pingpong" and r["machine"] == m,
                       lambda rs: mean_over_sizes(rs, "bandwidth_Bps")) for m in ("stb", "xeon-blade")}
    line("a. PingPong mean of 6 sizes, stb (s)", list(pp["stb"].values()),
         seed("pingpong_time_mean_sizes", "stb", 2).value)
    line("a. PingPong mean of 6 sizes, xeon-blade (s)", list(pp["xeon-blade"].values()),
         seed("pingpong_time_mean_sizes", "xeon-blade", 2).value)
    both = [pp["stb"][k] / pp["xeon-blade"][k] for k in pp["stb"] if k in pp["xeon-blade"]]
    line("a. PingPong stb / xeon-blade", both, 0.122 / 0.0009)
    line("a. bandwidth mean of 6 sizes, stb (B/s)", list(bw["stb"].values()),
         seed("pingpong_bandwidth_mean_sizes", "stb", 2).value)
    blade_bw = seed("pingpong_bandwidth_mean_sizes", "xeon-blade", 2)
    line("a. bandwidth mean of 6 sizes, blade (B/s)", list(bw["xeon-blade"].values()),
         (blade_bw.value + blade_bw.value_high) / 2, "seed 45e6..50e6")

    bc = {n: per_round(rows, lambda r, n=n: r["part"] == "bcast" and r["nodes"] == n, mean_over_sizes)
          for n in (8, BIG)}
    line("b. Bcast mean of 6 sizes, 8 boxes (s)", list(bc[8].values()), seed("bcast_time_mean_sizes", "stb", 8).value)
    line(f"b. Bcast mean of 6 sizes, {BIG} boxes (s)", list(bc[BIG].values()),
         seed("bcast_time_mean_sizes", "stb", BIG).value)
    growth = [bc[BIG][k] / bc[8][k] for k in bc[BIG] if k in bc[8]]
    seed_growth = seed("bcast_time_mean_sizes", "stb", BIG).value / seed("bcast_time_mean_sizes", "stb", 8).value
    ok = bool(growth) and 1 / 1.5 <= statistics.median(growth) / seed_growth <= 1.5
    line(f"b. Bcast {BIG} / 8 boxes", growth, seed_growth, "within x1.5: " + ("yes" if ok else "NO"))
    for size in (64, 262144):
        for n in (8, BIG):
            xs = [r["time_s"] for r in rows if r["part"] == "bcast" and r["nodes"] == n and r["size_B"] == size]
            line(f"b. Bcast {size} B at {n} boxes (s)", xs, None)

    def rt(image: int, n: int) -> dict:
        return {r["round"]: r["time_s"] for r in rows if r["part"] == "raytrace" and r["image"] == image
                and r["nodes"] == n}

    for image in (512, 2048):
        for n in (8, 64, 128):
            sv = seed("raytrace_time", "stb", n, str(image))
            line(f"c. raytrace {image}² at {n} boxes (s)", list(rt(image, n).values()), sv.value if sv else None)
    r8 = rt(512, 8)
    s512 = [r8[k] / v for k, v in rt(512, 64).items() if k in r8]
    ok = s512 and abs(statistics.median(s512) / (6.9 / 1.27) - 1) <= 0.25
    line("c. raytrace 512² speed-up 8 -> 64", s512, 6.9 / 1.27, "within 25 %: " + ("yes" if ok else "NO"))
    r8 = rt(2048, 8)
    s2048 = {n: [r8[k] / v for k, v in rt(2048, n).items() if k in r8] for n in (64, 128)}
    order = s2048[64] and s2048[128] and 1 < statistics.median(s2048[64]) < statistics.median(s2048[128])
    for n in (64, 128):
        line(f"c. raytrace 2048² speed-up 8 -> {n}", s2048[n],
             seed("raytrace_speedup_from_8", "stb", n, "2048").value,
             ("same order (1 < S64 < S128): " + ("yes" if order else "NO")) if n == 128 else "")
    walls: dict[str, set[tuple[int, float]]] = {}
    for r in rows:
        walls.setdefault(r["part"], set()).add((r["round"], r["wall_s"]))
    print(f"{'quantity':44} {'shoal: median (min..max)':>34} {'seed 002':>9} {'ratio':>6}")
    print("\n".join(lines))
    print("wall time per command (s): " + "; ".join(
        f"{part} {', '.join(f'{w:.0f}' for _, w in sorted(ws))}" for part, ws in walls.items()))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=("pingpong", "small", "big", "table", "study"))
    ap.add_argument("--run", type=Path, default=None, help="part study: a seed002 study run directory")
    ap.add_argument("--results", type=Path, required=True, help="JSON lines, appended to")
    ap.add_argument("--round", type=int, default=None, help="round number (default: next for this part)")
    ap.add_argument("--mpi", default="mpich")
    args = ap.parse_args()
    if args.part == "table":
        return table(args.results)
    if args.part == "study":
        if args.run is None or not (args.run / "manifest.json").exists():
            raise ShoalError(f"study: give --run a 'shoal study --preset seed002' run directory, got {args.run}")
        part_study(args.results, 1 if args.round is None else args.round, args.run)
        return table(args.results)
    done = [json.loads(line) for line in args.results.read_text().splitlines()] if args.results.exists() else []
    mine = {"pingpong": lambda r: r["part"] == "pingpong", "big": lambda r: r["part"] == "bcast",
            "small": lambda r: r["part"] == "raytrace" and r["image"] == 2048 and r["nodes"] == 8}[args.part]
    rnd = args.round if args.round is not None else 1 + max([r["round"] for r in done if mine(r)], default=0)
    {"pingpong": part_pingpong, "small": part_small, "big": part_big}[args.part](args.results, rnd, args.mpi)
    return 0


if __name__ == "__main__":
    run_main(main)
