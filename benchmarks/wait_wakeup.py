"""Added wake-up delay at p99 when messages come >= 1 ms apart.

The sender stamps each message with CLOCK_MONOTONIC just before MPI_Send;
the receiver's reaction time is its receive's return minus that stamp. The
p99 of a mode is taken over every message of all its rounds (pooled: one
slow moment of the machine moves a per-run p99 of 190 messages, it moves a
pooled one far less); the added delay is that p99 minus busy's pooled p99.
Modes alternate run by run. Target: backoff and auto <= 60 us; 003's
linear setting (1 ns steps to 1 us) and a static 100 us sleep are the
references to beat. CPU load of the receiver is printed beside it.

The floor: how late this machine's kernel ends a clock_nanosleep (timer
slack 1 ns), measured here in the same run. A waiter that sleeps can only
beat that tail by waking early, which costs CPU. The control: busy's own
per-run p99, from its lowest to its highest run. A receiver that never
sleeps still has a tail (a rank descheduled between the sender's stamp and
the receive's return); where that range is wider than the target, the
added p99 of a mode is a difference of two tails this machine decides.
"""

from __future__ import annotations

import os

import numpy as np

from wait_common import median, mpis, parser, run, sleep_lateness, verdict

MODES = ["busy", "backoff", "auto", "linear:1,1000,1", "sleep:100"]
GAPS = [float(g) for g in os.environ.get("WAIT_GAPS", "0.001,0.002,0.005").split(",")]
SKIP = 10   # the first messages teach the learned modes the pattern


def main() -> None:
    p = parser(__doc__, rounds=5)
    p.add_argument("--count", type=int, default=200, help="messages per run")
    args = p.parse_args()
    for mpi in mpis(args.mpi):
        print(f"{mpi.name}: reaction time at fixed gaps, {args.rounds} alternating rounds of "
              f"{args.count} messages, p99 pooled over rounds")
        for gap in GAPS:
            reactions: dict[str, list[float]] = {m: [] for m in MODES}
            per_run: dict[str, list[float]] = {m: [] for m in MODES}
            load: dict[str, list[float]] = {m: [] for m in MODES}
            for _ in range(args.rounds):
                for mode in MODES:
                    data = run(mpi, mode, 2, ["gaps", "--fixed", str(gap), "--count",
                                              str(args.count), "--size", "8"])
                    reaction = data["reaction_s"][SKIP:]
                    reactions[mode] += reaction
                    per_run[mode].append(float(np.percentile(reaction, 99)))
                    load[mode].append(data["cpu_s"] / data["wall_s"])
            floor = sleep_lateness(gap * 0.9, max(200, args.count))
            busy99, busy50 = (float(np.percentile(reactions["busy"], q)) for q in (99, 50))
            print(f"  gap {gap * 1e3:g} ms (this kernel ends a {gap * 0.9e3:g} ms sleep late by "
                  f"p50 {np.percentile(floor, 50) * 1e6:.0f} us, p99 "
                  f"{np.percentile(floor, 99) * 1e6:.0f} us)")
            # The control: a receiver that never sleeps has a tail of its own
            # (the sender or receiver descheduled between stamp and receive).
            print(f"    (busy against itself: per-run p99 from {min(per_run['busy']) * 1e6:.0f} "
                  f"to {max(per_run['busy']) * 1e6:.0f} us)")
            for mode in MODES:
                p99 = float(np.percentile(reactions[mode], 99))
                p50 = float(np.percentile(reactions[mode], 50))
                added = p99 - busy99
                added50 = p50 - busy50
                target = (f"  target <= 60 us: {verdict(added <= 60e-6)}"
                          if mode in ("backoff", "auto") else "")
                print(f"    {mode:16s} p99 {p99 * 1e6:8.1f} us  added {added * 1e6:8.1f} us  "
                      f"(median of per-run p99 {median(per_run[mode]) * 1e6:7.1f} us; p50 "
                      f"{p50 * 1e6:6.1f} us, added {added50 * 1e6:6.1f} us)  CPU "
                      f"{100 * median(load[mode]):6.2f} %{target}")


if __name__ == "__main__":
    main()
