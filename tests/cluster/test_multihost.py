"""One emulated cluster spread over the two hosts of a real Slurm (``slurm_hosts``): inside an
allocation, ``cluster up --hosts slurm`` starts one agent per host with srun, each host builds
its share of the devices in its own namespaces at one dilation, its devices reach the other
host's through the forwarders (one address plan, frames over UDP, counted per sending device),
a cable plant split over both keeps one channel on the host holding most of its boxes (the
other relays its boxes' frames there), the underlay and the hosts' clocks are measured and
recorded, and ``cluster down`` leaves
nothing on either host, even after one host's agent was lost; a host that cannot build its
share, or a link faster than the underlay, is named, and nothing is kept. (Kill points at
random moments of up and down: benchmarks/multihost_kill_points.py; ping-pong across hosts
against the link model: benchmarks/multihost_pingpong.py.)
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path

import pytest
from tests.cluster.slurm_hosts import PROGRAMS, slurm_hosts

from shoal import proc
from shoal.cluster import agent, crosslinks, state, sysns
from shoal.cluster.emulated import mac_of

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(Path(p).exists() for p in PROGRAMS),
    reason="a Slurm whose hosts are namespaces needs root (network, UTS and mount namespaces) and "
           "Debian's slurmctld, slurmd, slurm-client and munge (setup installs them as root)")

SHOAL = [sys.executable, "-m", "shoal"]


class Allocation:
    """A Slurm of two namespaced hosts and one allocation of both, as a login shell has it."""

    def __init__(self, hosts) -> None:
        self.hosts = hosts
        granted = hosts.run(["salloc", "-N2", "--no-shell"]).stderr
        self.job = granted.split("Granted job allocation")[1].split()[0]
        self.env = {"SLURM_JOB_ID": self.job, "SLURM_JOB_NODELIST": "shoal-h[1-2]"}
        self.names: list[str] = []  # the clusters its tests named, downed at the end whatever happened

    def name(self) -> str:
        self.names.append("m" + secrets.token_hex(3))
        return self.names[-1]

    def shoal(self, *args: str, node: str | None = None):
        where = {"node": node} if node else {}
        return self.hosts.run([*SHOAL, *args], env=self.env, check=False, timeout=300, **where)

    def namespaces(self, host: str) -> list[str]:
        """The network namespace files on a host (its own /run/netns)."""
        netns = self.hosts.where / host / "run" / "netns"
        return sorted(os.listdir(netns)) if netns.is_dir() else []


@pytest.fixture(scope="module")
def allocation():
    with slurm_hosts(2) as hosts:
        made = Allocation(hosts)
        try:
            yield made
        finally:  # a failed test's cluster: its forwarders and cgroups would outlive the hosts
            for name in made.names:
                if state.read(name) is not None:
                    made.shoal("cluster", "down", name)


def _wait(ready, what: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < end, what
        time.sleep(0.05)


ECHO_PORT = 5001
ECHO_SERVER = ("import socket; s = socket.create_server(({address!r}, {port})); s.settimeout(120); "
               "c, _ = s.accept(); c.sendall(c.recv(64)); c.close()")
ECHO_CLIENT = """
import socket, time
for _ in range(1200):  # until the server listens
    try:
        c = socket.create_connection(({address!r}, {port}), timeout=60)
        break
    except ConnectionRefusedError:
        time.sleep(0.05)
c.sendall(b"across hosts")
print(c.recv(64).decode())
"""
# A port nothing listens on: the device's own kernel answers (a reset), through its link.
REFUSED = """
import socket
try:
    socket.create_connection(({address!r}, 9), timeout=60)
except ConnectionRefusedError:
    print("refused")
"""


def _enter(share: str, member: str) -> list[str]:
    """The prefix that runs a program in a member (a device, or ``head``) of a share, on its host."""
    return [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", share, "--run", member, "--"]


def _in(share: str, member: str, code: str) -> list[str]:
    """Run Python ``code`` in a member of a share."""
    return [*_enter(share, member), sys.executable, "-c", code]


def _echo_between_heads(allocation, record: dict) -> str:
    """What host 1's head gets back from an echo server in host 2's head (unlimited CPUs:
    a set-top box's budget would take seconds to start Python)."""
    one, two = (record["shares"][h]["id"] for h in ("shoal-h1", "shoal-h2"))
    address = state.read(two)["head"]["address"]
    serving = allocation.hosts.start(_in(two, "head", ECHO_SERVER.format(address=address, port=ECHO_PORT)),
                                     node="shoal-h2")
    try:
        done = allocation.hosts.run(_in(one, "head", ECHO_CLIENT.format(address=address, port=ECHO_PORT)),
                                    node="shoal-h1", timeout=150, check=False)
        assert serving.wait(timeout=60) == 0, serving.stderr.read()
    finally:
        if serving.poll() is None:
            serving.kill()
        serving.communicate()
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _gone(process: dict) -> bool:
    info = proc.stat(process["pid"])
    return info is None or not info.alive or info.start != process["start"]


def test_up_spreads_the_devices_over_both_hosts_and_down_leaves_nothing_even_of_a_lost_agent(allocation):
    name = allocation.name()
    done = allocation.shoal("cluster", "up", "--emulate", "4xstb", "--hosts", "slurm", "--name", name,
                            "--host-speed", "1", "--no-calibrate", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    # Placed by CPU budgets against each host's capacity (one CPU each here): two boxes each.
    assert {h: s["devices"] for h, s in record["shares"].items()} == {
        "shoal-h1": ["stb1", "stb2"], "shoal-h2": ["stb3", "stb4"]}
    assert [n["host"] for n in record["nodes"].values()] == ["shoal-h1"] * 2 + ["shoal-h2"] * 2
    shares = {h: state.read(s["id"]) for h, s in record["shares"].items()}
    state_launchers = record["launchers"]  # srun, left running to hold the agents
    assert state_launchers and not any(_gone(launcher) for launcher in state_launchers)
    # One dilation for all hosts, each share a one-host cluster built as today.
    assert {s["dilation"] for s in shares.values()} == {record["dilation"]}
    for host, share in shares.items():
        devices = record["shares"][host]["devices"]
        assert allocation.namespaces(host) == sorted(share["netns"]), host
        assert sorted(share["nodes"]) == devices
        assert share["cgroups"] and all(Path(g).is_dir() for g in share["cgroups"])
        assert sysns.process_start_time(share["forwarder"]["pid"]) == share["forwarder"]["start"]
        ran = allocation.hosts.run([sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", share["id"],
                                    "--run", devices[-1], "--", "hostname"], node=host)
        assert ran.stdout.split() == [devices[-1]]
    # One address plan: no two devices share an address. Host 1's head talks to host 2's, and
    # stb3 on host 2 answers host 1's head through its own link, over both forwarders.
    addresses = [n["address"] for n in record["nodes"].values()]
    assert len(set(addresses)) == len(addresses) == 4
    assert _echo_between_heads(allocation, record) == "across hosts"
    one = record["shares"]["shoal-h1"]["id"]
    refused = allocation.hosts.run(_in(one, "head", REFUSED.format(address=record["nodes"]["stb3"]["address"])),
                                   node="shoal-h1", timeout=90, check=False)
    assert refused.stdout.split() == ["refused"], refused.stderr
    # The plant is one medium over both hosts: host 1 holds as many of its boxes as host 2
    # and comes first, so its forwarder runs the links of stb3 and stb4 too, and host 2's
    # relays their frames. Host 2's head reaching stb4, on its own host, goes through host 1.
    assert record["links"]["split"] == {"docsis-27m": {
        "owner": "shoal-h1", "hosts": ["shoal-h1", "shoal-h2"], "devices": ["stb3", "stb4"],
        "lookahead_ns": round(record["dilation"] * 0.5e6)}}
    two = record["shares"]["shoal-h2"]["id"]
    refused = allocation.hosts.run(_in(two, "head", REFUSED.format(address=record["nodes"]["stb4"]["address"])),
                                   node="shoal-h2", timeout=90, check=False)
    assert refused.stdout.split() == ["refused"], refused.stderr
    counted = {}
    for host in ("shoal-h1", "shoal-h2"):
        for report in agent.read_reports(allocation.shoal("cluster", "agent", "links", "--id", name,
                                                          node=host).stdout):
            counted[report["host"]] = report["links"]
    table = crosslinks.by_device(counted, record["links"], mac_of)
    # Each host's forwarder counted, per sending member of the other host, what came in:
    # stb3's reset at host 1, and host 1's head's connection attempts and data at host 2.
    assert table["stb3"]["host"] == "shoal-h2" and table["stb3"]["frames"] >= 1
    assert table["shoal-head"]["host"] == "shoal-h1" and table["shoal-head"]["frames"] >= 4
    # stb4's reset relayed to host 1 and host 2's head's attempts sent there, both through the
    # plant's channel on host 1, and each attempt delivered back to stb4 on host 2.
    relayed = {h: counted[h]["relayed"].get(str(record["links"]["hosts"]["shoal-h2"]["indices"]["stb4"]))
               for h in counted}
    assert relayed["shoal-h1"]["frames"] >= 1 and relayed["shoal-h2"]["frames"] >= 1, relayed
    assert table["shoal-head-2"]["frames"] >= 1
    assert all(row["lost"] == 0 for row in table.values())  # one machine's underlay loses nothing
    # The launcher helper MPI launchers call as ssh, run from the cluster's head on host 1,
    # starts a command in a device of its own host, and through an srun step in one of host 2.
    for device in ("stb1", "stb3"):
        ran = allocation.hosts.run([*_enter(one, "head"), record["shares"]["shoal-h1"]["launcher"], device,
                                    "hostname"], node="shoal-h1", check=False)
        assert ran.stdout.split() == [device], ran.stderr
    ran = allocation.hosts.run([*_enter(one, "head"), record["shares"]["shoal-h1"]["launcher"], "stb9", "hostname"],
                               node="shoal-h1", check=False)
    assert ran.returncode == 255 and "'stb9' is not a device of cluster" in ran.stderr, ran.stderr
    # The underlay and the clocks as each host's forwarder measured the other's (one kernel
    # here: the clocks are one, so each offset is within half its probe's round trip).
    for a, b in (("shoal-h1", "shoal-h2"), ("shoal-h2", "shoal-h1")):
        seen = record["time"]["underlay"][a][b]
        assert seen["probes"] >= 32 and 0 < seen["rtt_min_s"] <= seen["rtt_median_s"] <= seen["rtt_max_s"]
        assert abs(seen["monotonic_offset_s"]) <= seen["rtt_min_s"] / 2 + 1e-6
        assert abs(seen["clock_offset_s"]) <= seen["rtt_min_s"] / 2 + 1e-5
    assert set(record["time"]["clock_offset_s"]) == {"shoal-h1", "shoal-h2"}
    # One start time: the last share's readiness on the first host's clock, and on each.
    started, ready = record["time"]["started"], record["time"]["ready_s"]
    offset = record["time"]["clock_offset_s"]["shoal-h2"]
    assert started["first_host_s"] == max(ready["shoal-h1"], ready["shoal-h2"] - offset)
    assert record["created"] <= started["first_host_s"] <= time.time()
    assert started["by_host_s"] == {"shoal-h1": started["first_host_s"],
                                    "shoal-h2": started["first_host_s"] + offset}
    assert all("chrony" in h["chrony"] for h in record["time"]["hosts"].values())
    status = allocation.shoal("cluster", "status", "--json")
    assert {r["id"] for r in json.loads(status.stdout)} >= {name, *(s["id"] for s in shares.values())}
    # Host 2's agent is lost (killed as by the OOM killer): its share stays, recorded there.
    lost = record["shares"]["shoal-h2"]["agent"]
    os.kill(lost["pid"], signal.SIGKILL)
    _wait(lambda: _gone(lost), "the agent did not die")
    assert allocation.namespaces("shoal-h2") == sorted(shares["shoal-h2"]["netns"])

    done = allocation.shoal("cluster", "down", name)
    assert done.returncode == 0, done.stderr
    # (A leftover of another test, in the state root they share, may be reaped first.)
    assert done.stdout.splitlines()[-1] == f"removed {name}", done.stdout
    for host, share in shares.items():
        assert allocation.namespaces(host) == [], host
        assert not [g for g in share["cgroups"] if Path(g).exists()], host
        assert _gone(share["forwarder"]) and _gone(record["shares"][host]["agent"]), host
    assert all(_gone(launcher) for launcher in state_launchers)
    assert all(state.read(i) is None for i in (name, *(s["id"] for s in shares.values())))


def test_a_host_that_cannot_build_its_share_is_named_and_the_other_keeps_nothing(allocation):
    name = allocation.name()
    # Host 2's share is already taken by a cluster of that name: its agent refuses it.
    taken = {"id": f"{name}-2", "owner_pid": os.getpid(), "owner_start": sysns.process_start_time(os.getpid()),
             "persistent": True, "netns": [], "uts": [], "cgroups": [], "nodes": {}, "inventory": {}}
    state.write(taken)
    try:
        done = allocation.shoal("cluster", "up", "--emulate", "4xstb", "--hosts", "slurm", "--name", name,
                                "--host-speed", "1", "--no-calibrate")
    finally:
        state.remove(taken)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "host shoal-h2" in lines[0] and "already up" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert allocation.namespaces("shoal-h1") == [] and allocation.namespaces("shoal-h2") == []
    assert state.read(name) is None and state.read(f"{name}-1") is None



def test_a_link_between_hosts_faster_than_the_underlay_is_refused_and_nothing_is_kept(allocation, tmp_path):
    name = allocation.name()
    cluster = tmp_path / "instant.toml"
    cluster.write_text('[cluster]\nmode = "emulated"\n'
                       '[[nodes]]\nname = "q1"\nprofile = "minnowboard"\nlink = "instant"\n'
                       '[[nodes]]\nname = "q2"\nprofile = "minnowboard"\nlink = "instant"\n'
                       '[links.instant]\nrate_bps = 1e9\nlatency_s = 1e-7\n')
    done = allocation.shoal("cluster", "up", "--cluster", str(cluster), "--hosts", "slurm", "--name", name,
                            "--host-speed", "1", "--no-calibrate", "--dilation", "1")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "q1 on shoal-h1 and q2 on shoal-h2" in lines[0] and "latency of 0.1 us" in lines[0], lines[0]
    assert "one-way delay over D" in lines[0] and "--dilation" in lines[0], lines[0]
    assert allocation.namespaces("shoal-h1") == [] and allocation.namespaces("shoal-h2") == []
    assert state.read(name) is None and state.read(f"{name}-1") is None and state.read(f"{name}-2") is None

