"""What the boxes' television costs MPI on the plant: IMB Bcast 256 KiB and ray tracing 512²
on N set-top boxes on docsis-27m, with and without a background (seed 002 §II: the boxes keep
decoding MPEG-2 while they compute).

Per round, per MPI, interleaved: a plant of N boxes without a background (the reference,
measured in the same round) and one whose boxes run it (default mpeg2-sd: a tenth of a box
core in a 29.97 fps rhythm, and a 3.75 Mbit/s programme multicast down the plant's
downstream), each brought up once (`shoal cluster up`), then on it `shoal bench --tests
imb.Bcast --sizes 262144` and `shoal work raytrace --size 512` over all N boxes (one rank a
box). Prints per MPI and workload each round's times and their ratio (with / without), the
median and spread of the ratio over the rounds, the points flagged short of CPU (host or
background), and what the decoders did (frames late or dropped: did the television keep
playing?). The load average is printed beside every run.
Run as root: .venv/bin/python benchmarks/seed002_background.py [--boxes 8] [--rounds 2]
             [--mpis mpich,openmpi] [--background mpeg2-sd]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from entry import run_main

from shoal.cluster import background, state
from shoal.hostfacts import cpu_model

LINK = "docsis-27m"


def _shoal(*argv: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "shoal", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"shoal {' '.join(argv[:2])} failed: {done.stderr.strip()[-600:]}")
    return done


def _rows(out: Path) -> list[dict]:
    with open(out / "results.csv") as fh:
        return list(csv.DictReader(fh))


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def one_plant(boxes: int, bg: str | None, mpi: str, name: str, out: Path) -> dict:
    """Bring the plant up, run both workloads on it, read the decoders, bring it down."""
    spec = f"{boxes}xstb" + (f"@{bg}" if bg else "")
    _shoal("cluster", "up", "--emulate", spec, "--link", LINK, "--name", name)
    try:
        _shoal("bench", "--attach", name, "--mpi", mpi, "--nodes", str(boxes), "--tests", "imb.Bcast",
               "--sizes", "262144", "--warmup", "1", "--min-reps", "3", "--max-reps", "5",
               "--budget", "2", "--out", str(out / "bench"))
        _shoal("work", "raytrace", "--attach", name, "--mpi", mpi, "--nodes", str(boxes),
               "--size", "512", "--reps", "1", "--out", str(out / "work"))
        decoders = background.counters(state.read(name) or {}) if bg else {}
    finally:
        subprocess.run([sys.executable, "-m", "shoal", "cluster", "down", name], capture_output=True)
    [bcast] = [r for r in _rows(out / "bench") if int(r["nodes"]) == boxes]
    [ray] = [r for r in _rows(out / "work") if int(r["nodes"]) == boxes]
    return {"bcast": bcast, "raytrace": ray, "decoders": decoders.get("devices", {}),
            "streams": decoders.get("streams", {})}


def _flags(row: dict) -> str:
    marks = [f"host {row.get('host_slack')}" if row.get("host_slack") == "short" else ""]
    if row.get("background_slack"):
        marks.append(f"background {row['background_slack']} (share {float(row['background_cpu_share']):.2f})")
    return ", ".join(m for m in marks if m) or "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boxes", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--mpis", default="mpich,openmpi")
    p.add_argument("--background", default="mpeg2-sd")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (emulated plants in the host's namespaces)")
    print(f"host: {cpu_model()}; {args.boxes} boxes on {LINK}; background {args.background}", flush=True)
    out_root = args.out or Path(tempfile.mkdtemp(prefix="seed002-background-"))
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for rnd in range(args.rounds):
        for mpi in args.mpis.split(","):
            got = {}
            for bg in (None, args.background):   # the reference first, then with the background
                label = bg or "none"
                print(f"round {rnd + 1} {mpi} {label}: {_load()}", flush=True)
                got[label] = one_plant(args.boxes, bg, mpi, f"bg{rnd}{mpi[:2]}{label[:3]}",
                                       out_root / f"r{rnd}-{mpi}-{label}")
            ref, bgd = got["none"], got[args.background]
            for work, key in (("bcast", "time_median_s"), ("raytrace", "time_s")):
                t0, t1 = float(ref[work][key]), float(bgd[work][key])
                times.setdefault((mpi, work), []).append((t0, t1))
                print(f"  {work:8} without {t0:8.3f} s [{_flags(ref[work])}]  with {t1:8.3f} s "
                      f"[{_flags(bgd[work])}]  ratio {t1 / t0:.3f}", flush=True)
            decoders = bgd["decoders"].values()
            if decoders:
                frames = sum(d["frames"] for d in decoders)
                late = sum(d["late"] for d in decoders)
                dropped = sum(d["dropped"] for d in decoders)
                received = sum(d["received_B"] for d in decoders) / max(1, len(decoders))
                print(f"  decoders: {len(decoders)} boxes, {frames} frames, {late} late, {dropped} "
                      f"dropped; {received / 1e6:.1f} MB of stream per box", flush=True)
    print("\nratio with / without the background (median, spread over rounds):")
    for (mpi, work), pairs in sorted(times.items()):
        ratios = [t1 / t0 for t0, t1 in pairs]
        print(f"  {mpi:8} {work:8} {statistics.median(ratios):.3f} ({min(ratios):.3f}..{max(ratios):.3f}); "
              f"without {statistics.median(t0 for t0, _ in pairs):.3f} s, "
              f"with {statistics.median(t1 for _, t1 in pairs):.3f} s")
    print(f"runs in {out_root}; {_load()}")
    return 0


if __name__ == "__main__":
    run_main(main)
