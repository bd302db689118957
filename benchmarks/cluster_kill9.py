"""kill -9 trials: an emulated cluster's owner killed during `up` and during a run leaves nothing.

20 trials each (by default): a process brings up 4 MinnowBoards (forwarder
links) and is SIGKILLed at a random moment of `up`; a `shoal bench` on
2 MinnowBoards is SIGKILLed once its first point is on disk. After each,
`shoal cluster down` reaps leftovers, then the script counts what is left of
that cluster: network namespaces, TAP devices in the root namespace, link
forwarder processes, cgroups, state directories. The reference is zero.
Run as root: .venv/bin/python benchmarks/cluster_kill9.py [--trials 20]
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

from entry import run_main

from shoal.cluster import cpulimit, memlimit, state

UP = ("import sys\n"
      "from shoal.cluster import inventory\n"
      "from shoal.cluster.emulated import EmulatedCluster\n"
      "EmulatedCluster(inventory.from_emulate('4xminnowboard'), sys.argv[1], calibrate=False).up()\n"
      "import time; time.sleep(60)\n")


def live_commands():
    """The command lines of the processes running now (zombies left out)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if stat != "Z":
            yield cmd


def leftovers(cluster_id: str | None, run_dir: Path | None = None) -> dict[str, int]:
    names = [n for n in os.listdir(state.NETNS_DIR) if cluster_id and n.startswith(f"shoal-{cluster_id}-")] \
        if state.NETNS_DIR.is_dir() else []
    taps = subprocess.run(["ip", "-o", "link", "show", "type", "tun"], capture_output=True,
                          text=True).stdout.strip().splitlines()
    forwarders, procs = 0, 0
    for cmd in live_commands():
        if cluster_id and f"shoal-{cluster_id}-".encode() in cmd and b"shoal-linkemu" in cmd:
            forwarders += 1
        elif run_dir is not None and str(run_dir).encode() in cmd:
            procs += 1
    cgroups = 0
    if cluster_id:
        for base in Path("/sys/fs/cgroup").glob("*/shoal"):
            cgroups += len(list(base.glob(f"{cluster_id}*")))
        # v1 memory groups sit under this process's own memory group (shoal-ID), not under shoal/.
        memory = memlimit.detect(cpulimit.detect())
        if memory.version == 1 and memory.base:
            cgroups += len(list(memory.base.glob(f"shoal-{cluster_id}*")))
    states = int(cluster_id is not None and state.cluster_dir(cluster_id).exists())
    return {"netns": len(names), "tap": len(taps), "forwarders": forwarders, "cgroups": cgroups,
            "state": states, "processes": procs}


def down() -> None:
    subprocess.run([sys.executable, "-m", "shoal", "cluster", "down"], capture_output=True, timeout=120)


def trial_up(i: int, up_s: float) -> dict[str, int]:
    cluster_id = f"k9u{i:02d}{random.randrange(1000):03d}"
    owner = subprocess.Popen([sys.executable, "-c", UP, cluster_id], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    time.sleep(random.uniform(0.05, up_s))
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    down()
    return leftovers(cluster_id)


def trial_run(i: int) -> dict[str, int]:
    out = Path(tempfile.mkdtemp(prefix="shoal-k9-")) / "run"
    proc = subprocess.Popen([sys.executable, "-m", "shoal", "bench", "--emulate", "2xminnowboard",
                             "--tests", "imb.PingPong", "--sizes", "1..64K", "--budget", "0.3",
                             "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (out / "results.csv").exists():
        time.sleep(0.1)
    manifest = out / "manifest.json"
    import json

    cluster_id = None
    for _ in range(50):
        try:
            clusters = json.loads(manifest.read_text()).get("clusters", {})
            cluster_id = next(iter(clusters.values())).get("id")
            break
        except (OSError, ValueError, StopIteration):
            time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    down()
    time.sleep(0.5)
    return leftovers(cluster_id, out)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=20)
    args = p.parse_args()
    down()
    taps_before = leftovers(None)["tap"]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", UP.replace("time.sleep(60)", "pass"), "k9probe"], check=True)
    up_s = time.perf_counter() - start
    down()
    for kind, run in (("during up", lambda i: trial_up(i, up_s)), ("during a run", trial_run)):
        totals: dict[str, int] = {}
        for i in range(args.trials):
            left = run(i)
            left["tap"] -= taps_before
            for key, value in left.items():
                totals[key] = totals.get(key, 0) + max(0, value)
        print(f"{args.trials} kill -9 trials {kind}: left behind " +
              ", ".join(f"{v} {k}" for k, v in totals.items()) +
              f"; reference 0; {'none left' if not any(totals.values()) else 'LEAKS'}", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
