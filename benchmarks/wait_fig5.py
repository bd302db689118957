"""Experiment D beside seed 003's Fig. 5: burst delivery, reaction time, activation.

The seed's sender sends 384 messages of 1024 B, sleeping t before each, t growing
x1.05 from 1 ns to ~130 ms; its receiver measures the time between two
receptions. waitlab's D does the same (shoal-waittest gaps), and the receiver also
keeps when each receive returned and the process CPU it used. From those, per run:

burst delivery   median time between two receptions while t < 10 us (the seed's
                 iterations 1-180): about 52 us in the seed, both modes
reaction         median of (time between two receptions - t) while 1 ms <= t <= 54 ms
                 (the seed's iterations 280-365): about 200 us in the seed, both modes;
                 beside it the one-way reaction (receive return - send time) the
                 receiver measures on one clock
activation       the first iteration from which the receiving thread went to sleep
                 inside the receive for 10 messages in a row (voluntary context
                 switches, which a busy machine's preemptions and sched_yield are not):
                 where micro-sleeping takes over (the seed: iteration ~220, t ~ 40 us,
                 within 180-280); never for a spinning receiver

Contenders alternate round by round: busy (Aggressive), the MPI's Degraded knob
without the library, seed003 (Adaptive Aggressive: linear:0,1000,1 under the kernel's
timer slack) and degraded+seed003 (Adaptive Degraded), each with two senders:
waitlab's, whose sleeps end in a short spin so each gap is what was asked, and the
seed's (--nanosleep 1: one clock_nanosleep per gap under the kernel's timer slack,
whose floor of about 50 us then paces the "burst").
"""

from __future__ import annotations

import os

from wait_common import median, mpis, parser

from entry import run_main
from shoal.wait import lab

SEED = {"burst_delivery_s": 52e-6, "reaction_s": 200e-6, "activation_i": 220}
CONTENDERS = ("busy", "degraded", "seed003", "degraded+seed003")


def contender(label: str, mpi) -> lab.Contender:
    if label == "degraded":   # the MPI's own knob, no library
        return lab.Contender(label, None, lab.degraded_env(mpi))
    return lab.contender_for(label, mpi)


def quantities(data: dict) -> dict[str, float | int | None]:
    gap, back, slept, one_way = data["gap_s"], data["recv_s"], data["recv_sleeps"], data["reaction_s"]
    between = [back[i] - back[i - 1] for i in range(1, len(back))]   # between[i-1]: before i
    burst = [between[i - 1] for i in range(1, len(gap)) if gap[i] < 10e-6]
    sparse = [i for i in range(1, len(gap)) if 1e-3 <= gap[i] <= 54e-3]
    activation = next((i for i in range(1, len(gap) - 9) if all(slept[i:i + 10])), None)
    return {"burst_delivery_s": median(burst) if burst else None,
            "reaction_s": median([between[i - 1] - gap[i] for i in sparse]) if sparse else None,
            "one_way_s": median([one_way[i] for i in sparse]) if sparse else None,
            "activation_i": activation,
            "activation_gap_s": gap[activation] if activation is not None else None,
            "cpu_load": data["cpu_s"] / data["wall_s"]}


def us(x) -> str:
    return "-" if x is None else f"{x * 1e6:.1f}"


def main() -> int:
    p = parser(__doc__, rounds=2)
    args = p.parse_args()
    _, d_args = lab.scenario("D", quick=False)
    senders = {"": d_args, " (seed's sender)": [*d_args, "--nanosleep", "1"]}
    print(f"load average before: {os.getloadavg()}")
    for mpi in mpis(args.mpi):
        got: dict[str, list[dict]] = {c + s: [] for s in senders for c in CONTENDERS}
        for _ in range(args.rounds):
            for sender, argv in senders.items():
                for label in CONTENDERS:
                    data, _, _ = lab.run_program(mpi, contender(label, mpi), 2, argv)
                    got[label + sender].append(quantities(data))
        print(f"{mpi.name}: Experiment D, {args.rounds} rounds (median [min, max] of the rounds)")
        print(f"  {'contender':34s} {'burst µs':>22s} {'reaction µs':>22s} {'one-way µs':>22s} "
              f"{'activation i (t µs)':>24s} {'CPU %':>6s}")
        for label, runs in got.items():
            def cell(key):
                vals = [r[key] for r in runs if r[key] is not None]
                if not vals:
                    return "never" if key == "activation_i" else "-"
                if key == "activation_i":
                    gaps = [r["activation_gap_s"] for r in runs if r[key] is not None]
                    return f"{median(vals):.0f} [{min(vals)}, {max(vals)}] ({us(median(gaps))})"
                return f"{us(median(vals))} [{us(min(vals))}, {us(max(vals))}]"
            load = median([r["cpu_load"] for r in runs])
            print(f"  {label:34s} {cell('burst_delivery_s'):>22s} {cell('reaction_s'):>22s} "
                  f"{cell('one_way_s'):>22s} {cell('activation_i'):>24s} {100 * load:6.1f}")
        print(f"  seed 003 (Open MPI 3, Core i5): burst ~{us(SEED['burst_delivery_s'])} µs, "
              f"reaction ~{us(SEED['reaction_s'])} µs, activation near iteration "
              f"{SEED['activation_i']} (t ~40 µs, within 180-280)")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    run_main(main)
