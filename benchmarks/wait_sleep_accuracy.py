"""Experiment C's sleep lateness beside cyclictest (rt-tests) on this host, same run.

Each round, idle then loaded (one spinning thread per CPU this process may use):
shoal-sleepsweep sleeps 0 and 1 ms, COUNT times each, at the kernel's default timer
slack (what cyclictest, under SCHED_OTHER, runs at too), then cyclictest measures
about COUNT cycles at its 1 ms interval. Printed per load: the medians over rounds
(and their spread) of shoal's lateness at 0 and at 1 ms, cyclictest's, and the
ratios shoal / cyclictest for p50 and p99. Target: shoal's lateness at its smallest
sleep within 10 % of cyclictest's median and p99.

cyclictest needs root or an RLIMIT_RTPRIO of 1 or more; without, only shoal's side
is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from shoal.mpi import build  # noqa: E402
from shoal.wait import cyclictest, sleepaccuracy  # noqa: E402
from shoal.wait.sleepaccuracy import Condition, Sweep  # noqa: E402

KEYS = (("shoal at 0", "offset_zero_s", "offset_zero_p99_s"),
        ("shoal at 1 ms", "lateness_longest_p50_s", "lateness_longest_p99_s"),
        ("cyclictest 1 ms", "cyclictest_p50_s", "cyclictest_p99_s"))


def one_round(exe: str, place, count: int, load: str) -> dict[str, float]:
    condition = Condition(load, "default")
    _, requested, measured = sleepaccuracy.measure(place, Sweep(1e-3, 1e-3, count), condition, exe)
    row = sleepaccuracy.summarize(requested, measured)
    if cyclictest.unavailable() is None:
        argv = cyclictest.argv(count * 1e-3)
        if load == "loaded":
            argv = sleepaccuracy.beside_spinners(exe, place.cores, argv)
        samples = cyclictest.latencies(place.run(argv, 120).stdout)
        got = cyclictest.summary(samples)
        row["cyclictest_p50_s"], row["cyclictest_p99_s"] = got["lateness_longest_p50_s"], got["lateness_longest_p99_s"]
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--count", type=int, default=2000, help="measures per sleep length and round")
    args = p.parse_args()
    exe = str(build.build_host("sleepsweep"))
    place = sleepaccuracy.host_place()
    print(f"host: {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}, "
          f"{place.cores} CPUs; load average before: {os.getloadavg()}")
    why_not = cyclictest.unavailable()
    if why_not:
        print(f"cyclictest: {why_not}")
    rounds: dict[str, list[dict]] = {"idle": [], "loaded": []}
    for _ in range(args.rounds):
        for load in rounds:
            rounds[load].append(one_round(exe, place, args.count, load))
    print(f"load average after: {os.getloadavg()}")
    ok = True
    for load, rows in rounds.items():
        print(f"\n{load} ({args.rounds} rounds, {args.count} measures each; median over rounds, spread = "
              f"(max-min)/median)")
        medians = {}
        for label, p50, p99 in KEYS:
            if p50 not in rows[0]:
                continue
            for q, key in (("p50", p50), ("p99", p99)):
                values = [r[key] for r in rows]
                medians[(label, q)] = statistics.median(values)
                spread = (max(values) - min(values)) / medians[(label, q)]
                print(f"  {label:16s} {q}: {1e6 * medians[(label, q)]:9.1f} µs  spread {100 * spread:5.1f} %  "
                      f"rounds {', '.join(f'{1e6 * v:.1f}' for v in values)}")
        if why_not:
            continue
        for label in ("shoal at 0", "shoal at 1 ms"):
            ratios = {q: medians[(label, q)] / medians[("cyclictest 1 ms", q)] for q in ("p50", "p99")}
            within = all(abs(r - 1) <= 0.10 for r in ratios.values())
            if label == "shoal at 0":
                ok &= within
            print(f"  ratio {label} / cyclictest: p50 {ratios['p50']:.3f}, p99 {ratios['p99']:.3f}"
                  f"{'  (within 10 %)' if within else ''}")
    print(f"\ntarget (shoal at its smallest sleep within 10 % of cyclictest, p50 and p99): "
          f"{'PASS' if ok and not why_not else 'FAIL' if not why_not else 'not measured'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
