"""A quick MPBench node-count sweep over 1-4 emulated MinnowBoards (target <= 3 minutes).

Uses the sweep API the bench driver uses (cluster.open / parse_nodes / job)
and shoal-bench directly, one short point per test and node count. The
reference measured in the same run is the same sweep with all ranks on this
machine (no emulation). Run as root: .venv/bin/python benchmarks/cluster_sweep.py
"""

from __future__ import annotations

import subprocess
import time

from shoal import cluster
from shoal.mpi import build, discover
from shoal.mpi.launch import Job

TESTS = ["mpbench.latency:8", "mpbench.roundtrip:8", "mpbench.bandwidth:65536",
         "mpbench.bibw:65536", "mpbench.bcast:65536", "mpbench.reduce:65536",
         "mpbench.allreduce:65536", "mpbench.alltoall:8192"]
mpi = discover.resolve("mpich")
exe = str(build.build("bench", mpi))


def sweep(emulate: str | None) -> tuple[float, int]:
    start, points = time.perf_counter(), 0
    with cluster.open(emulate=emulate, calibrate=True) as c:
        for k in cluster.parse_nodes("1..4"):
            # Local reference: the same ranks, all on this machine.
            job = c.job(mpi, nodes=k, ranks_per_node=1, argv=[exe]) if emulate else Job(mpi, k, [exe])
            job.argv = [exe, "--points", ",".join(t for t in TESTS if k > 1 or "latency" not in t
                                                  and "roundtrip" not in t and "bandwidth" not in t and "bibw" not in t),
                        "--budget", "0.5"]
            argv, env = job.command()
            proc = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise SystemExit(f"sweep failed at {k} nodes: {proc.stderr.strip()[-400:]}")
            points += proc.stdout.count('"point"')
    return time.perf_counter() - start, points


local, local_points = sweep(None)
emulated, emulated_points = sweep("4xminnowboard")
print(f"local sweep {local:.1f} s ({local_points} point records); emulated 1-4 MinnowBoards "
      f"{emulated:.1f} s ({emulated_points} point records); ratio {emulated / local:.2f}; "
      f"target 180 s: {'met' if emulated <= 180 else 'MISSED'}")
