"""Experiment E on libshoalsdsm: the server's CPU in quiet windows and Full's wall time.

1 server + 2 clients. Burst: bursts of writes separated by pauses; Lock: a
client holds the lock asleep while the other waits queued. The server's CPU
load is read from its CPU timeline over the windows where every client
pauses (Burst) or a client holds the lock (Lock). Full: back-to-back writes.
Targets (seed 003 §4 / issue 17): server CPU <= 5% in Burst and Lock quiet
windows under backoff (busy ~100%); Full under backoff <= 1.10x busy's wall
time (median of per-round ratios), under both MPIs. Rounds alternate modes.
"""

from wait_common import median, mpis, parser, verdict

from entry import run_main
from shoal.dsm import apps, lab

MODES = ["busy", "backoff"]


def spread(values) -> str:
    return f"[{min(values):.3f}, {max(values):.3f}]"


def main() -> int:
    p = parser(__doc__, rounds=5)
    p.add_argument("--writes", type=int, default=5000, help="Full: writes per client")
    args = p.parse_args()
    scen = {
        "full": ["--writes", str(args.writes), "--sample", "0"],
        "burst": ["--cycles", "4", "--writes", "500", "--pause", "0.5", "--sample", "0.02"],
        "lock": ["--cycles", "3", "--hold", "0.5", "--sample", "0.02"],
    }
    for mpi in mpis(args.mpi):
        wall = {m: [] for m in MODES}
        quiet = {(a, m): [] for a in ("burst", "lock") for m in MODES}
        for _ in range(args.rounds):
            for app_name, prog in scen.items():
                for mode in MODES:
                    res = apps.run(mpi, app_name, prog, 3, mode)
                    row = lab.measure(lab.Scenario("E", app_name, 3, tuple(prog)), res)
                    if app_name == "full":
                        wall[mode].append(row["wall_s"])
                    else:
                        quiet[(app_name, mode)].append(row["server_quiet_load"])
        print(f"{mpi.name}: Experiment E, 3 ranks, {args.rounds} alternating rounds")
        ratios = [b / a for a, b in zip(wall["busy"], wall["backoff"])]
        r = median(ratios)
        print(f"  Full wall s: busy {median(wall['busy']):.3f} {spread(wall['busy'])}, "
              f"backoff {median(wall['backoff']):.3f} {spread(wall['backoff'])}")
        print(f"  Full backoff/busy wall ratio {r:.3f} {spread(ratios)}  "
              f"target <= 1.10: {verdict(r <= 1.10)}")
        for app_name in ("burst", "lock"):
            b, k = quiet[(app_name, "busy")], quiet[(app_name, "backoff")]
            print(f"  {app_name:5s} server CPU in quiet windows: busy {100 * median(b):.1f}% "
                  f"[{100 * min(b):.1f}, {100 * max(b):.1f}], backoff {100 * median(k):.2f}% "
                  f"[{100 * min(k):.2f}, {100 * max(k):.2f}]  target <= 5%: "
                  f"{verdict(median(k) <= 0.05)}")
    return 0


if __name__ == "__main__":
    run_main(main)
