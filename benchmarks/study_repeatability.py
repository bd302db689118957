"""Does the default study give the same answer twice? Three default studies in a row, compared.

Targets (issue: the study's answer holds):

- each workload's n* interval (95 %, bootstrap over repetitions) overlaps across all runs,
  under both waiting conditions;
- every run agrees: the range of sizes its headline names (the best and the sizes next to it
  that the points' 95 % uncertainty cannot tell from it) holds every other run's best size;
  the best sizes' spread is printed;
- no headline names a size above 2N (N = the largest measured node count);
- at least 90 % of the workload points reach the study's --ci (3 %);
- the default study's wall time (target <= 4 min on 2 cores as root), median and min..max.

It also prints the spinning baseline against seed 000: the emulated NUC's power under MPBench
with its ranks spinning (Table 5.7: 18.07-19.65 W, target within 10 %), and the perf/W of one
board and of 3-4 boards against the NUC per MPBench test, next to the direction §5.6 reports.

Every run is a whole `shoal study` with its defaults (plus any arguments after --); the
reference for every ratio is measured in the same run. The host is shared: the times and the
spread of the points depend on what else runs; the script prints the load average with them.
Run: .venv/bin/python benchmarks/study_repeatability.py [--runs 3] [--keep DIR] [-- STUDY ARGS]
     .venv/bin/python benchmarks/study_repeatability.py --from RUN RUN RUN   (compare finished runs)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from entry import run_main  # noqa: E402

NUC_TABLE_5_7_W = (18.0742, 19.6473)  # lowest and highest average under MPBench
# Seed 000 §5.6 (Figures 5.33-5.38): perf/W of the MinnowBoard cluster against the NUC.
ONE_BOARD = "below"  # "The power efficiency of one platform is ... less than the desktop system"
THREE_FOUR_BOARDS = {"alltoall": "above", "bibw": "above", "reduce": "below", "bandwidth": "below",
                     "bcast": "below", "latency": "below", "roundtrip": "below"}


def reported(run: Path) -> dict:
    """The findings of a finished study, its report written again with this version of shoal."""
    done = subprocess.run([sys.executable, "-m", "shoal", "report", str(run), "--out", str(run / "report")],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"report failed: {done.stderr.strip()[-500:]}")
    return next(iter(json.loads((run / "report" / "findings.json").read_text()).values()))


def study(out: Path, extra: list[str]) -> tuple[dict, float]:
    argv = [sys.executable, "-m", "shoal", "study", *extra, "--out", str(out)]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"study failed: {done.stderr.strip()[-500:]}")
    findings = json.loads((out / "report" / "findings.json").read_text())
    return next(iter(findings.values())), wall


def _interval(d: dict | None) -> tuple[float, float] | None:
    if not d or d.get("lo") is None:
        return None
    return d["lo"], (float("inf") if d.get("hi") is None else d["hi"])


def _text(i: tuple[float, float] | None) -> str:
    return "-" if i is None else f"{i[0]:.2f}..{i[1]:.2f}"


def intervals_overlap(runs: list[dict]) -> bool:
    ok_all = True
    names = [f"{w['workload']} {w['size']}" for w in runs[0]["workloads"]]
    for cond in ("sleeping", "spinning"):
        print(f"  n* intervals, {cond}:")
        for name in names:
            per_run = []
            for f in runs:
                w = next((w for w in f["workloads"] if f"{w['workload']} {w['size']}" == name), None)
                per_run.append(_interval(((w or {}).get("conditions") or {}).get(cond, {}).get("n_star")))
            ok = all(per_run) and max(i[0] for i in per_run) <= min(i[1] for i in per_run)
            ok_all &= ok
            print(f"    {name:24} " + "  ".join(f"{_text(i):>14}" for i in per_run)
                  + f"  {'overlap' if ok else 'MISSED'}")
    return ok_all


def _range(h: dict | None) -> tuple[int, int] | None:
    """The sizes a headline names: its tied range, or its one size (older findings have no range)."""
    if not h or h.get("size") is None:
        return None
    span = h.get("best_range") or {"low": h["size"], "high": h["size"]}
    return span["low"], span["high"]


def agreeing(heads: list[dict | None]) -> list[bool]:
    """Per run: does its range hold every other run's best size?"""
    ranges = [_range(h) for h in heads]
    sizes = [h["size"] if h else None for h in heads]
    return [r is not None and all(s is not None and r[0] <= s <= r[1] for j, s in enumerate(sizes) if j != i)
            for i, r in enumerate(ranges)]


def headlines(runs: list[dict]) -> bool:
    ok_all = True
    for cond in ("sleeping", "spinning"):
        heads = [(f.get("headline") or {}).get(cond) for f in runs]
        sizes = [h["size"] if h else None for h in heads]
        for h in heads:
            print(f"  {h['text'] if h else cond + ': no headline'}")
        largest = max((h["largest_measured"] for h in heads if h), default=0)
        known = [s for s in sizes if s is not None]
        same = len(known) == len(sizes) and max(known) - min(known) <= 1
        bounded = all(s <= 2 * largest for s in known)
        agree = agreeing(heads)
        ok_all &= all(agree) and bounded
        named = ", ".join("-" if r is None else (f"{r[0]}" if r[0] == r[1] else f"{r[0]}–{r[1]}")
                          for r in map(_range, heads))
        print(f"  {cond}: best sizes {sizes}, ranges named {named}: {sum(agree)} of {len(heads)} runs agree "
              f"(their range holds every other run's best) {'ok' if all(agree) else 'MISSED'}; "
              f"best sizes differ by <= 1 {'yes' if same else 'no'}; "
              f"none above 2N = {2 * largest} {'ok' if bounded else 'MISSED'}")
    return ok_all


def precision(runs: list[dict]) -> None:
    for i, f in enumerate(runs, 1):
        p = f.get("precision") or {}
        share = p["converged"] / p["points"] if p.get("points") else 0.0
        print(f"  run {i}: {p.get('converged')} of {p.get('points')} workload points reached "
              f"+-{100 * (p.get('ci_target') or 0):.0f}% ({100 * share:.0f}%; target >= 90%) "
              f"{'ok' if share >= 0.9 else 'MISSED'}")
        for m in p.get("not_converged", []):
            ci = "-" if m["ci_rel"] is None else f"{100 * m['ci_rel']:.1f}%"
            print(f"    {m['workload']} {m['config']} n={m['nodes']}: {m['reps']} reps, CI {ci} ({m['why']})")


def spinning_baseline(runs: list[dict]) -> None:
    lo, hi = NUC_TABLE_5_7_W
    for i, f in enumerate(runs, 1):
        ref = [p for p in f.get("power", []) if p["is_reference"]]
        if not ref or ref[0].get("power_spin_W") is None:
            print(f"  run {i}: no MPBench on an emulated reference")
            continue
        w = ref[0]["power_spin_W"]
        within = 0.9 * lo <= w <= 1.1 * hi
        print(f"  run {i}: emulated NUC under MPBench, spinning: {w:.2f} W (sleeping, as modelled: "
              f"{ref[0]['power_mean_W']:.2f} W) vs Table 5.7 {lo:.2f}-{hi:.2f} W: "
              f"{100 * (w / lo - 1):+.1f}% / {100 * (w / hi - 1):+.1f}% "
              f"{'within 10%' if within else 'MISSED'}")
        print(f"    {'test':12} {'1 board':>16} {'3 boards':>16} {'4 boards':>16}  seed 000 §5.6 (1 / 3-4)")
        for t in f.get("tests", []):
            name = t["test"].split(".")[-1]
            spin = t.get("ppw_vs_reference_spin") or {}
            sleep = t.get("ppw_vs_reference") or {}
            cells = [f"{spin.get(n, float('nan')):6.2f}/{sleep.get(n, float('nan')):<6.2f}x" for n in ("1", "3", "4")]
            expect = THREE_FOUR_BOARDS.get(name, "not stated")

            def side(x: float) -> str:
                return "above" if x > 1 else "below"

            agree = [side(spin.get("1", 0)) == ONE_BOARD]
            if name in THREE_FOUR_BOARDS:
                agree += [side(spin.get(n, 0)) == expect for n in ("3", "4")]
            print(f"    {name:12} " + " ".join(f"{c:>16}" for c in cells)
                  + f"  {ONE_BOARD} / {expect}: {'as the thesis' if all(agree) else 'differs'}")
        print("    (cells: perf/W over the NUC's, spinning/sleeping)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="keep the runs in this directory")
    parser.add_argument("--from", dest="existing", type=Path, nargs="+", default=None,
                        help="compare these finished study runs instead of running new ones")
    parser.add_argument("extra", nargs="*", help="arguments for every shoal study (after --)")
    args = parser.parse_args()
    if args.existing:
        runs = [reported(run) for run in args.existing]
    else:
        runs, walls, loads = [], [], []
        with tempfile.TemporaryDirectory(prefix="shoal-study-repeat-") as tmp:
            where = args.keep or Path(tmp)
            for i in range(args.runs):
                f, wall = study(where / f"run{i + 1}", args.extra)
                runs.append(f)
                walls.append(wall)
                loads.append(os.getloadavg()[1])
                print(f"run {i + 1}: {wall:.0f} s wall (load average over 5 min after it: {loads[-1]:.1f})",
                      flush=True)
        print(f"default study wall time as uid {os.geteuid()}: median {statistics.median(walls):.0f} s "
              f"(min {min(walls):.0f} .. max {max(walls):.0f}) over {len(walls)} runs; target <= 240 s "
              f"{'ok' if statistics.median(walls) <= 240 else 'MISSED'}")
    print("headline:")
    ok = headlines(runs)
    print("n* per workload:")
    ok &= intervals_overlap(runs)
    print("precision:")
    precision(runs)
    print("spinning baseline (seed 000 Table 5.7, §5.6):")
    spinning_baseline(runs)
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main)
