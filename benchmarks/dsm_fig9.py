"""Experiment F beside seed 003's Figs. 9 and 11, read from a `shoal dsm lab` run.

Run the lab first, e.g.

    shoal dsm lab --experiments F --quick --rounds 2 \\
        --modes "busy;degraded;seed003;degraded+seed003;sleep:0;sleep:100" --out RUN

then `benchmarks/dsm_fig9.py RUN` prints, per MPI:

orderings       each program's contenders by median run time, and whether the seed's
                readings of Fig. 9a hold: on Hough Aggressive (busy) is slower than
                Degraded, Adaptive Aggressive ahead of Adaptive Degraded, the static
                sleeps (sleep:0, sleep:100) slower than Adaptive Aggressive; on
                Videostream both adaptive modes ahead of Aggressive and behind Degraded
CPU per role    each kind of rank's CPU load (CPU time / wall time), median [min, max]
                over rounds and ranks of that kind (Fig. 9b-d: the seed's Adaptive
                Aggressive keeps the server and tasks busy and drops the I/O rank's)
decomposition   each kind of rank's time split into user code, S-DSM code, MPI wait
                (awake) and sleep, as shares of its wall time, under each adaptive
                contender (Figs. 9e, 9f: Adaptive Aggressive; Fig. 11: Adaptive Degraded)
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from entry import run_main  # noqa: E402
from shoal.errors import ShoalError  # noqa: E402
from shoal.runs.store import Run  # noqa: E402

AGGRESSIVE, DEGRADED = "busy", "degraded"
STATIC = ("sleep:0", "sleep:100")


def adaptive_pair(contenders: set[str]) -> tuple[str, str]:
    """(Adaptive Aggressive, Adaptive Degraded) among the lab's contenders."""
    for a in ("seed003", "linear:0,1000,1"):
        if a in contenders:
            return a, f"degraded+{a}"
    raise ShoalError("the run has no adaptive contender (seed003 or linear:0,1000,1)")


def spread(values: list[float]) -> str:
    return f"{100 * statistics.median(values):5.1f} [{100 * min(values):.1f}, {100 * max(values):.1f}]"


def check(name: str, holds: bool | None) -> str:
    return f"  {'-' if holds is None else 'holds' if holds else 'DOES NOT HOLD'}: {name}"


def orderings(app: str, wall: dict[str, float], a_agg: str, a_deg: str) -> list[str]:
    def faster(x, y):
        return wall[x] < wall[y] if x in wall and y in wall else None

    if app == "hough":
        out = [check("Aggressive slower than Degraded", faster(DEGRADED, AGGRESSIVE)),
               check("Adaptive Aggressive ahead of Adaptive Degraded", faster(a_agg, a_deg))]
        out += [check(f"{s} slower than Adaptive Aggressive", faster(a_agg, s)) for s in STATIC]
        return out
    return [check(f"{a} ahead of Aggressive", faster(a, AGGRESSIVE)) for a in (a_agg, a_deg)] + \
        [check(f"{a} behind Degraded", faster(DEGRADED, a)) for a in (a_agg, a_deg)]


def main() -> int:
    if len(sys.argv) != 2:
        raise ShoalError("usage: dsm_fig9.py RUN (a `shoal dsm lab --experiments F` run directory)")
    run = Run.open(sys.argv[1])
    results = [r for r in run.rows("results") if r["experiment"] == "F" and r["status"] == "ok"]
    split = [r for r in run.rows("split") if r["experiment"] == "F"]
    if not results:
        raise ShoalError(f"{sys.argv[1]} has no finished Experiment F runs")
    print(f"{run.path}: rounds {sorted({r['round'] for r in results})}; this host's load average "
          f"now {os.getloadavg()[0]:.1f} (the lab's own is not recorded: note it beside the lab)")
    for mpi in dict.fromkeys(r["mpi"] for r in results):
        for app in ("hough", "video"):
            mine = [r for r in results if r["mpi"] == mpi and r["app"] == app]
            if not mine:
                continue
            names = list(dict.fromkeys(r["contender"] for r in mine))
            a_agg, a_deg = adaptive_pair(set(names))
            wall = {c: statistics.median(float(r["wall_s"]) for r in mine if r["contender"] == c)
                    for c in names}
            spans = {c: [float(r["wall_s"]) for r in mine if r["contender"] == c] for c in names}
            print(f"\n{mpi}, {app}: contenders by median run time (s) [min, max]")
            for c in sorted(names, key=wall.get):
                print(f"  {c:22s} {wall[c]:8.3f} [{min(spans[c]):.3f}, {max(spans[c]):.3f}]")
            print("\n".join(orderings(app, wall, a_agg, a_deg)))
            ranks = [r for r in split if r["mpi"] == mpi and r["app"] == app]
            roles = list(dict.fromkeys(r["role"] for r in ranks))
            print("  CPU load per role, % median [min, max] over rounds and ranks:")
            print("  " + f"{'contender':22s}" + "".join(f"{role:>22s}" for role in roles))
            for c in names:
                cells = []
                for role in roles:
                    loads = [float(r["cpu_s"]) / float(r["wall_s"]) for r in ranks
                             if r["contender"] == c and r["role"] == role and float(r["wall_s"]) > 0]
                    cells.append(spread(loads) if loads else "-")
                print("  " + f"{c:22s}" + "".join(f"{x:>22s}" for x in cells))
            for c, figure in ((a_agg, "Fig. 9e/f, Adaptive Aggressive"),
                              (a_deg, "Fig. 11, Adaptive Degraded")):
                print(f"  time split per role under {c} ({figure}), % of wall time (medians): "
                      "user / S-DSM / MPI wait / sleep")
                for role in roles:
                    mine_r = [r for r in ranks if r["contender"] == c and r["role"] == role]
                    if not mine_r:
                        continue
                    parts = [statistics.median(float(r[k]) / float(r["wall_s"]) for r in mine_r)
                             for k in ("user_s", "sdsm_s", "mpi_wait_s", "sleep_s")]
                    print(f"    {role:8s} " + " / ".join(f"{100 * p:5.1f}" for p in parts))
    return 0


if __name__ == "__main__":
    run_main(main)
