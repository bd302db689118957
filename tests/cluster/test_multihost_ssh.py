"""One emulated cluster spread over two hosts of an ssh inventory (``sshd_hosts``: namespaces
with a real sshd each): ``cluster up --hosts FILE`` starts one agent per host over ssh, each
builds its share, an MPI job started over ssh in the cluster's head runs a rank on each
host's device, and ``cluster down`` leaves nothing of either.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cluster.sshd_hosts import namespace_pids, sshd_hosts

from shoal.cluster import state

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="namespaced sshd hosts need root (network namespaces); an ordinary user's placement and refusals are in test_multihost_placement.py")


@pytest.fixture
def hosts(tmp_path):
    with sshd_hosts(tmp_path / "hosts") as made:
        yield made


def _shoal(hosts, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", "cluster", *args], capture_output=True, text=True,
                          env={**os.environ, **hosts.environment()}, timeout=300)


def test_up_over_an_ssh_inventory_builds_a_share_on_each_host_runs_ranks_on_both_and_down_removes_both(
        hosts, tmp_path):
    name = "s" + str(os.getpid() % 100000)
    done = _shoal(hosts, "up", "--emulate", "2xminnowboard", "--hosts", str(hosts.inventory()),
                  "--name", name, "--host-speed", "1", "--no-calibrate", "--json",
                  # D = 4: the underlay between the test hosts, slow under a loaded suite, then
                  # stays well under the link's emulated latency (a refusal would be right).
                  "--dilation", "4")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert {h: s["devices"] for h, s in record["shares"].items()} == {
        "h1": ["minnowboard1"], "h2": ["minnowboard2"]}
    shares = {h: state.read(s["id"]) for h, s in record["shares"].items()}
    for host, share in shares.items():
        # Built by the agent on that host: it runs there (in the host's network namespace).
        agent = record["shares"][host]["agent"]["pid"]
        assert agent in namespace_pids(hosts.netns(host)), host
        assert all(Path("/run/netns", ns).exists() for ns in share["netns"])
    # Ranks on both hosts: mpiexec in the head on h1 over ssh, a rank in each device; in the
    # head layout every rank is started from the head, h2's over ssh with its environment.
    # Each board's power: its profile's model, driven by its CPU time, sampled on its host over ssh.
    for layout in ("box", "head"):
        out = tmp_path / f"run-{layout}"
        ran = subprocess.run([sys.executable, "-m", "shoal", "work", "raytrace", "--attach", name, "--check",
                              "--nodes", "2", "--size", "64", "--reps", "1", "--mpi", "mpich", "--launch",
                              layout, "--power", "model", "--out", str(out)], capture_output=True, text=True,
                             env={**os.environ, **hosts.environment()}, timeout=600)
        rows = list(csv.DictReader((out / "results.csv").open())) if ran.returncode == 0 else []
        assert [(r["nodes"], r["check"]) for r in rows] == [("2", "pass")], (layout, ran.stderr[-2000:])
        assert rows[0]["power_source"].split(",")[:2] == ["minnowboard1:model", "minnowboard2:model"], rows[0]
    done = _shoal(hosts, "down", name)
    assert done.returncode == 0, done.stderr
    for share in shares.values():
        assert not [ns for ns in share["netns"] if Path("/run/netns", ns).exists()]
        assert not [g for g in share["cgroups"] if Path(g).exists()]
    assert hosts.processes("h1") == [] and hosts.processes("h2") == []
    assert all(state.read(i) is None for i in (name, *(s["id"] for s in shares.values())))
