"""How long `shoal --help` takes, against starting Python itself.

Runs `shoal --help` (`python -m shoal --help` with the environment's
interpreter) and `python -c pass` in interleaved rounds, so both see the
same machine load, and prints for each the median and spread of the wall
time and of the CPU time (user + system, which a loaded machine inflates
less), and the median ratio of the two commands per round. The target of
issue 12: `shoal --help` within 0.2 s.

    .venv/bin/python benchmarks/startup.py [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

from entry import run_main

TARGET_S = 0.2


# As a user's shell runs it: bytecode caches written and used (some CI and
# sandbox environments set PYTHONDONTWRITEBYTECODE, which compiles every
# module on every start).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``argv``."""
    c0, t0 = _cpu(), time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
    return time.perf_counter() - t0, _cpu() - c0


def _describe(samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=4)
    return (f"median {statistics.median(samples) * 1e3:7.1f} ms  "
            f"IQR {q[0] * 1e3:6.1f}..{q[2] * 1e3:6.1f} ms  "
            f"min {min(samples) * 1e3:6.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="interleaved rounds (default 21)")
    args = parser.parse_args()
    commands = {"python -c pass": [sys.executable, "-c", "pass"],
                "shoal --help": [sys.executable, "-m", "shoal", "--help"]}
    for argv in commands.values():   # warm the page cache and the bytecode caches
        _time(argv)
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    ratios: dict[str, list[float]] = {"wall": [], "cpu": []}
    for _ in range(args.rounds):
        this_round = {name: _time(argv) for name, argv in commands.items()}
        for name, (w, c) in this_round.items():
            wall[name].append(w)
            cpu[name].append(c)
        for i, kind in enumerate(("wall", "cpu")):
            ratios[kind].append(this_round["shoal --help"][i] / this_round["python -c pass"][i])
    for name in commands:
        print(f"{name:15s} wall {_describe(wall[name])}")
        print(f"{'':15s} CPU  {_describe(cpu[name])}")
    for kind, values in ratios.items():
        q = statistics.quantiles(values, n=4)
        print(f"ratio shoal --help / python -c pass ({kind}): median {statistics.median(values):.2f} "
              f"(IQR {q[0]:.2f}..{q[2]:.2f}) over {args.rounds} rounds")
    shoal_s = statistics.median(wall["shoal --help"])
    print(f"shoal --help median wall {shoal_s:.3f} s: "
          f"{'within' if shoal_s <= TARGET_S else 'ABOVE'} the {TARGET_S} s target "
          f"(load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    run_main(main)
