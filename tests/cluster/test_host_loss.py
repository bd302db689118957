"""A remote host that disappears in the middle of a sweep: real sshd on hosts that are
network namespaces of their own (``sshd_hosts``), reached with ssh as a real cluster is.

The run must end ``failed`` at once, saying which host stopped answering, with every
finished point readable and nothing of the job left on the hosts that remain. A job running
when the host goes is stopped as soon as the host misses its answers (cluster.liveness).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cluster.sshd_hosts import SshdHosts
from tests.test_run_signals import _wait_rows, _workers_left

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="hosts of their own need root (network namespaces and a real sshd on each); the check "
           "that notices a lost host runs the same for every user")


@pytest.fixture
def hosts(tmp_path):
    made = SshdHosts(tmp_path / "hosts")
    try:
        yield made.up()
    finally:
        made.down()


def test_the_hosts_answer_before_anything_vanishes(hosts, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "shoal", "bench", "--cluster", str(hosts.inventory()),
                           "--tests", "imb.PingPong", "--sizes", "1,64K", "--budget", "0.1",
                           "--out", str(out), "--json"],
                          env={**os.environ, **hosts.environment()}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    # Each rank ran on a host of its own, named by its own hostname.
    assert sorted(next(iter(manifest["jobs"].values()))["hosts"]) == ["h1", "h2"]


def _lose_h2_after(hosts, out, argv: list[str], rows: int) -> tuple[str, list[dict], list[dict]]:
    """Run ``shoal ARGV --out OUT`` on the hosts, make h2 vanish once ``rows`` results are in;
    check what every lost-host run must show; return (last stderr line, results, failures)."""
    process = subprocess.Popen([sys.executable, "-m", "shoal", *argv, "--out", str(out)],
                               env={**os.environ, **hosts.environment()},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_rows(out / "results.csv", rows)
    hosts.vanish("h2")
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 2, stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    lost = hosts.addresses["h2"]
    assert last.startswith(f"shoal: hosts not ready: {lost}: ssh") and str(out) in last
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and lost in manifest["reason"]
    # The run stops at the first failure rather than trying (and timing out) every point
    # after it on a host that is gone; nothing of the job is left on the host that
    # remains, nor here.
    failures = list(csv.DictReader((out / "failures.csv").open()))
    assert len(failures) == 1 and failures[0]["reason"] in ("timeout", "crashed", "lost")
    assert hosts.processes("h1") == []
    assert not _workers_left(str(out))
    return last, list(csv.DictReader((out / "results.csv").open())), failures


def test_a_host_that_vanishes_mid_sweep_ends_the_run_failed_with_its_rows(hosts, tmp_path):
    out = tmp_path / "run"
    last, rows, _ = _lose_h2_after(hosts, out, [
        "bench", "--cluster", str(hosts.inventory()), "--tests", "imb.PingPong", "--sizes", "1..4M",
        "--budget", "0.3", "--timeout", "5"], rows=2)
    assert f"--resume {out}" in last
    assert len(rows) >= 2 and all(float(r["time_median_s"]) > 0 for r in rows)


def test_a_host_that_vanishes_during_a_workload_ends_the_run_failed_with_its_rows(hosts, tmp_path):
    _, rows, failures = _lose_h2_after(hosts, tmp_path / "work", [
        "work", "ep", "--size", "M20", "--cluster", str(hosts.inventory()), "--nodes", "2",
        "--reps", "40", "--timeout", "5"], rows=1)
    assert 1 <= len(rows) < 40 and all(float(r["time_s"]) > 0 for r in rows)
    # Stopped by the watch on the hosts' answers, not at the launch's timeout (a minute of
    # MPI's start-up grace on top of the point's 5 s).
    assert failures[0]["reason"] == "lost", failures
    assert failures[0]["detail"].startswith(f"a host stopped answering: {hosts.addresses['h2']}: ")
    assert not _workers_left("ep:M20")
