"""A receiver waiting with nothing arriving: CPU load per wait mode.

Target: backoff and auto use <= 1% of a core; busy (the MPI's own spinning,
the reference) uses about 100%. Rank 1 blocks in MPI_Recv for --seconds;
its CPU time comes from getrusage around the call.
"""

from wait_common import interleaved, median, mpis, parser, verdict

MODES = ["busy", "backoff", "auto", "linear:1,1000,1", "sleep:100"]


def main() -> None:
    p = parser(__doc__, rounds=3)
    p.add_argument("--seconds", type=float, default=2.0)
    args = p.parse_args()
    for mpi in mpis(args.mpi):
        runs = interleaved(mpi, MODES, args.rounds, 2, ["idle", "--seconds", str(args.seconds)])
        loads = {m: [d["load"] for d in runs[m]] for m in MODES}
        busy = median(loads["busy"])
        print(f"{mpi.name}: idle receiver CPU load over {args.seconds:g} s, "
              f"median of {args.rounds} rounds")
        for mode in MODES:
            load = median(loads[mode])
            target = f"  target <= 1%: {verdict(load <= 0.01)}" if mode in ("backoff", "auto") else ""
            print(f"  {mode:16s} {100 * load:7.3f} %   ratio to busy {load / busy:8.4f}{target}")


if __name__ == "__main__":
    main()
