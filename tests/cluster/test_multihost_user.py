"""An ordinary user's cluster over the hosts of a real Slurm: uid 65534 on ``slurm_hosts``.

A Slurm user is not root on the nodes. Inside the user's own allocation, ``cluster up
--hosts slurm`` starts the agents with the user's srun; each builds its host's share in a
user namespace of its own (nothing in the hosts' own /run/netns), its forwarder on a UDP
socket bound on the host's network before; a process started on a host enters a device
(``nsexec`` joins the share's namespaces), the launcher helper in the head reaches the
other host through the agent's relay, an MPI job runs over all four boxes of both hosts
in both launch layouts (the MPI's daemons in the boxes, or every rank started from the head),
the forwarders count its frames, and after one host's agent is killed, ``cluster down``
leaves nothing of the user's on either host.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from tests.cluster.slurm_hosts import PROGRAMS, slurm_hosts

from shoal.cluster import agent, crosslinks, sysns
from shoal.cluster.emulated import mac_of

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(Path(p).exists() for p in PROGRAMS),
    reason="a Slurm whose hosts are namespaces needs root (network, UTS and mount namespaces) and "
           "Debian's slurmctld, slurmd, slurm-client and munge (setup installs them as root); "
           "the user's side runs as uid 65534")

REPO = Path(__file__).resolve().parents[2]
UID = 65534


def _user_python() -> str:
    """The ordinary user's Python with shoal (scripts/unprivileged-venv.sh, as the suite's
    uid-65534 run uses)."""
    venv = subprocess.run([str(REPO / "scripts" / "unprivileged-venv.sh")], capture_output=True, text=True,
                          check=True, timeout=1200).stdout.strip().splitlines()[-1]
    return str(Path(venv) / "bin" / "python")


class UserAllocation:
    """The user's allocation of both hosts, and the user's commands on the controller or a host."""

    def __init__(self, hosts, python: str, home: Path) -> None:
        self.hosts, self.python, self.home = hosts, python, home
        self.prefix = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--", "env", "-i",
                       f"HOME={home}", "PATH=/usr/local/bin:/usr/bin:/bin", f"TMPDIR={home}",
                       f"XDG_CACHE_HOME={home}/cache", "LANG=C.UTF-8", f"SLURM_CONF={hosts.conf}"]
        granted = self.run(["salloc", "-N2", "--no-shell"])
        assert granted.returncode == 0, granted.stderr
        job = granted.stderr.split("Granted job allocation")[1].split()[0]
        self.prefix += [f"SLURM_JOB_ID={job}", "SLURM_JOB_NODELIST=shoal-h[1-2]"]

    def run(self, argv: list[str], node: str = "shoal-ctl", timeout: float = 300) -> subprocess.CompletedProcess:
        return self.hosts.run([*self.prefix, *argv], node=node, check=False, timeout=timeout)

    def shoal(self, *args: str, node: str = "shoal-ctl", timeout: float = 300) -> subprocess.CompletedProcess:
        return self.run([self.python, "-m", "shoal", *args], node=node, timeout=timeout)

    def state_root(self) -> Path:
        return self.home / ".cache" / "shoal" / "clusters"


@pytest.fixture(scope="module")
def user_allocation():
    python = _user_python()
    home = Path(tempfile.mkdtemp(prefix="shoal-user-slurm-", dir="/var/tmp"))
    os.chown(home, UID, UID)
    try:
        with slurm_hosts(2) as hosts:
            yield UserAllocation(hosts, python, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _users_processes() -> dict[int, str]:
    """The user's live processes (zombies hold nothing): pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != UID or (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, IndexError):
            continue
    return found


def _wait(ready, what: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < end, what
        time.sleep(0.05)


def test_an_ordinary_users_cluster_over_two_hosts_runs_mpi_and_leaves_nothing(user_allocation):
    user = user_allocation
    before = set(_users_processes())
    name = "mu" + os.urandom(2).hex()
    # (An ordinary user's forwarders run at normal priority: while a host still builds its
    # share, probes wait behind it; the agents measure again until a window is quiet.)
    done = user.shoal("cluster", "up", "--emulate", "4xstb", "--hosts", "slurm", "--name", name,
                      "--host-speed", "1", "--no-calibrate", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert {h: s["devices"] for h, s in record["shares"].items()} == {
        "shoal-h1": ["stb1", "stb2"], "shoal-h2": ["stb3", "stb4"]}
    for host, share in record["shares"].items():
        # Built in the user's namespace: the host's own /run/netns has none of it, and the
        # host's record of the share is the mirror naming its agent outside and the cluster.
        netns = user.hosts.where / host / "run" / "netns"
        assert not (netns.is_dir() and os.listdir(netns)), host
        mirror = json.loads((user.state_root() / share["id"] / "state.json").read_text())
        assert mirror["in_user_namespace"] and mirror["part_of"] == {"cluster": name, "host": host}
        assert mirror["owner_pid"] == share["agent"]["pid"] != mirror["entry_pid"]
        assert sysns.process_start_time(share["agent"]["pid"]) == share["agent"]["start"]
    # A command started on host 2 enters a device there; the head on host 1 reaches stb3 on
    # host 2 through its agent's relay (the srun runs on the host's side).
    two = record["shares"]["shoal-h2"]["id"]
    ran = user.run([user.python, "-m", "shoal.cluster.nsexec", "--cluster", two, "--run", "stb3", "--",
                    "hostname"], node="shoal-h2")
    assert ran.stdout.split() == ["stb3"], ran.stderr
    one = record["shares"]["shoal-h1"]
    ran = user.run([user.python, "-m", "shoal.cluster.nsexec", "--cluster", one["id"], "--run", "head", "--",
                    one["launcher"], "stb3", "hostname"], node="shoal-h1")
    assert ran.stdout.split() == ["stb3"], ran.stderr
    # One MPI job over the four boxes of both hosts, started by the MPI's own launcher.
    out = user.home / "run"
    # Each box's power is its profile's model driven by its CPU time, sampled on its host.
    bench = user.shoal("bench", "--attach", name, "--tests", "imb.PingPong", "--sizes", "64", "--nodes", "4",
                       "--power", "model", "--out", str(out), timeout=600)
    assert bench.returncode == 0, bench.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert "jobs_failed_after_points" not in manifest
    assert manifest["jobs"][f"{name}/4/4"]["hosts"] == ["stb1", "stb2", "stb3", "stb4"]
    assert manifest["power"]["nodes"] == ["stb1", "stb2", "stb3", "stb4", "switch:docsis-cmts"]
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [r["point_id"] for r in rows] == [f"{name}/4/4/imb.PingPong/64"]
    # Four boxes at 6-12 W each (idle to busy) and the head-end's 150 W, whatever they did.
    assert rows[0]["power_kind"] == "modelled" and 174 <= float(rows[0]["power_mean_W"]) <= 198, rows[0]
    # The head layout: the launcher's daemon stays in the head, and every rank is started
    # from there, those on host 2 through the relay (srun carries the rank's environment).
    out = user.home / "run-head"
    bench = user.shoal("bench", "--attach", name, "--launch", "head", "--tests", "imb.PingPong", "--sizes", "64",
                       "--nodes", "4", "--out", str(out), timeout=600)
    assert bench.returncode == 0, bench.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert "jobs_failed_after_points" not in manifest and manifest["jobs"][f"{name}/4/4"]["ranks"] == 4
    assert f"{name}/4/4/imb.PingPong/64" in (out / "results.csv").read_text()
    # Its frames crossed between the hosts' forwarders, which counted them per sender: the
    # plant is one medium on host 1, so host 2's boxes' frames are relayed both ways.
    counted = {}
    for host in ("shoal-h1", "shoal-h2"):
        for report in agent.read_reports(user.shoal("cluster", "agent", "links", "--id", name, node=host).stdout):
            counted[report["host"]] = report["links"]
    table = crosslinks.by_device(counted, record["links"], mac_of)
    assert table["stb3"]["frames"] >= 10 and table["stb4"]["frames"] >= 10, table
    assert all(peer["frames_in"] >= 10 for links in counted.values() for peer in links["peers"].values())
    assert all(row["lost"] == 0 for row in table.values())
    # Host 2's agent is lost: its share's namespaces die with it.
    lost = record["shares"]["shoal-h2"]["agent"]
    holder = json.loads((user.state_root() / two / "state.json").read_text())["entry_pid"]
    os.kill(lost["pid"], signal.SIGKILL)
    _wait(lambda: sysns.process_start_time(holder) is None, "the share's namespace holder outlived its agent")

    done = user.shoal("cluster", "down", name)
    assert done.returncode == 0, done.stderr
    # (The lost agent's share, recorded in the state root the user's commands share, is
    # reaped as a leftover by the command itself first.)
    assert done.stdout.splitlines()[-1] == f"removed {name}", done.stdout
    _wait(lambda: not set(_users_processes()) - before,
          f"left running: {[c for p, c in _users_processes().items() if p not in before]}", timeout=30)
    assert not [p for p in user.state_root().iterdir() if p.name.startswith(name)]
