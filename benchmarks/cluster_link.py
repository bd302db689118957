"""Shaped-link accuracy: MPI streaming bandwidth between two emulated devices vs the configured rate.

For each link type, runs shoal-pairs (1 MiB messages, 8 in flight, 24 MiB)
with MPICH and Open MPI, and prints goodput / configured rate (target
within +-5%). The reference is the configured rate itself; Ethernet framing
(1500-byte MTU) alone costs about 4.4% (1448 payload bytes of 1514 on the wire).
Run as root: .venv/bin/python benchmarks/cluster_link.py
"""

from __future__ import annotations

import sys

from shoal import cluster
from shoal.cluster import matrix
from shoal.mpi import discover

kinds = sys.argv[1:] or ["mpich", "openmpi"]
for link, total in (("docsis-27m", 12 << 20), ("ethernet-100m", 48 << 20), ("gigabit", 256 << 20)):
    for kind in kinds:
        mpi = discover.resolve(kind)
        with cluster.open(emulate="2xnuc", link=link, calibrate=False) as c:
            rate = c.inventory.nodes[0].link.rate_bps
            row = matrix.measure(c, mpi, bw_total_B=total, lat_iters=50)[0]
        ratio = row["bandwidth_Bps"] * 8 / rate
        print(f"{link:14s} {mpi.name:16s} configured {rate / 1e6:7.1f} Mbit/s  measured "
              f"{row['bandwidth_Bps'] * 8 / 1e6:7.2f} Mbit/s  ratio {ratio:.3f}  "
              f"{'within 5%' if abs(ratio - 1) <= 0.05 else 'OUTSIDE 5%'}")
