"""Kill points over `cluster up` and `cluster down` across 2 hosts: nothing left on either.

A real Slurm whose two hosts are namespaces on this machine (tests/cluster/slurm_hosts.py),
one allocation of both. Each trial brings 4 set-top boxes up over both hosts
(`cluster up --hosts slurm`) and SIGKILLs the command at a random moment: of `up` in
half the trials, of `cluster down` (after a full `up`) in the other half. Then
`shoal cluster down ID` removes what is left, and the script counts what is left of
that cluster on each host: network namespace files (each host's own /run/netns),
cgroups, link forwarders, agents and their launchers (srun), state records. The
reference is zero.
Run as root: .venv/bin/python benchmarks/multihost_kill_points.py [--trials 20]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cluster_kill9 import live_commands
from entry import run_main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster.slurm_hosts import slurm_hosts  # noqa: E402

from shoal.cluster import state  # noqa: E402

UP = ["cluster", "up", "--emulate", "4xstb", "--hosts", "slurm", "--host-speed", "1", "--no-calibrate"]


def leftovers(hosts, name: str) -> dict[str, int]:
    netns = 0
    for host in hosts.hosts:
        directory = hosts.where / host / "run" / "netns"
        if directory.is_dir():
            netns += len([n for n in os.listdir(directory) if n.startswith(f"shoal-{name}-")])
    # os.walk passes over the groups other clusters remove while it reads.
    cgroups = sum(1 for parent, children, _ in os.walk("/sys/fs/cgroup")
                  if Path(parent).name == "shoal" for c in children if c.startswith(f"{name}-"))
    commands = list(live_commands())
    forwarders = sum(1 for c in commands if b"shoal-linkemu" in c and f"shoal-{name}-".encode() in c)
    ours = [c for c in commands if b"cluster\0agent\0up\0--id\0" + name.encode() + b"\0" in c]
    launchers = sum(1 for c in ours if c.startswith(b"/usr/bin/srun"))
    agents = len(ours) - launchers
    records = sum(state.read(i) is not None for i in (name, f"{name}-1", f"{name}-2"))
    return {"netns": netns, "cgroups": cgroups, "forwarders": forwarders, "agents": agents,
            "launchers": launchers, "records": records}


class Trials:
    def __init__(self, hosts) -> None:
        self.hosts = hosts
        granted = hosts.run(["salloc", "-N2", "--no-shell"]).stderr
        job = granted.split("Granted job allocation")[1].split()[0]
        self.env = {**os.environ, **hosts.environment(), "SLURM_JOB_ID": job,
                    "SLURM_JOB_NODELIST": "shoal-h[1-2]"}

    def start(self, args: list[str]) -> subprocess.Popen:
        return subprocess.Popen(self.hosts._enter("shoal-ctl") + [sys.executable, "-m", "shoal", *args],
                                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def timed(self, args: list[str]) -> float:
        start = time.perf_counter()
        if self.start(args).wait(timeout=600) != 0:
            raise SystemExit(f"shoal {' '.join(args)} failed")
        return time.perf_counter() - start

    def kill_after(self, args: list[str], seconds: float) -> None:
        process = self.start(args)
        time.sleep(seconds)
        process.send_signal(signal.SIGKILL)
        process.wait()

    def down(self, name: str) -> None:
        self.start(["cluster", "down", name]).wait(timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    # One state root for the controller and both hosts (each has a /run of its own), so that
    # this script reads every record; the tests do the same.
    os.environ["SHOAL_STATE_DIR"] = tempfile.mkdtemp(prefix="shoal-kill-points-")
    with slurm_hosts(2) as hosts:
        trials = Trials(hosts)
        try:
            up_s = trials.timed([*UP, "--name", "kprobe"])
            seen = leftovers(hosts, "kprobe")  # what the count sees of a cluster that is up
            if not all(seen[k] for k in ("netns", "forwarders", "agents", "launchers", "records")):
                raise SystemExit(f"the count does not see a cluster that is up: {seen}")
        finally:  # its forwarders and cgroups would outlive the hosts
            start = time.perf_counter()
            trials.down("kprobe")
            down_s = time.perf_counter() - start
        print(f"up {up_s:.2f} s, down {down_s:.2f} s; load average {os.getloadavg()[0]:.1f}", flush=True)
        totals: dict[str, dict[str, int]] = {"up": {}, "down": {}}
        for i in range(args.trials):
            name, during = f"k{i:02d}{rng.randrange(1000):03d}", ("up", "down")[i % 2]
            at = rng.uniform(0.05, up_s if during == "up" else down_s)
            try:
                if during == "up":
                    trials.kill_after([*UP, "--name", name], at)
                else:
                    trials.timed([*UP, "--name", name])
                    trials.kill_after(["cluster", "down", name], at)
            finally:
                trials.down(name)
            time.sleep(0.5)
            left = leftovers(hosts, name)
            for key, value in left.items():
                totals[during][key] = totals[during].get(key, 0) + value
            print(f"trial {i + 1}: killed {at:.2f} s into {during}: left "
                  + ", ".join(f"{v} {k}" for k, v in left.items()), flush=True)
    for during, counted in totals.items():
        print(f"{args.trials // 2} kill points during {during}: left behind "
              + ", ".join(f"{v} {k}" for k, v in counted.items())
              + f"; reference 0; {'none left' if not any(counted.values()) else 'LEAKS'}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    run_main(main)
