"""`shoal cluster up` over 2 hosts against 1 host, for the same devices (target: <= 2x).

A real Slurm whose two hosts are namespaces on this machine (tests/cluster/slurm_hosts.py).
Reference, measured in the same run with rounds interleaved: `shoal cluster up` of the
same devices on one of its hosts. Each round times up and down of both; prints every
round, the medians, the spreads (max - min over median) and the ratio of the medians.
Run as root: .venv/bin/python benchmarks/multihost_up.py [--devices 16] [--rounds 3] [--calibrate]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from entry import run_main
from multihost_common import spread

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster.slurm_hosts import slurm_hosts  # noqa: E402

SHOAL = [sys.executable, "-m", "shoal", "cluster"]


def timed(hosts, argv: list[str], env: dict[str, str], node: str | None = None) -> float:
    where = {"node": node} if node else {}
    start = time.perf_counter()
    done = hosts.run(argv, env=env, check=False, timeout=900, **where)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[3:])} failed: {done.stderr.strip()[-400:]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=16)
    parser.add_argument("--profile", default="stb")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calibrate", action="store_true", help="calibrate device CPUs at up")
    args = parser.parse_args()
    spec = f"{args.devices}x{args.profile}"
    common = ["--emulate", spec, "--host-speed", "1"] + ([] if args.calibrate else ["--no-calibrate"])
    times: dict[str, list[float]] = {"1 host up": [], "1 host down": [], "2 hosts up": [], "2 hosts down": []}
    with slurm_hosts(2) as hosts:
        env = hosts.allocate()
        for k in range(args.rounds):
            one, two = f"one{k}", f"two{k}"
            times["1 host up"].append(timed(hosts, [*SHOAL, "up", *common, "--name", one], env, "shoal-h1"))
            times["1 host down"].append(timed(hosts, [*SHOAL, "down", one], env, "shoal-h1"))
            times["2 hosts up"].append(timed(hosts, [*SHOAL, "up", *common, "--hosts", "slurm", "--name", two], env))
            times["2 hosts down"].append(timed(hosts, [*SHOAL, "down", two], env))
            print(f"round {k + 1}: " + ", ".join(f"{name} {v[-1]:.2f} s" for name, v in times.items()),
                  flush=True)
    print(f"{spec}, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f} at the end")
    for name, values in times.items():
        print(f"  {name}: median {statistics.median(values):.2f} s, spread {spread(values):.0%}")
    ratio = statistics.median(times["2 hosts up"]) / statistics.median(times["1 host up"])
    print(f"up over 2 hosts / up on 1 host: {ratio:.2f} (target <= 2: {'met' if ratio <= 2 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    run_main(main)
