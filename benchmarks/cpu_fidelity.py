"""CPU fidelity of emulated devices: a CPU-bound kernel on k = 1..4 MinnowBoards with c = 1..2
ranks each, against one rank on one board measured in the same run.

Per (k, c): time per unit of work / single-rank time, and the spread of the
repetitions ((max - min) / median). Under both MPIs' launchers, at D = 1 on as
many boards as fit the host at D = 1, and at shoal's automatic D on four.
Targets: every ratio within 3 % of 1 and spreads <= 3 % with cgroups; within 7 %
with the user-space limit (ordinary users; as root: SHOAL_CGROUP_ROOT=/nonexistent).

Run: .venv/bin/python benchmarks/cpu_fidelity.py [--reps 5] [--mpi mpich,openmpi] [--steps N]
"""

from __future__ import annotations

import argparse
import json

from entry import run_main

from shoal import cluster
from shoal.cluster import cpufidelity, cpulimit, dilation, inventory
from shoal.mpi import discover


def boards_at_real_time(profile: str = "minnowboard") -> int:
    """How many boards fit this host at D = 1."""
    inv = inventory.from_emulate(f"1x{profile}")
    node = inv.nodes[0]
    budget = node.profile.cores * min(1.0, node.profile.speed / inv.host_speed)
    room = len(cpulimit.host_cpus()) - dilation.RESERVE_CPUS
    return max(1, min(4, int(room / budget + 1e-9)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--mpi", default="mpich,openmpi")
    parser.add_argument("--steps", type=int, default=cpufidelity.STEPS,
                        help="loop steps per rank (default: about 0.1 s of a host core)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = []
    for mpi_name in args.mpi.split(","):
        mpi = discover.resolve(mpi_name)
        for boards, d in ((boards_at_real_time(), 1.0), (4, None)):
            spec = f"{boards}xminnowboard"
            with cluster.open(emulate=spec, calibrate=False, dilation=d) as where:
                configs = [(k, c) for k in range(1, boards + 1) for c in (1, 2)]
                result = cpufidelity.measure(where, mpi, configs, args.reps, args.steps)
                limit = where.describe()["emulation"].get("cpu_limit")
            result.update({"mpi": mpi.name, "cluster": spec, "cpu_limit": limit})
            report.append(result)
            if not args.json:
                print(f"{mpi.name}, {spec}, D = {result['dilation']:g}, CPU limit: {limit}; "
                      f"single rank {result['single_rank_s'] * 1e3:.1f} ms")
                for p in result["points"]:
                    print(f"  k={p['devices']} c={p['ranks_per_device']}: time per unit / single "
                          f"rank {p['ratio']:.3f}, spread {p['spread']:.1%}")
    if args.json:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    run_main(main)
