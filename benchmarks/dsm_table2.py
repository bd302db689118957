"""Table 2's form: Videostream on the RECS placement, adaptive vs busy.

Seed 003 Table 2: Adaptive Aggressive vs Aggressive gives W -13.3%, FPS
+5.4%, FPS/W +21.6%. Here the run happens on this machine (7 ranks, each as
if it had a core of its own), or with --emulate on an emulated cluster of
the placement's devices (each device its CPU budget and shaped link, times
in device time); time and FPS are measured, and each device's power is
modelled from the time the ranks Table 1 places on it were awake (Core i7
10/30 W, Cortex-A15 3/7 W). Only ratios are compared. Targets: W <= -10%,
FPS >= -3%, FPS/W >= +10% (medians of per-round ratios; rounds alternate
the modes).
"""

import contextlib

from wait_common import median, mpis, parser, verdict

from entry import run_main
from shoal import cluster
from shoal.execute.session import Session
from shoal.dsm import apps, lab, placement

ADAPTIVE = "linear:0,1000,1"


def main() -> int:
    p = parser(__doc__, rounds=5)
    p.add_argument("--frames", type=int, default=24)
    p.add_argument("--thetas", type=int, default=900)
    p.add_argument("--modes", default=f"busy;{ADAPTIVE};backoff")
    p.add_argument("--emulate", default=None, metavar="SPEC",
                   help="an emulated cluster for the placement's devices, e.g. "
                        "2xcore-i7+4xcortex-a15")
    args = p.parse_args()
    modes = [m for m in args.modes.split(";") if m]
    sc = lab.Scenario("G", "video", 7, ("--frames", str(args.frames), "--thetas",
                                        str(args.thetas), "--sample", "0"), "video-recs")
    where = cluster.open(emulate=args.emulate) if args.emulate else None
    with where if where else contextlib.nullcontext():
        for mpi in mpis(args.mpi):
            table(args, sc, mpi, modes, where)
    return 0


def run_once(sc, mpi, mode, where):
    if where is None:
        return apps.run(mpi, "video", list(sc.args), 7, mode, own_cores=True)
    blocks = placement.on_nodes(placement.preset(sc.preset), 7, [n.name for n in where.nodes])
    return apps.run_on_cluster(Session(where), mpi, "video", list(sc.args), blocks, mode)


def table(args, sc, mpi, modes, where) -> None:
    rows = {m: [] for m in modes}
    for _ in range(args.rounds):
        for mode in modes:
            rows[mode].append(lab.measure(sc, run_once(sc, mpi, mode, where)))
    on = (f"emulated {args.emulate}, dilation {where.dilation:g}" if where else
          "this machine, a core per rank")
    print(f"{mpi.name}: Videostream on video-recs ({on}), {args.frames} frames, "
          f"{args.rounds} alternating rounds (time/FPS measured, W modelled)")
    print(f"  {'mode':16s} {'time s':>7s} {'FPS':>6s} {'W':>6s} {'kJ':>8s} {'FPS/W':>7s} "
          f"{'J/frame':>8s}")
    for mode in modes:
        med = {k: median([r[k] for r in rows[mode]]) for k in
               ("time_s", "fps", "power_W", "energy_J", "fps_per_W", "J_per_frame")}
        print(f"  {mode:16s} {med['time_s']:7.2f} {med['fps']:6.3f} {med['power_W']:6.2f} "
              f"{med['energy_J'] / 1e3:8.4f} {med['fps_per_W']:7.4f} {med['J_per_frame']:8.2f}")
    for mode in modes[1:]:
        print(f"  {mode} vs busy (median of per-round ratios [min, max]; seed in brackets):")
        for metric, name, ok in (("power_W", "W", lambda x: x <= -0.10),
                                 ("fps", "FPS", lambda x: x >= -0.03),
                                 ("fps_per_W", "FPS/W", lambda x: x >= 0.10)):
            rs = [a[metric] / b[metric] - 1 for a, b in zip(rows[mode], rows["busy"])]
            r = median(rs)
            print(f"    {name:6s} {100 * r:+6.1f}% [{100 * min(rs):+.1f}, {100 * max(rs):+.1f}] "
                  f"(seed {100 * lab.seed_ratio(metric):+.1f}%)  "
                  f"{'target: ' + verdict(ok(r)) if mode == ADAPTIVE else ''}")


if __name__ == "__main__":
    run_main(main)
