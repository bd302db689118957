"""What `shoal wait calibrate` buys against libshoalwait's fixed defaults, per MPI.

In the same run: this host is calibrated (shoal.wait.calibrate, stored as the command
stores it), then each mode that takes calibrated parameters (linear, backoff, auto)
runs with the fixed defaults (SHOAL_WAIT_CALIBRATION=off) and with the calibration,
beside busy (the MPI's own spinning, the reference), alternating round by round:

idle CPU      one 8-byte message every 0.5 s (8 messages): the receiver's CPU load.
              Target: calibrated no worse than the defaults by more than 1 point
              (0.01 of a core).
reaction      Experiment D at the seed's schedule (gaps x1.05 from 1 ns to ~130 ms):
              per message, the time between two receptions (Fig. 5's measure) over
              busy's for the same message; median over the gaps that exceed busy's
              burst delivery time (the median time between receptions while gaps
              are under 10 us), over those under 1 ms (where a sleep's floor
              matters) and over gaps of 1 ms and more. Target: within 10 % of busy
              (ratio <= 1.10) once the gaps exceed the delivery time.
              Beside it the one-way reaction (receive return - send time, one clock)
              at gaps of 1 ms and more, in µs: under Open MPI a 1 KiB MPI_Send
              returns only once the receiver has taken the message (the sender's
              next gap starts after the receiver's lateness, which the time between
              receptions then holds whole), under MPICH at once (consecutive
              latenesses cancel in it); the one-way reaction reads alike in both.

Prints each ratio per round, the median and spread of the rounds, and the load average.
"""

from __future__ import annotations

import os

from wait_common import median, mpis, parser, verdict

from entry import run_main
from shoal import environment
from shoal.wait import calibrate, lab

MODES = ("linear", "backoff", "auto")
IDLE_ARGS = ["gaps", "--fixed", "0.5", "--count", "8", "--size", "8"]


def one(mpi, mode: str, calibrated: bool, args: list[str]) -> dict:
    """One run of shoal-waittest in ``mode``, with the calibration or the fixed defaults."""
    os.environ[environment.WAIT_CALIBRATION.name] = "use" if calibrated else "off"
    data, _, _ = lab.run_program(mpi, lab.Contender(mode, None if mode == "busy" else mode), 2, args)
    return data


def between(data: dict) -> list[float]:
    back = data["recv_s"]
    return [back[i] - back[i - 1] for i in range(1, len(back))]   # [i-1]: before message i


def reaction_ratios(data: dict, busy: dict) -> dict[str, float]:
    """Median over messages of (time between receptions) / busy's, past the delivery time
    and at gaps of 1 ms and more."""
    gap = data["gap_s"]
    mine, ref = between(data), between(busy)
    delivery = median([ref[i - 1] for i in range(1, len(gap)) if gap[i] < 10e-6])
    past = [mine[i - 1] / ref[i - 1] for i in range(1, len(gap)) if gap[i] > delivery]
    short = [mine[i - 1] / ref[i - 1] for i in range(1, len(gap)) if delivery < gap[i] < 1e-3]
    sparse = [mine[i - 1] / ref[i - 1] for i in range(1, len(gap)) if gap[i] >= 1e-3]
    one_way = [data["reaction_s"][i] for i in range(1, len(gap)) if gap[i] >= 1e-3]
    return {"past_delivery": median(past), "short": median(short), "sparse": median(sparse),
            "delivery_s": delivery, "one_way_s": median(one_way)}


def spread(values: list[float]) -> str:
    return f"{median(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def main() -> int:
    p = parser(__doc__, rounds=2)
    args = p.parse_args()
    print(f"load average before: {os.getloadavg()}")
    cal = calibrate.host()
    print(f"calibration: {cal.label()}: slack {cal.slack_ns} ns (0: the kernel's), floor "
          f"{cal.floor_ns / 1e3:.1f} µs, {cal.linear} (floor at the kernel's slack "
          f"{cal.floor_default_slack_s * 1e6:.1f} µs, at 1 ns {cal.floor_slack_1ns_s * 1e6:.1f} µs)")
    _, d_args = lab.scenario("D", quick=False)
    for mpi in mpis(args.mpi):
        idle: dict[tuple[str, bool], list[float]] = {}
        react: dict[tuple[str, bool], list[dict]] = {}
        busy_one_way: list[float] = []
        for r in range(args.rounds):
            busy_d = one(mpi, "busy", False, d_args)
            busy_one_way.append(1e6 * reaction_ratios(busy_d, busy_d)["one_way_s"])
            busy_idle = one(mpi, "busy", False, IDLE_ARGS)
            idle.setdefault(("busy", False), []).append(busy_idle["cpu_s"] / busy_idle["wall_s"])
            for mode in MODES:
                for calibrated in (False, True):
                    data = one(mpi, mode, calibrated, IDLE_ARGS)
                    idle.setdefault((mode, calibrated), []).append(data["cpu_s"] / data["wall_s"])
                    react.setdefault((mode, calibrated), []).append(
                        reaction_ratios(one(mpi, mode, calibrated, d_args), busy_d))
            print(f"  {mpi.name} round {r + 1} done, load average {os.getloadavg()}")
        print(f"{mpi.name}: {args.rounds} rounds, median [min, max] of the rounds")
        print(f"  busy: receiver CPU at 0.5 s gaps {100 * median(idle[('busy', False)]):.1f} %, one-way "
              f"reaction at gaps >= 1 ms {spread(busy_one_way)} µs")
        print(f"  {'mode':8s} {'parameters':11s} {'CPU % at 0.5 s gaps':>24s} "
              f"{'between/busy past delivery':>28s} {'... gaps < 1 ms':>24s} {'... gaps >= 1 ms':>24s} "
              f"{'one-way µs, gaps >= 1 ms':>26s}")
        for mode in MODES:
            for calibrated in (False, True):
                key = (mode, calibrated)
                cpu = [100 * x for x in idle[key]]
                past = [x["past_delivery"] for x in react[key]]
                short = [x["short"] for x in react[key]]
                sparse = [x["sparse"] for x in react[key]]
                one_way = [1e6 * x["one_way_s"] for x in react[key]]
                print(f"  {mode:8s} {'calibrated' if calibrated else 'defaults':11s} "
                      f"{median(cpu):7.3f} [{min(cpu):.3f}, {max(cpu):.3f}]  {spread(past):>28s} "
                      f"{spread(short):>24s} {spread(sparse):>24s} {spread(one_way):>26s}")
            worse = median(idle[(mode, True)]) - median(idle[(mode, False)])
            ratio = median([x["past_delivery"] for x in react[(mode, True)]])
            print(f"  {mode}: CPU calibrated - defaults {100 * worse:+.3f} points, target <= +1: "
                  f"{verdict(worse <= 0.01)}; reaction within 10 % of busy past delivery: "
                  f"{verdict(ratio <= 1.10)}")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    run_main(main)
