"""Host speed: its calibration's repeatability and cost, and device times that hold across hosts.

Three measurements, each printed against its target and its reference:

1. calibration: this host's speed measured ``--calibrations`` times afresh (as
   ``--recalibrate`` does), its spread (max - min)/median over them (target <= 2 % on a
   quiet host) and the time one takes (target <= 3 s), then the cached speed's
   time (its check: target about 0 s);
2. ray tracing on emulated set-top boxes: ``shoal work raytrace --size 512`` on
   ``--boxes`` (8) boxes of seed 002's plant, median device time over ``--rounds``
   against seed 002's 6.9 s (target within 15 %);
3. videostream's speed-up from 1 to 4 emulated MinnowBoards (the study's size, ranks and
   default wait), median over ``--rounds`` against the same speed-up on the host the
   profiles were derived on (``--reference-speedup``, 2.40; target within 5 %).

Rounds interleave 2 and 3. Every line names this host's CPU and measured speed.

Run: .venv/bin/python benchmarks/host_speed.py [--calibrations 5] [--rounds 2] [--only calibration]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from entry import run_main  # noqa: E402

from shoal import proc  # noqa: E402
from shoal.cluster import cpulimit, hostspeed  # noqa: E402
from shoal.errors import ShoalError  # noqa: E402
from shoal.mpi import build, discover  # noqa: E402

SHOAL = str(Path(sys.executable).with_name("shoal"))
SEED002_512_ON_8_S = 6.9   # seed 002 §V: Tachyon 512x512 on 8 set-top boxes
REFERENCE_SPEEDUP = 2.40   # videostream 1 -> 4 MinnowBoards on the profiles' host (docs/img/study-report.png)


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def calibration(count: int) -> hostspeed.HostSpeed:
    program = build.build("work", discover.resolve(None))
    copies = max(1, int(cpulimit.capacity()))
    speeds, took = [], []
    for _ in range(count):
        t0 = time.perf_counter()
        speeds.append(hostspeed.measured(program, copies, recalibrate=True))
        took.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    cached = hostspeed.measured(program, copies)
    cached_s = time.perf_counter() - t0
    mixes = [s.mix for s in speeds]
    print(f"host: {speeds[-1].cpu_model}, {copies} probe copies")
    for name in speeds[0].by_kernel:
        values = [s.by_kernel[name] for s in speeds]
        print(f"  {name:12s} {statistics.median(values):.3f} reference cores, spread {spread(values):.1%}")
    print(f"  mix          {statistics.median(mixes):.3f} reference cores over {count} calibrations: "
          f"spread {spread(mixes):.1%} (target <= 2 % on a quiet host); "
          f"within-calibration spread {statistics.median(s.spread for s in speeds):.1%} (median)")
    print(f"  one calibration: {statistics.median(took):.2f} s median [{min(took):.2f}, {max(took):.2f}] "
          f"(target <= 3 s); cached: {cached_s:.2f} s ({cached.source}, {cached.note})")
    return speeds[-1]


def work(argv: list[str], out: Path) -> list[dict]:
    done = proc.run([SHOAL, "work", *argv, "--out", str(out), "--json"], timeout=3600,
                    what=f"shoal work {' '.join(argv)}")
    if done.returncode != 0:
        raise ShoalError(f"shoal work {' '.join(argv)} failed: {done.tail()}")
    return json.loads(done.stdout)["summary"]


def across_hosts(rounds: int, boxes: int, reference_speedup: float) -> None:
    raytrace, speedups = [], []
    with tempfile.TemporaryDirectory(prefix="shoal-host-speed-") as tmp:
        for r in range(rounds):
            rows = work(["raytrace", "--size", "512", "--emulate", f"{boxes}xstb", "--nodes", str(boxes),
                         "--reps", "2"], Path(tmp) / f"rt{r}")
            raytrace.append(rows[0]["time_median_s"])
            rows = work(["videostream", "--size", "640x360x16", "--emulate", "4xminnowboard",
                         "--nodes", "1,4", "--ranks-per-node", "2", "--reps", "3"],
                        Path(tmp) / f"vs{r}")
            by_nodes = {row["nodes"]: row["time_median_s"] for row in rows}
            speedups.append(by_nodes[1] / by_nodes[4])
            print(f"  round {r + 1}: raytrace 512 on {boxes} boxes {raytrace[-1]:.2f} s; "
                  f"videostream 1 -> 4 boards x{speedups[-1]:.2f}")
            sys.stdout.flush()
    rt = statistics.median(raytrace)
    sp = statistics.median(speedups)
    print(f"raytrace 512 on {boxes} emulated set-top boxes: {rt:.2f} s median [{min(raytrace):.2f}, "
          f"{max(raytrace):.2f}] against seed 002's {SEED002_512_ON_8_S} s: {rt / SEED002_512_ON_8_S:.3f} "
          f"(target 0.85..1.15)")
    print(f"videostream speed-up 1 -> 4 emulated MinnowBoards: x{sp:.2f} median [{min(speedups):.2f}, "
          f"{max(speedups):.2f}] against x{reference_speedup:.2f} on the profiles' host: "
          f"{sp / reference_speedup:.3f} (target 0.95..1.05)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calibrations", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--boxes", type=int, default=8)
    p.add_argument("--reference-speedup", type=float, default=REFERENCE_SPEEDUP)
    p.add_argument("--only", choices=("calibration", "across"), default=None)
    args = p.parse_args()
    if args.only != "across":
        calibration(args.calibrations)
    if args.only != "calibration":
        across_hosts(args.rounds, args.boxes, args.reference_speedup)
    return 0


if __name__ == "__main__":
    run_main(main)
