"""Link fidelity: emulated ping-pong / link model and stream / link rate, per size, per link and MPI.

For each link (ethernet-100m, docsis-27m, wifi-n) and MPI (MPICH, Open MPI),
two emulated NUCs (a whole host core each, so no rank waits for its CPU
quota) run IMB PingPong and IMB Uniband over 64 B-4 MiB at D = 1 through
`shoal cluster fidelity`'s code. The references, computed in the same run,
are the link model's one-way time (cluster.linkmodel) and the payload rate
the link can carry. Targets: ping-pong within +-10 % at every size, the
smallest message's time (the one-way latency) within +-20 %, stream 0.93-1.0
from 64 KiB and never above 1.0. Points where the host ran short of CPU are
marked (the verdict of cluster.slack).
Run as root: .venv/bin/python benchmarks/cluster_fidelity.py [link ...] [--mpi mpich]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from entry import run_main

from shoal.bench import fidelity


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("links", nargs="*", default=["ethernet-100m", "docsis-27m", "wifi-n"])
    p.add_argument("--mpi", action="append", default=None)
    p.add_argument("--device", default="nuc")
    p.add_argument("--budget", type=float, default=1.0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="shoal-fidelity-"))
    worst: list[float] = []
    for link in args.links:
        for mpi in args.mpi or ["mpich", "openmpi"]:
            request = fidelity.FidelityRequest(link=link, device=args.device, mpi=mpi,
                                               dilations=(1.0,), budget_s=args.budget,
                                               out=out / f"{link}-{mpi}")
            result = fidelity.measure(request, ["benchmarks/cluster_fidelity.py"])
            run = result["runs"][0]
            print(f"\n{link} {run['mpi']} (2x{args.device}, D=1): {run['run']}")
            for row in run["rows"]:
                if row["kind"] == "ping-pong":
                    ok = abs(row["ratio"] - 1) <= 0.10
                    lo, hi = row["spread"]
                    print(f"  ping-pong {row['size_B']:>8d} B  {row['measured'] * 1e6:11.1f} us  model "
                          f"{row['model'] * 1e6:11.1f} us  ratio {row['ratio']:.3f} "
                          f"(CI {lo:.3f}-{hi:.3f}) {'ok' if ok else 'OUTSIDE 10%'} "
                          f"{'[host short: ' + row['host_slack_note'] + ']' if row['host_slack'] == 'short' else ''}")
                    worst.append(abs(row["ratio"] - 1))
                else:
                    big = row["size_B"] >= 64 * 1024
                    ok = row["ratio"] <= 1.0 and (not big or row["ratio"] >= 0.93)
                    print(f"  stream    {row['size_B']:>8d} B  {row['measured'] / 1e6:8.3f} MB/s  model "
                          f"{row['model'] / 1e6:8.3f} MB/s  ratio {row['ratio']:.3f} "
                          f"{'ok' if ok else 'OUTSIDE target'}")
            pp = [r for r in run["rows"] if r["kind"] == "ping-pong"]
            if pp:
                print(f"  one-way latency (smallest message) ratio {pp[0]['ratio']:.3f} "
                      f"{'within 20%' if abs(pp[0]['ratio'] - 1) <= 0.2 else 'OUTSIDE 20%'}; "
                      f"ping-pong ratios median {statistics.median(r['ratio'] for r in pp):.3f}, "
                      f"range {min(r['ratio'] for r in pp):.3f}-{max(r['ratio'] for r in pp):.3f}")
            for failure in run["failures"]:
                print(f"  FAILED {failure.get('test')} {failure.get('size_B')}: {failure.get('reason')}")
    if worst:
        print(f"\nworst ping-pong deviation over all runs: {max(worst):.3f}")
    return 0


if __name__ == "__main__":
    run_main(main)
