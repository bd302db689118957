"""Who talks to whom in Hough and Videostream on the S-DSM (seed 003's Fig. 8).

Runs each program on 7 ranks (Hough: 2 servers, I/O, 4 tasks; Videostream: a
server, input, output, 4 tasks, as in the seed) under one wait mode, for each
MPI and round, and prints per run: messages and bytes in all, the bytes between
kinds of rank (server to server, client to server, server to client, client to
client: the seed's four types of communication), the share of bytes with a
server at one end (the server-centred pattern), and whether every rank's row sum
equals what libshoalsdsm counted for it. With --out DIR each run's table and
heatmap are kept there (DIR/<app>-<mpi>-<round>/traffic.*).

Seed 003 (Fig. 8, §5): Hough about 1 688 000 messages per run, Videostream about
52 000 (33 times fewer) carrying about 50 times more data; no client-to-client
traffic in either.
"""

from __future__ import annotations

from pathlib import Path

from wait_common import median, mpis, parser

from entry import run_main
from shoal.dsm import apps
from shoal.wait import traffic

PROGRAMS = {
    "hough": ["--sample", "0"],
    "video": ["--sample", "0"],
}


def mb(n: int) -> str:
    """Bytes as the seed's figure gives them (MB)."""
    return f"{n / 1e6:.2f} MB"


def blocks(result, table) -> dict[str, int]:
    """Point-to-point bytes between kinds of rank (server, client)."""
    kind = {r["rank"]: "server" if r["role"] == "server" else "client" for r in result.ranks}
    out = {f"{a}->{b}": 0 for a in ("server", "client") for b in ("server", "client")}
    for row in table:
        if row["kind"] == "p2p":
            out[f"{kind[row['src']]}->{kind[row['dst']]}"] += row["bytes"]
    return out


def main() -> int:
    p = parser(__doc__, rounds=2)
    p.add_argument("--mode", default="backoff")
    p.add_argument("--hough", default="", help="extra program options for Hough, e.g. '--size 128'")
    p.add_argument("--video", default="--frames 24", help="extra program options for Videostream")
    p.add_argument("--out", default=None, help="keep each run's traffic table and heatmap here")
    args = p.parse_args()
    extra = {"hough": args.hough.split(), "video": args.video.split()}
    for mpi in mpis(args.mpi):
        totals: dict[str, list[tuple[int, int]]] = {a: [] for a in PROGRAMS}
        for rnd in range(args.rounds):
            for app, base in PROGRAMS.items():
                result = apps.run(mpi, app, [*base, *extra[app]], 7, args.mode)
                table = result.traffic()
                p2p = [r for r in table if r["kind"] == "p2p"]
                msgs = sum(r["messages"] for r in p2p)
                size = sum(r["bytes"] for r in p2p)
                totals[app].append((msgs, size))
                sent = traffic.sent(table, ("p2p",))
                exact = all(sent.get(r["rank"], 0) == r["bytes_sent"] for r in result.ranks)
                by = blocks(result, table)
                central = 1 - by["client->client"] / size if size else 0.0
                coll = sum(r["bytes"] for r in table if r["kind"] == "coll")
                print(f"{mpi.name} {app} round {rnd + 1}: {msgs} messages, {mb(size)} "
                      f"point-to-point (+{mb(coll)} in collectives); "
                      + ", ".join(f"{k} {mb(v)}" for k, v in by.items())
                      + f"; server at one end: {100 * central:.1f} % of bytes; "
                      f"row sums = the ranks' own counters: {'yes' if exact else 'NO'}")
                if args.out:
                    where = Path(args.out) / f"{app}-{mpi.kind}-{rnd + 1}"
                    where.mkdir(parents=True, exist_ok=True)
                    roles = ", ".join(f"{r['rank']} {r['role']}" for r in result.ranks)
                    traffic.write(where, table, len(result.ranks),
                                  f"{app} under {args.mode}, {mpi.name}: ranks {roles}")
        h = [m for m, _ in totals["hough"]]
        v = [m for m, _ in totals["video"]]
        hb = [b for _, b in totals["hough"]]
        vb = [b for _, b in totals["video"]]
        print(f"{mpi.name}: Hough/Videostream messages {median(h) / median(v):.1f}x "
              f"(seed 33x); Videostream/Hough bytes {median(vb) / median(hb):.1f}x (seed ~50x); "
              f"medians over {args.rounds} rounds: Hough {median(h):.0f} messages "
              f"[{min(h)}, {max(h)}], Videostream {median(v):.0f} [{min(v)}, {max(v)}]")
    return 0


if __name__ == "__main__":
    run_main(main)
