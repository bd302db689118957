"""CPU the link forwarder costs: MPI streams through 100 Mbit/s and Gigabit links.

Two emulated NUCs at D = 1 stream with shoal-pairs (1 MiB messages, 8 in
flight) while the forwarder's CPU time is read from /proc; the reference is
one host core over the same wall time. Prints CPU % of a core and the
goodput reached / the link's payload rate. Target: below 5 % of a core at
100 Mbit/s. Interleaved rounds, median and range.
Run as root: .venv/bin/python benchmarks/linkemu_cpu.py [--rounds 3] [--mpi mpich]
"""

from __future__ import annotations

import argparse
import statistics
import time

from entry import run_main

from shoal import cluster
from shoal.cluster import linkemu, linkmodel, matrix, profiles, state
from shoal.mpi import discover

LINKS = (("ethernet-100m", 64 << 20), ("gigabit", 512 << 20))


def one(mpi, link: str, total_B: int) -> tuple[float, float, float]:
    with cluster.open(emulate="2xnuc", link=link, calibrate=False, dilation=1) as c:
        entry = state.read(c.emulated.id)["forwarder"]
        cpu0, t0 = linkemu.cpu_seconds(entry["pid"]), time.monotonic()
        row = matrix.measure(c, mpi, bw_total_B=total_B, lat_iters=5)[0]
        cpu1, t1 = linkemu.cpu_seconds(entry["pid"]), time.monotonic()
        model = linkmodel.path(c.inventory.nodes[0].link).stream_Bps()
    # The stream's own time: bytes over bandwidth; the forwarder's CPU over the whole job.
    return (cpu1 - cpu0) / (t1 - t0), row["bandwidth_Bps"] / model, (cpu1 - cpu0) / row["bw_bytes"] * 1e9


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--mpi", default="mpich")
    args = p.parse_args()
    mpi = discover.resolve(args.mpi)
    seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in LINKS}
    for i in range(args.rounds):
        for name, total in LINKS:
            seen[name].append(one(mpi, name, total))
            share, ratio, ns = seen[name][-1]
            print(f"round {i + 1} {name}: forwarder {share:.1%} of a core, goodput/model {ratio:.3f}, "
                  f"{ns:.1f} ns of CPU per byte", flush=True)
    for name, _ in LINKS:
        shares = [s for s, _, _ in seen[name]]
        ratios = [r for _, r, _ in seen[name]]
        # While a stream fills the link: CPU per byte times the link's payload rate.
        rate = linkmodel.path(profiles.load_links()[name]).stream_Bps()
        busy = sorted(ns * 1e-9 * rate for _, _, ns in seen[name])
        verdict = "" if name != "ethernet-100m" else (
            " (target < 5%: " + ("met)" if statistics.median(busy) < 0.05 else "MISSED)"))
        print(f"{name}: forwarder CPU over the whole job median {statistics.median(shares):.1%} of a "
              f"core (range {min(shares):.1%}-{max(shares):.1%}); while the link is full "
              f"{statistics.median(busy):.1%} (range {busy[0]:.1%}-{busy[-1]:.1%}); goodput/model "
              f"median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}){verdict}")
    return 0


if __name__ == "__main__":
    run_main(main)
