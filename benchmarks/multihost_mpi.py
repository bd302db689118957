"""MPI ranks on devices of two hosts, started by the MPI's own launcher through the launcher
helper (MPICH's Hydra `-launcher-exec`, Open MPI's `plm_rsh_agent`), under both MPIs.

A real Slurm whose two hosts are namespaces on this machine (tests/cluster/slurm_hosts.py).
2xminnowboard over both hosts (`cluster up --hosts slurm`); mpiexec runs in the cluster's
head on host 1, and the helper (`<state>/<share>/spread-ssh`, shoal.cluster.spreadexec)
starts the MPI's daemon in minnowboard1 there and, through an srun step, in minnowboard2 on
host 2. The program (tests/cluster/where_rank.c) prints each rank's host name and the sum of a
256 KiB Allreduce, whose bytes cross the hosts' forwarders. Each round checks both and times
the launch (mpiexec's wall time); the reference, in the same round, is the same job between
two devices of a one-host cluster (its own launcher helper). Then shoal's own run over the
whole cluster: `shoal work raytrace --attach ID --check --nodes 2` (mpiexec started in the
head on host 1 by an srun step), its result checked against the serial reference.
Run as root: .venv/bin/python benchmarks/multihost_mpi.py [--rounds 2] [--mpi mpich --mpi openmpi]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from entry import run_main
from multihost_common import shoal, spread

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.cluster.slurm_hosts import slurm_hosts  # noqa: E402

from shoal.cluster import session  # noqa: E402
from shoal.mpi import discover  # noqa: E402
from shoal.mpi.launch import HostSlots, Job  # noqa: E402

DEVICES = ["minnowboard1", "minnowboard2"]


def launch(hosts, mpi, exe: Path, share: str, launcher: str) -> float:
    """Run where_rank on the two devices from the head of ``share`` (on shoal-h1); its wall time."""
    transport, extra = session.transport_env(mpi)
    job = Job(mpi, 2, [str(exe)], transport, hosts=[HostSlots(d, 1) for d in DEVICES], launcher_exec=launcher,
              extra_args=[*extra, *mpi.impl.launcher_from_mpiexec_only()],
              exec_prefix=[sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", share, "--run", "head", "--"])
    argv, env = job.command()
    start = time.perf_counter()
    ran = hosts.run(argv, node="shoal-h1", env=env, timeout=600, check=False)
    took = time.perf_counter() - start
    ranks = {int(line.split()[0]): line.split() for line in ran.stdout.splitlines() if line[:1].isdigit()}
    if ran.returncode != 0 or sorted(ranks) != [0, 1] or [ranks[r][1] for r in (0, 1)] != DEVICES \
            or any(r[5] != "1" for r in ranks.values()):
        raise SystemExit(f"{mpi.name} from the head of {share}: the job did not run on {', '.join(DEVICES)}: "
                         f"{ran.stdout} {ran.stderr[-800:]}")
    return took


def raytrace_check(hosts, env: dict[str, str], name: str, mpi, out: Path) -> float:
    """``shoal work raytrace --check`` over the cluster's two devices; its run time (device time)."""
    done = hosts.run([sys.executable, "-m", "shoal", "work", "raytrace", "--attach", name, "--check", "--nodes", "2",
                      "--size", str(raytrace_check.size), "--reps", "1", "--mpi", mpi.impl.kind, "--out", str(out)],
                     env=env, timeout=900, check=False)
    results = out / "results.csv"
    rows = list(csv.DictReader(results.open())) if results.exists() else []
    if done.returncode != 0 or len(rows) != 1 or rows[0]["check"] != "pass" or rows[0]["nodes"] != "2":
        raise SystemExit(f"{mpi.name}: work raytrace --check over 2 hosts failed: {done.stdout[-600:]} "
                         f"{done.stderr[-600:]}")
    return float(rows[0]["time_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mpi", action="append", default=None)
    parser.add_argument("--size", default="512", help="work raytrace's size (default 512: 512x512)")
    args = parser.parse_args()
    raytrace_check.size = args.size
    mpis = [discover.resolve(kind) for kind in args.mpi or ["mpich", "openmpi"]]
    common = ["--emulate", "2xminnowboard", "--host-speed", "1", "--no-calibrate", "--json"]
    times: dict[str, list[float]] = {}
    loads = []
    with tempfile.TemporaryDirectory(prefix="shoal-mpi-") as tmp:
        os.chmod(tmp, 0o755)
        programs = {}
        for mpi in mpis:
            programs[mpi.name] = Path(tmp) / f"where_rank-{len(programs)}"
            subprocess.run([str(mpi.mpicc), "-O2", "-o", str(programs[mpi.name]), str(ROOT / "tests/cluster/where_rank.c")],
                           check=True, env={**os.environ, **mpi.env()})
        with slurm_hosts(2) as hosts:
            env = hosts.allocate()
            for k in range(args.rounds):
                one, two = f"mone{k}", f"mtwo{k}"
                json.loads(shoal(hosts, ["up", *common, "--name", one], env, node="shoal-h1"))
                record = json.loads(shoal(hosts, ["up", *common, "--hosts", "slurm", "--name", two], env))
                first = record["shares"]["shoal-h1"]
                try:
                    for mpi in mpis:
                        local = launch(hosts, mpi, programs[mpi.name], one, str(Path(first["launcher"]).parents[1] / one / "ssh"))
                        across = launch(hosts, mpi, programs[mpi.name], first["id"], first["launcher"])
                        times.setdefault(f"{mpi.name} 1 host", []).append(local)
                        times.setdefault(f"{mpi.name} 2 hosts", []).append(across)
                        print(f"round {k + 1} {mpi.name}: 1 host {local:.2f} s, 2 hosts {across:.2f} s "
                              f"(ranks on {', '.join(DEVICES)}, Allreduce right)", flush=True)
                        checked = raytrace_check(hosts, env, two, mpi, Path(tmp) / f"raytrace-{k}-{mpi.impl.kind}")
                        times.setdefault(f"{mpi.name} raytrace {args.size} over 2 hosts", []).append(checked)
                        print(f"round {k + 1} {mpi.name}: work raytrace {args.size} --check over 2 hosts: "
                              f"pass, {checked * 1e3:.1f} ms (device time)", flush=True)
                finally:
                    shoal(hosts, ["down", two], env)
                    shoal(hosts, ["down", one], env, node="shoal-h1")
                loads.append(os.getloadavg()[0])
    print(f"\n{args.rounds} rounds, load average {min(loads):.1f}-{max(loads):.1f}")
    for name, values in times.items():
        what = "run (device time)" if "raytrace" in name else "launch and run"
        print(f"  {name}: {what} {statistics.median(values):.2f} s (spread {spread(values):.0%})")
    return 0


if __name__ == "__main__":
    run_main(main)
