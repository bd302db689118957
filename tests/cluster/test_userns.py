"""Emulation inside a user namespace: what ordinary users get, and what root
can choose so that even a SIGKILL leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd

from shoal.cluster import cpulimit, state
from shoal.runs import registry

ENV = {**os.environ, "SHOAL_USERNS": "always"}
LINK_RATE_Bps = 100e6 / 8
BUDGET = "2.0123"  # also a marker: it appears on every rank's command line


def _root_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines()}


def _host_cgroups_and_state() -> set[str]:
    """shoal's cgroups in the host's hierarchies and its host state records."""
    layout = cpulimit.detect()
    bases = [b for b in (layout.cpu_base, layout.cpuset_base, layout.acct_base) if b]
    found = {str(p) for b in bases if b.is_dir() for p in b.rglob("*") if p.is_dir()}
    # The registry of runs being written (runs.registry) is no cluster's: it stays.
    return found | {str(p) for p in state.root().glob("*") if p.name != registry.DIRECTORY}


def test_bench_runs_on_an_emulated_cluster_inside_a_user_namespace(tmp_path):
    before = _root_namespaces()
    host_before = _host_cgroups_and_state()
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "shoal", "bench", "--emulate", "2xminnowboard",
                           "--nodes", "2", "--tests", "mpbench.bandwidth", "--sizes", "1M",
                           "--budget", "1", "--rep-time", "0.3", "--min-reps", "3", "--check",
                           "--out", str(out)], capture_output=True, text=True, timeout=600, env=ENV)
    assert proc.returncode == 0, proc.stderr
    results = pd.read_csv(out / "results.csv")
    assert (results["check"] == "ok").all()
    # The shaped link is there inside the namespace too.
    assert 0.5 * LINK_RATE_Bps < results["bandwidth_median_Bps"].iloc[0] < 1.05 * LINK_RATE_Bps
    # Nothing was created where the rest of the machine can see it, or it was removed.
    assert _root_namespaces() == before
    assert _host_cgroups_and_state() == host_before


def test_sigkill_mid_run_leaves_nothing_behind(tmp_path):
    before = _root_namespaces()
    host_before = _host_cgroups_and_state()
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
    assert _root_namespaces() == before
    assert len(pd.read_csv(results)) >= 1  # what finished is kept
    # The devices' cgroups are in the host's hierarchy and outlast the kill;
    # their mirrored record lets the host remove them.
    down = subprocess.run([sys.executable, "-m", "shoal", "cluster", "down"], capture_output=True,
                          text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert _host_cgroups_and_state() == host_before


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return text.encode() in fh.read()
    except OSError:
        return False
