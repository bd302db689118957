"""003's Full pattern (message-heavy S-DSM writes): throughput per wait mode.

Rank 0 serves writes from two clients (Probe + Recv on MPI_ANY_SOURCE);
every write is a request and an acknowledgement. Target: backoff and auto
keep >= 98% of busy's throughput (median of per-round ratios).
"""

from wait_common import interleaved, median, mpis, parser, verdict

MODES = ["busy", "backoff", "auto"]


def main() -> None:
    p = parser(__doc__, rounds=5)
    p.add_argument("--writes", type=int, default=40000)
    args = p.parse_args()
    for mpi in mpis(args.mpi):
        runs = interleaved(mpi, MODES, args.rounds, 3, ["full", "--writes", str(args.writes)])
        rate = {m: [d["messages"] / d["wall_s"] for d in runs[m]] for m in MODES}
        cpu = {m: [sum(d["cpu_s"]) for d in runs[m]] for m in MODES}
        print(f"{mpi.name}: Full pattern, 3 ranks, {args.writes} writes per client, "
              f"{args.rounds} alternating rounds")
        for mode in MODES:
            r = median([a / b for a, b in zip(rate[mode], rate["busy"])])
            target = f"  target >= 0.98: {verdict(r >= 0.98)}" if mode != "busy" else ""
            print(f"  {mode:8s} {median(rate[mode]):10.0f} msg/s  ratio to busy {r:6.3f}  "
                  f"CPU of all ranks {median(cpu[mode]):6.3f} s{target}")


if __name__ == "__main__":
    main()
