"""One cable plant on 1 host and split over 2: IMB PingPong and Bcast on `docsis-27m`,
against each other and against the TCP model (target: within +-10 %).

A real Slurm whose two hosts are namespaces on this machine (tests/cluster/slurm_hosts.py).
Each round brings up N devices on the plant on shoal-h1 alone (`cluster up` there) and over both
hosts (`cluster up --hosts slurm`: the plant is split, and shoal-h1's forwarder runs the one
channel for the devices of both, shoal-h2's relaying its devices' frames to it), both at the
same and runs `shoal bench --attach` on each (MPICH, IMB PingPong between the first two
devices, Bcast over all N, ranks in event mode, MPICH's binomial tree as
benchmarks/cluster_shared_medium.py has it, whose model this compares with: the same
repetition loop on the shared medium, frame by frame with each connection's TCP window).
Frames relayed late or lost (`cluster agent links`) flag the round. The devices are NUCs on
the plant by default, as in cluster_shared_medium.py: a set-top box's core (1 % of a
reference core) makes a small message's time its CPU's, which hides the plant's.
Run as root: .venv/bin/python benchmarks/multihost_plant.py [--devices 32] [--profile nuc]
             [--rounds 2] [--sizes 64,1024,16384,65536] [--dilation 1]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from cluster_shared_medium import START_WINDOW
from entry import run_main
from multihost_common import shoal, spread
from multihost_pingpong import cpu_model, cross_host_frames

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster.slurm_hosts import slurm_hosts  # noqa: E402

from shoal import profiles  # noqa: E402
from shoal.cluster import crosslinks, linkmodel  # noqa: E402

LINK = "docsis-27m"


def bench(hosts, env: dict[str, str], name: str, n: int, sizes: str, reps: int, out: Path,
          node: str | None) -> dict[tuple[str, int], float]:
    """``shoal bench --attach NAME``: (test, size) -> median time per call, device seconds."""
    argv = [sys.executable, "-m", "shoal", "bench", "--attach", name, "--mpi", "mpich", "--nodes", str(n),
            "--tests", "imb.PingPong,imb.Bcast", "--sizes", sizes, "--wait", "event", "--rep-time", "1e-6",
            "--budget", "4", "--min-reps", str(reps), "--out", str(out)]
    where = {"node": node} if node else {}
    done = hosts.run(argv, env={**env, "MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"}, check=False,
                     timeout=3600, **where)
    results = out / "results.csv"
    if not results.exists():
        raise SystemExit(f"shoal bench on {name} failed: {done.stderr.strip()[-600:]}")
    with results.open() as fh:
        return {(row["test"], int(row["size_B"])): float(row["time_median_s"]) for row in csv.DictReader(fh)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=32)
    parser.add_argument("--profile", default="nuc")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sizes", default="64,1024,16384,65536")
    parser.add_argument("--reps", type=int, default=10, help="at least this many repetitions per point")
    parser.add_argument("--dilation", type=float, default=1.0,
                        help="both clusters' D (default 1: the ranks mostly wait on the plant)")
    args = parser.parse_args()
    n, sizes = args.devices, [int(s) for s in args.sizes.split(",")]
    link = profiles.load_links()[LINK]
    model = {("imb.PingPong", s): linkmodel.path(link).one_way_s(s) for s in sizes}
    model.update({("imb.Bcast", s): t for s, t in linkmodel.bench_bcast_run_s(
        link, n, sizes, tcp=True, window=START_WINDOW).items()})
    common = ["--emulate", f"{n}x{args.profile}", "--link", LINK, "--host-speed", "1", "--no-calibrate", "--json"]
    times: dict[str, dict[tuple[str, int], list[float]]] = {"1 host": {}, "2 hosts": {}}
    notes, loads, d = [], [], args.dilation
    with tempfile.TemporaryDirectory(prefix="shoal-plant-") as tmp, slurm_hosts(2) as hosts:
        os.chmod(tmp, 0o755)
        env = hosts.allocate()
        for k in range(args.rounds):
            one, two = f"pone{k}", f"ptwo{k}"
            up = shoal(hosts, ["up", *common, *(["--dilation", f"{d:g}"] if d else []), "--name", one], env,
                       node="shoal-h1")
            try:  # from here on the cluster goes down whatever happens
                d = json.loads(up)["emulation"]["dilation"]
                measured = bench(hosts, env, one, n, args.sizes, args.reps, Path(tmp) / one, "shoal-h1")
            finally:
                shoal(hosts, ["down", one], env, node="shoal-h1")
            for key, t in measured.items():
                times["1 host"].setdefault(key, []).append(t)
            record = json.loads(shoal(hosts, ["up", *common, "--dilation", f"{d:g}", "--hosts", "slurm",
                                              "--name", two], env))
            try:
                before = cross_host_frames(hosts, two, record["links"], env)
                measured = bench(hosts, env, two, n, args.sizes, args.reps, Path(tmp) / two, None)
                judged = crosslinks.judge(before, cross_host_frames(hosts, two, record["links"], env))
            finally:
                shoal(hosts, ["down", two], env)
            for key, t in measured.items():
                times["2 hosts"].setdefault(key, []).append(t)
            loads.append(os.getloadavg()[0])
            split = record["links"]["split"].get(LINK, {})
            underlay = record["time"]["underlay"]["shoal-h1"]["shoal-h2"]
            notes.append(judged["flagged"])
            print(f"round {k + 1}: D = {d:g}, load average {loads[-1]:.1f}; plant owned by {split.get('owner')} "
                  f"({len(split.get('devices', []))} devices relayed, lookahead {split.get('lookahead_ns', 0) / 1e3:.0f} us), "
                  f"underlay RTT median {underlay['rtt_median_s'] * 1e6:.0f} us; {judged['frames']} frames between "
                  f"hosts, {judged['late']} late, {judged['lost']} lost"
                  + (f": FLAGGED, {judged['why']}" if judged["flagged"] else ""), flush=True)
    print(f"\n{n}x{args.profile} on {LINK}, D = {d:g}, {args.rounds} interleaved rounds; load average "
          f"{min(loads):.1f}-{max(loads):.1f}; {cpu_model()}, {os.cpu_count()} CPUs; device ms")
    print(f"{'test':<13}{'size_B':>7}{'model':>9}{'1 host':>9}{'2 hosts':>9}  {'2/1':>6}  {'1/model':>8}  "
          f"{'2/model':>8}  spreads (1, 2)")
    worst = 0.0
    for key in sorted(model):
        if key not in times["1 host"] or key not in times["2 hosts"]:
            continue
        a, b = statistics.median(times["1 host"][key]), statistics.median(times["2 hosts"][key])
        ratios = (b / a, a / model[key], b / model[key])
        worst = max(worst, *(abs(r - 1) for r in ratios))
        print(f"{key[0]:<13}{key[1]:>7}{model[key] * 1e3:>9.2f}{a * 1e3:>9.2f}{b * 1e3:>9.2f}  {ratios[0]:>6.3f}  "
              f"{ratios[1]:>8.3f}  {ratios[2]:>8.3f}  {spread(times['1 host'][key]):.1%}, "
              f"{spread(times['2 hosts'][key]):.1%}")
    print(f"worst of the three ratios: {worst:.1%} off (target +-10 %: {'met' if worst <= 0.10 else 'MISSED'}); "
          f"rounds flagged for late or lost frames: {sum(notes)}")
    return 0


if __name__ == "__main__":
    run_main(main)
