"""Emulation inside a user namespace: what ordinary users get, and what root
can choose so that even a SIGKILL leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from shoal.cluster import cpulimit, state

ENV = {**os.environ, "SHOAL_USERNS": "always"}
LINK_RATE_Bps = 100e6 / 8
BUDGET = "2.0123"  # also a marker: it appears on every rank's command line


def _root_namespaces(cluster_id: str) -> set[str]:
    """The cluster's network namespaces in the host's list (another suite's come and go)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith(f"shoal-{cluster_id}-")}


def _host_cgroups_and_state(cluster_id: str) -> set[str]:
    """The cluster's cgroups in the host's hierarchies and its host state record."""
    layout = cpulimit.detect()
    bases = [b for b in (layout.cpu_base, layout.cpuset_base, layout.acct_base) if b]
    found = {str(p) for b in bases if (b / cluster_id).is_dir()
             for p in [b / cluster_id, *(b / cluster_id).rglob("*")] if p.is_dir()}
    return found | {str(p) for p in state.root().glob(cluster_id)}


def _cluster_id(run: Path) -> str:
    """The id of the run's emulated cluster, from its manifest."""
    (cluster,) = json.loads((run / "manifest.json").read_text())["clusters"].values()
    return cluster["id"]


def test_bench_runs_on_an_emulated_cluster_inside_a_user_namespace(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "shoal", "bench", "--emulate", "2xminnowboard",
                           "--nodes", "2", "--tests", "mpbench.bandwidth", "--sizes", "1M",
                           "--budget", "1", "--rep-time", "0.3", "--min-reps", "3", "--check",
                           "--out", str(out)], capture_output=True, text=True, timeout=600, env=ENV)
    assert proc.returncode == 0, proc.stderr
    results = pd.read_csv(out / "results.csv")
    assert (results["check"] == "ok").all()
    # The shaped link is there inside the namespace too: nothing crosses it faster.
    assert 0 < results["bandwidth_median_Bps"].iloc[0] < 1.05 * LINK_RATE_Bps
    # Nothing of its cluster was made where the rest of the machine can see it, or it was
    # removed: its id names every namespace, cgroup and record it makes (other suites'
    # clusters, on a host shared with them, come and go meanwhile).
    cluster_id = _cluster_id(out)
    assert _root_namespaces(cluster_id) == set()
    assert _host_cgroups_and_state(cluster_id) == set()


def test_sigkill_mid_run_leaves_nothing_behind(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "shoal", "bench", "--emulate", "3xminnowboard",
                             "--nodes", "3", "--tests", "mpbench.allreduce", "--sizes", "1..64K",
                             "--budget", BUDGET, "--ci", "0", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    results = out / "results.csv"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not results.exists():
        time.sleep(0.2)
    assert results.exists(), "no point finished"
    cluster_id = _cluster_id(out)
    assert _host_cgroups_and_state(cluster_id), "its cgroups and record are where the host sees them"
    ranks = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline_has(p, f"--budget\0{BUDGET}")]
    assert ranks, "the ranks carry the run's budget on their command line"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    # Every process of the run (mpiexec, proxies, ranks) dies with the namespace.
    deadline = time.monotonic() + 30
    survivors = ["?"]
    while time.monotonic() < deadline and survivors:
        survivors = [p for p in os.listdir("/proc") if p.isdigit()
                     and (_cmdline_has(p, str(out)) or _cmdline_has(p, f"--budget\0{BUDGET}"))]
        time.sleep(0.2)
    assert survivors == [], f"processes of the killed run still alive: {survivors}"
    assert _root_namespaces(cluster_id) == set()
    assert len(pd.read_csv(results)) >= 1  # what finished is kept
    # The devices' cgroups are in the host's hierarchy and outlast the kill;
    # their mirrored record lets the host remove them.
    down = subprocess.run([sys.executable, "-m", "shoal", "cluster", "down"], capture_output=True,
                          text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert _host_cgroups_and_state(cluster_id) == set()


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return text.encode() in fh.read()
    except OSError:
        return False
