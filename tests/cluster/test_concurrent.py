"""Several shoal commands on one host at once: two clusters brought up together (one by a
sweep, one by 'cluster up') while 'cluster status' looks, then each taken down by its id
with nothing of either left and /run/netns mounted once, not stacked."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shoal.cluster import state
from tests.cluster.test_emulated import host_namespaces, netns_names


def _shoal(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "shoal", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _netns_mounts() -> int:
    with open("/proc/self/mountinfo") as fh:
        return sum(1 for line in fh if line.split()[4] == "/run/netns")


@host_namespaces
def test_two_clusters_and_a_sweep_at_once_come_up_and_go_down_cleanly(tmp_path):
    mounts_before = _netns_mounts()
    ups = [_shoal("cluster", "up", "--emulate", "3xminnowboard", "--name", name, "--no-calibrate")
           for name in ("cca", "ccb")]
    sweep = _shoal("bench", "--emulate", "2xminnowboard", "--tests", "imb.PingPong", "--sizes", "1K,64K",
                   "--budget", "0.2", "--out", str(tmp_path / "run"))
    looks = [_shoal("cluster", "status", "--json") for _ in range(3)]
    try:
        for process in [*ups, sweep, *looks]:
            out, err = process.communicate(timeout=600)
            assert process.returncode == 0, err
            assert "Traceback" not in err
        for name in ("cca", "ccb"):
            record = state.read(name)
            assert record is not None and record.get("persistent")
            assert {f"shoal-{name}-minnowboard{i}" for i in (1, 2, 3)} <= netns_names()
        # The sweep's own cluster is gone already; the two others stay up until asked.
        assert _netns_mounts() <= max(1, mounts_before)
    finally:
        downs = [_shoal("cluster", "down", name) for name in ("cca", "ccb")]
        results = [(p, *p.communicate(timeout=300)) for p in downs]
    for process, out, err in results:
        assert process.returncode == 0 and "Traceback" not in err, err
    assert not {n for n in netns_names() if n.startswith(("shoal-cca-", "shoal-ccb-"))}
    assert state.read("cca") is None and state.read("ccb") is None
    assert _netns_mounts() <= max(1, mounts_before)
