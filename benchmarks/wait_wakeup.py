"""Added wake-up delay at p99 when messages come >= 1 ms apart.

The sender stamps each message with CLOCK_MONOTONIC just before MPI_Send;
the receiver's reaction time is its receive's return minus that stamp. The
added delay of a mode is its p99 reaction time minus busy's p99 in the same
round. Target: backoff <= 60 us; 003's linear setting (1 ns steps to 1 us)
and a static 100 us sleep are the references to beat. CPU load of the
receiver is printed beside it.
"""

import numpy as np

from wait_common import median, mpis, parser, run, verdict

MODES = ["busy", "backoff", "auto", "linear:1,1000,1", "sleep:100"]
GAPS = [float(g) for g in __import__("os").environ.get("WAIT_GAPS", "0.001,0.002,0.005").split(",")]


def main() -> None:
    p = parser(__doc__, rounds=3)
    p.add_argument("--count", type=int, default=200)
    args = p.parse_args()
    for mpi in mpis(args.mpi):
        print(f"{mpi.name}: p99 reaction time at fixed gaps, {args.rounds} alternating rounds")
        for gap in GAPS:
            p99 = {m: [] for m in MODES}
            p50 = {m: [] for m in MODES}
            load = {m: [] for m in MODES}
            for _ in range(args.rounds):
                for mode in MODES:
                    data = run(mpi, mode, 2, ["gaps", "--fixed", str(gap), "--count",
                                              str(args.count), "--size", "8"])
                    reaction = np.asarray(data["reaction_s"][10:])   # skip learning
                    p99[mode].append(float(np.percentile(reaction, 99)))
                    p50[mode].append(float(np.percentile(reaction, 50)))
                    load[mode].append(data["cpu_s"] / data["wall_s"])
            print(f"  gap {gap * 1e3:g} ms")
            for mode in MODES:
                added = median([a - b for a, b in zip(p99[mode], p99["busy"])])
                target = f"  target <= 60 us: {verdict(added <= 60e-6)}" if mode == "backoff" else ""
                added50 = median([a - b for a, b in zip(p50[mode], p50["busy"])])
                print(f"    {mode:16s} p99 {median(p99[mode]) * 1e6:9.1f} us  added "
                      f"{added * 1e6:9.1f} us  (p50 {median(p50[mode]) * 1e6:7.1f} us, added "
                      f"{added50 * 1e6:7.1f} us)  CPU {100 * median(load[mode]):6.2f} %{target}")


if __name__ == "__main__":
    main()
