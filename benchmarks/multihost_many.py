"""Many set-top boxes over 2 hosts under Slurm: IMB Bcast of 64 B and ray tracing 512^2 with
`--check`, under both MPIs, complete (the target of one emulated cluster past one machine).

A real Slurm whose two hosts are namespaces on this machine (tests/cluster/slurm_hosts.py),
one CPU each. `cluster up --emulate Nxstb --hosts slurm` places the boxes over both hosts
(the plant split: one channel, run by the host holding most of its boxes), calibrating each
host's core; then for each MPI `shoal bench --attach` (IMB Bcast, 64 B, every box) and
`shoal work raytrace --attach --check` (every box, one rank each) run from the controller,
their results read from their results.csv. Frames relayed late or lost are counted
(`cluster agent links`) over the whole round.
Run as root: .venv/bin/python benchmarks/multihost_many.py [--devices 128] [--rounds 1]
             [--mpi mpich --mpi openmpi] [--runs bcast,raytrace] [--dilation D] [--one-host]
(`--runs ""`: only `cluster up` and `down`, timed. `--one-host`: each round also brings the
same boxes up on one of the two hosts, runs the same, and compares the `up` times.)
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from entry import run_main
from multihost_common import shoal
from multihost_pingpong import cpu_model, cross_host_frames

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster.slurm_hosts import slurm_hosts  # noqa: E402

from shoal.cluster import crosslinks  # noqa: E402


def run(hosts, env: dict[str, str], argv: list[str], out: Path, node: str | None) -> tuple[list[dict], float, str]:
    """A `shoal` command from ``node`` (None: the controller): its results' rows, its wall time,
    its last words."""
    start = time.monotonic()
    done = hosts.run([sys.executable, "-m", "shoal", *argv, "--out", str(out)], env=env, check=False, timeout=3600,
                     **({"node": node} if node else {}))
    took = time.monotonic() - start
    results = out / "results.csv"
    rows = list(csv.DictReader(results.open())) if results.exists() else []
    return rows, took, (done.stderr.strip().splitlines() or [""])[-1]


def bcast(hosts, env: dict[str, str], name: str, mpi: str, n: int, tmp: Path, node: str | None) -> bool:
    rows, took, last = run(hosts, env, ["bench", "--attach", name, "--mpi", mpi, "--nodes", str(n),
                                        "--tests", "imb.Bcast", "--sizes", "64", "--min-reps", "5", "--budget", "60"],
                           tmp / f"{name}-{mpi}-bcast", node)
    ok = len(rows) == 1
    print(f"  {mpi} IMB Bcast 64 B on {n} boxes: "
          + (f"{float(rows[0]['time_median_s']) * 1e3:.1f} ms of device time (median of {rows[0]['reps']} "
             f"repetitions), {took:.0f} s wall" if ok else f"FAILED after {took:.0f} s: {last}"), flush=True)
    return ok


def raytrace(hosts, env: dict[str, str], name: str, mpi: str, n: int, tmp: Path, node: str | None,
             wait: str | None = None) -> bool:
    rows, took, last = run(hosts, env, ["work", "raytrace", "--attach", name, "--mpi", mpi, "--nodes", str(n),
                                        "--size", "512", "--check", "--reps", "1", *(["--wait", wait] if wait else [])],
                           tmp / f"{name}-{mpi}-raytrace{'-' + wait if wait else ''}", node)
    ok = len(rows) == 1 and rows[0]["check"] == "pass"
    # The ranks' longest compute and communication times say whether a slow run lacked CPU or waited.
    print(f"  {mpi} raytrace 512 on {n} boxes{', --wait ' + wait if wait else ''}, --check: "
          + (f"pass, {float(rows[0]['time_s']):.2f} s of device time (most of any rank: compute "
             f"{float(rows[0]['compute_s']):.2f} s, communication {float(rows[0]['comm_s']):.2f} s; host slack "
             f"{rows[0]['host_slack'] or 'none'}), {took:.0f} s wall" if ok
             else f"FAILED after {took:.0f} s: {last}"), flush=True)
    return ok


def one_host(hosts, env: dict[str, str], k: int, n: int, d: float | None, mpis: list[str], runs: set[str],
             tmp: Path) -> tuple[float, int]:
    """The same boxes on one of the two hosts (``shoal-h1``), at D if given (else the D that host
    needs): its `up` time, and how many of its runs failed."""
    name, failed = f"one{k}", 0
    start = time.monotonic()
    record = json.loads(shoal(hosts, ["up", "--emulate", f"{n}xstb", "--name", name, "--json",
                                      *(["--dilation", f"{d:g}"] if d else [])], env, node="shoal-h1"))
    up_s = time.monotonic() - start
    try:
        print(f"round {k + 1}, one host: up in {up_s:.1f} s at D = {record['emulation']['dilation']:g}", flush=True)
        for mpi in mpis:
            if "bcast" in runs:
                failed += not bcast(hosts, env, name, mpi, n, tmp, "shoal-h1")
            if "raytrace" in runs:
                failed += not raytrace(hosts, env, name, mpi, n, tmp, "shoal-h1")
    finally:
        start = time.monotonic()
        shoal(hosts, ["down", name], env, node="shoal-h1")
        print(f"  down in {time.monotonic() - start:.1f} s", flush=True)
    return up_s, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--mpi", action="append", default=None)
    parser.add_argument("--dilation", type=float, default=None)
    parser.add_argument("--runs", default="bcast,raytrace", help="which runs, of bcast and raytrace")
    parser.add_argument("--wait", action="append", default=None,
                        help="ray tracing under these libshoalwait modes (default: the emulated devices' own)")
    parser.add_argument("--keep", type=Path, default=None, help="keep every run's directory here")
    parser.add_argument("--one-host", action="store_true",
                        help="each round, the same boxes at the same D on one of the hosts first")
    args = parser.parse_args()
    n, mpis = args.devices, args.mpi or ["mpich", "openmpi"]
    runs = {r for r in args.runs.split(",") if r}
    failed, ups = 0, {"one": [], "two": []}
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    kept = contextlib.nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory(prefix="shoal-many-")
    with kept as tmp, slurm_hosts(2) as hosts:
        os.chmod(tmp, 0o755)
        env = hosts.allocate()
        for k in range(args.rounds):
            name = f"many{k}"
            start = time.monotonic()
            record = json.loads(shoal(hosts, ["up", "--emulate", f"{n}xstb", "--hosts", "slurm", "--name", name,
                                              "--json", *(["--dilation", f"{args.dilation:g}"] if args.dilation else [])],
                                      env))
            ups["two"].append(time.monotonic() - start)
            try:
                speeds = {h: round(s["host_speed"]["value"], 3) for h, s in record["shares"].items()}
                split = record["links"]["split"].get("docsis-27m", {})
                print(f"round {k + 1}: up in {ups['two'][-1]:.1f} s, D = {record['dilation']:g}; boxes per host "
                      f"{ {h: len(s['devices']) for h, s in record['shares'].items()} }; host speeds {speeds}; "
                      f"plant owned by {split.get('owner')}, {len(split.get('devices', []))} boxes relayed",
                      flush=True)
                before = cross_host_frames(hosts, name, record["links"], env)
                for mpi in mpis:
                    if "bcast" in runs:
                        failed += not bcast(hosts, env, name, mpi, n, Path(tmp), None)
                    if "raytrace" in runs:
                        for wait in args.wait or [None]:
                            failed += not raytrace(hosts, env, name, mpi, n, Path(tmp), None, wait)
                judged = crosslinks.judge(before, cross_host_frames(hosts, name, record["links"], env))
                print(f"  {judged['frames']} frames between hosts, {judged['late']} late, {judged['lost']} lost"
                      + (f": {judged['why']}" if judged["flagged"] else ""), flush=True)
            finally:
                start = time.monotonic()
                shoal(hosts, ["down", name], env)
                print(f"  down in {time.monotonic() - start:.1f} s", flush=True)
            if args.one_host:
                up_s, lost = one_host(hosts, env, k, n, args.dilation, mpis, runs, Path(tmp))
                ups["one"].append(up_s)
                failed += lost
    print(f"{n}xstb over 2 hosts (one CPU each), {args.rounds} round(s); load average {os.getloadavg()[0]:.1f}; "
          f"{cpu_model()}, {os.cpu_count()} CPUs; {failed} run(s) failed")
    if ups["one"]:
        ratios = [two / one for one, two in zip(ups["one"], ups["two"])]
        print(f"cluster up: 2 hosts {statistics.median(ups['two']):.1f} s against one host "
              f"{statistics.median(ups['one']):.1f} s, ratio median {statistics.median(ratios):.2f} "
              f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}; target <= 2)")
    return 1 if failed else 0


if __name__ == "__main__":
    run_main(main)
