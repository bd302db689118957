"""Ping-pong between two MinnowBoards on `ethernet-100m` over 2 hosts, against the link model
(target: within +-10 % at every size), with the same two devices on one host beside it.

A real Slurm whose two hosts are namespaces on this machine (tests/cluster/slurm_hosts.py),
their underlay a bridge. Each round brings up 2xminnowboard on one host (`cluster up` there)
and over both (`cluster up --hosts slurm`: minnowboard1 on shoal-h1, minnowboard2 on
shoal-h2, frames between the hosts' forwarders over UDP), both at the same dilation, and
runs benchmarks/tcp_pingpong.c between the two devices: the median half round trip per size,
divided by D, against the link model's one-way time (cluster.linkmodel), computed here.
Frames between the hosts that arrived after their delivery time or were lost are counted
by the forwarders (`cluster agent links`) and flag the round.
Run as root: .venv/bin/python benchmarks/multihost_pingpong.py [--rounds 2] [--dilation 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from entry import run_main
from multihost_common import shoal, spread

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.cluster.slurm_hosts import slurm_hosts  # noqa: E402

from shoal.cluster import agent, crosslinks, inventory, linkmodel  # noqa: E402
from shoal.cluster.emulated import mac_of  # noqa: E402

SIZES = (64, 256, 1024, 4096, 16384, 65536)
PORT = "5002"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def in_device(share: str, device: str, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", share, "--run", device, "--", *argv]


def pingpong(hosts, exe: Path, client: tuple[str, str, str], server: tuple[str, str, str], address: str,
             reps: int) -> dict[int, float]:
    """Median half round trip (host time) per size; client and server: (host, share, device)."""
    serving = hosts.start(in_device(server[1], server[2], [str(exe), "server", address, PORT]), node=server[0])
    try:
        done = hosts.run(in_device(client[1], client[2], [str(exe), "client", address, PORT, str(reps),
                                                          *map(str, SIZES)]), node=client[0], timeout=900,
                         check=False)
    finally:
        serving.kill()
        serving.communicate()
    if done.returncode != 0:
        raise SystemExit(f"the ping-pong failed: {done.stderr.strip()[-400:]}")
    return {int(size): float(median) for size, median, _ in (line.split() for line in done.stdout.splitlines())}


def cross_host_frames(hosts, name: str, links: dict, env: dict[str, str]) -> dict:
    reports = {}
    for host in links["hosts"]:
        for report in agent.read_reports(shoal(hosts, ["agent", "links", "--id", name], env, node=host)):
            reports[report["host"]] = report["links"]
    return crosslinks.by_device(reports, links, mac_of)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dilation", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=100)
    args = parser.parse_args()
    d = args.dilation
    link = inventory.from_emulate("2xminnowboard").nodes[0].link
    path = linkmodel.path(link)
    common = ["--emulate", "2xminnowboard", "--host-speed", "1", "--no-calibrate", "--dilation", f"{d:g}", "--json"]
    ratios: dict[str, dict[int, list[float]]] = {"1 host": {s: [] for s in SIZES}, "2 hosts": {s: [] for s in SIZES}}
    flags, loads = [], []
    with tempfile.TemporaryDirectory(prefix="shoal-pingpong-") as tmp:
        exe = Path(tmp) / "tcp_pingpong"
        subprocess.run(["cc", "-O2", "-Wall", "-o", str(exe), str(Path(__file__).with_name("tcp_pingpong.c"))],
                       check=True)
        os.chmod(tmp, 0o755)
        with slurm_hosts(2) as hosts:
            env = hosts.allocate()
            for k in range(args.rounds):
                one, two = f"pone{k}", f"ptwo{k}"
                described = json.loads(shoal(hosts, ["up", *common, "--name", one], env, node="shoal-h1"))
                try:
                    host1 = pingpong(hosts, exe, ("shoal-h1", one, "minnowboard1"), ("shoal-h1", one, "minnowboard2"),
                                     described["addresses"]["minnowboard2"], args.reps)
                finally:
                    shoal(hosts, ["down", one], env, node="shoal-h1")
                record = json.loads(shoal(hosts, ["up", *common, "--hosts", "slurm", "--name", two], env))
                try:
                    nodes = record["nodes"]
                    before = cross_host_frames(hosts, two, record["links"], env)
                    host2 = pingpong(hosts, exe, (nodes["minnowboard1"]["host"], nodes["minnowboard1"]["share"],
                                                  "minnowboard1"),
                                     (nodes["minnowboard2"]["host"], nodes["minnowboard2"]["share"], "minnowboard2"),
                                     nodes["minnowboard2"]["address"], args.reps)
                    judged = crosslinks.judge(before, cross_host_frames(hosts, two, record["links"], env))
                finally:
                    shoal(hosts, ["down", two], env)
                loads.append(os.getloadavg()[0])
                underlay = record["time"]["underlay"]["shoal-h1"]["shoal-h2"]
                print(f"round {k + 1} (load average {loads[-1]:.1f}; underlay RTT median "
                      f"{underlay['rtt_median_s'] * 1e6:.0f} us, clock offset {underlay['clock_offset_s'] * 1e6:.1f} us; "
                      f"{judged['frames']} frames between hosts, {judged['late']} late, {judged['lost']} lost"
                      + (f": FLAGGED, {judged['why']}" if judged["flagged"] else "") + ")")
                flags.append(judged["flagged"])
                for size in SIZES:
                    model = path.one_way_s(size)
                    r1, r2 = host1[size] / d / model, host2[size] / d / model
                    ratios["1 host"][size].append(r1)
                    ratios["2 hosts"][size].append(r2)
                    print(f"  {size:>6d} B  model {model * 1e6:8.1f} us  1 host {host1[size] / d * 1e6:8.1f} us "
                          f"({r1:.3f})  2 hosts {host2[size] / d * 1e6:8.1f} us ({r2:.3f})", flush=True)
    print(f"\n2xminnowboard on {link.name}, D = {d:g}, {args.rounds} rounds, {args.reps} round trips per size; "
          f"load average {min(loads):.1f}-{max(loads):.1f}; {cpu_model()}, {os.cpu_count()} CPUs")
    worst = 0.0
    for size in SIZES:
        line = f"  {size:>6d} B"
        for where, by_size in ratios.items():
            values = by_size[size]
            line += f"  {where}: median {statistics.median(values):.3f} (spread {spread(values):.1%})"
        worst = max(worst, abs(statistics.median(ratios["2 hosts"][size]) - 1))
        print(line)
    met = worst <= 0.10
    print(f"2 hosts against the link model: worst {worst:.1%} off (target +-10 % at every size: "
          f"{'met' if met else 'MISSED'}); rounds flagged for late or lost frames: {sum(flags)}")
    return 0


if __name__ == "__main__":
    run_main(main)
