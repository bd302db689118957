"""Back-to-back 8-byte ping-pong latency per wait mode, against busy.

Target: backoff and auto within 3% of busy (ratio <= 1.03). Each run times
--chunks pieces and reports its quietest one (the machine is shared: other
work lands on some chunks); modes alternate round by round, each round's
ratio is taken against the busy run next to it, and the median ratio over
rounds is judged. 'none' is the program without the library at all.
"""

from wait_common import interleaved, median, mpis, parser, verdict

MODES = ["busy", "backoff", "auto", "none"]


def main() -> None:
    p = parser(__doc__, rounds=7)
    p.add_argument("--iters", type=int, default=20000)
    args = p.parse_args()
    for mpi in mpis(args.mpi):
        runs = interleaved(mpi, MODES, args.rounds, 2,
                           ["pingpong", "--iters", str(args.iters), "--size", "8"])
        lat = {m: [d["chunk_min_s"] for d in runs[m]] for m in MODES}
        print(f"{mpi.name}: 8 B ping-pong half round trip (quietest of 20 chunks per run), "
              f"{args.rounds} alternating rounds")
        for mode in MODES:
            ratios = [a / b for a, b in zip(lat[mode], lat["busy"])]
            r = median(ratios)
            target = f"  target <= 1.03: {verdict(r <= 1.03)}" if mode in ("backoff", "auto") else ""
            print(f"  {mode:8s} median {median(lat[mode]) * 1e6:7.3f} us  min "
                  f"{min(lat[mode]) * 1e6:7.3f} us  ratio to busy (median of rounds) {r:6.3f}"
                  f"  (of minima {min(lat[mode]) / min(lat['busy']):6.3f}){target}")


if __name__ == "__main__":
    main()
