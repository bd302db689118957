"""A real Slurm (Debian's slurmctld, slurmd and munged) whose hosts are namespaces on this
machine (``slurm_hosts``): jobs land on both hosts, the allocation's node list is what
shoal reads, MPI jobs run across the hosts (shoal's under ``salloc``, and ranks started
by ``srun`` itself), and nothing of the Slurm is left once it is down, even when it never
came up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.cluster.slurm_hosts import PROGRAMS, SlurmHosts, left_behind, namespace_pids, slurm_hosts

from shoal.cluster import remote

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(Path(p).exists() for p in PROGRAMS),
    reason="a Slurm whose hosts are namespaces needs root (network, UTS and mount namespaces) and "
           "Debian's slurmctld, slurmd, slurm-client and munge (setup installs them as root)")


# One Slurm per test (up in about 1.5 s): a Slurm kept between tests would be up while a
# test that looks for Slurm processes anywhere on the host runs apart from every other.
@pytest.fixture
def slurm():
    with slurm_hosts(2) as hosts:
        yield hosts


def test_a_job_on_two_nodes_runs_on_both_hosts(slurm):
    done = slurm.run(["srun", "-N2", "hostname"])
    assert sorted(done.stdout.split()) == ["shoal-h1", "shoal-h2"]


def test_the_allocations_node_list_names_both_hosts_as_shoal_reads_it(slurm):
    done = slurm.run(["srun", "-N2", "--ntasks-per-node=1", "sh", "-c", 'echo "$SLURM_JOB_NODELIST"'])
    lists = set(done.stdout.split())
    assert len(lists) == 1, done.stdout
    nodelist = lists.pop()
    assert remote.expand_nodelist(nodelist) == ["shoal-h1", "shoal-h2"]
    # Inside the allocation, as a command under salloc reads it (scontrol show hostnames).
    done = slurm.run(["salloc", "-N2", sys.executable, "-c",
                      "from shoal.cluster import remote; print(' '.join(remote.allocation_hosts()))"])
    assert done.stdout.split() == ["shoal-h1", "shoal-h2"]


def test_an_mpi_job_under_the_allocation_runs_across_both_hosts(slurm, tmp_path):
    # A ``mode = "slurm"`` inventory: shoal takes the hosts from the allocation (one template
    # node in the file stands for every host, and --nodes counts the allocation's) and MPICH's
    # launcher starts its proxies there with srun.
    inventory = tmp_path / "slurm.toml"
    inventory.write_text('[cluster]\nmode = "slurm"\n[[nodes]]\nname = "any"\nslots = 1\nprofile = "nuc"\n')
    out = tmp_path / "run"
    done = slurm.run(["salloc", "-N2", sys.executable, "-m", "shoal", "bench", "--cluster", str(inventory),
                      "--nodes", "2", "--tests", "imb.PingPong", "--sizes", "1,64K", "--budget", "0.1",
                      "--out", str(out), "--json"],
                     # Ranks held to TCP: their bytes cross the underlay, as between real hosts.
                     env={"UCX_TLS": "tcp,self"}, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert sorted(next(iter(manifest["jobs"].values()))["hosts"]) == ["shoal-h1", "shoal-h2"]
    results = json.loads(done.stdout)["results"]
    assert sorted(r["size_B"] for r in results) == [1, 65536]
    # Each host's stack, read there by an srun task and named as Slurm names the host.
    (cluster,) = manifest["clusters"].values()
    stacks = cluster["node_stacks"]
    assert sorted(stacks) == ["shoal-h1", "shoal-h2"], stacks
    assert all(stack.get("kernel") == os.uname().release for stack in stacks.values()), stacks


def test_srun_starts_the_ranks_of_an_mpi_program_on_both_hosts(slurm, mpich, tmp_path):
    # Slurm's own PMI-2 server (no mpiexec): MPICH's ranks find each other through it.
    exe, source = tmp_path / "where_rank", Path(__file__).parent / "where_rank.c"
    built = subprocess.run([str(mpich.mpicc), "-O2", "-o", str(exe), str(source)],
                           capture_output=True, text=True, env={**os.environ, **mpich.env()})
    assert built.returncode == 0, built.stderr
    done = slurm.run(["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmi2", str(exe)],
                     env={**mpich.env(), "UCX_TLS": "tcp,self"}, timeout=120)
    ranks = {int(line.split()[0]): line.split() for line in done.stdout.splitlines()}
    assert sorted(ranks) == [0, 1], done.stdout
    assert sorted(r[1] for r in ranks.values()) == ["shoal-h1", "shoal-h2"]
    assert ranks[0][2] != ranks[1][2]  # each in its host's network namespace
    assert all(r[5] == "1" for r in ranks.values())  # the Allreduce of both ranks' numbers


def _slurm_processes(netns: set[int]) -> list[str]:
    """Live Slurm and munge daemons and clients in the network namespaces ``netns`` (inode
    numbers: a namespace outlives its name while a process holds it). Only a set's own: other
    Slurm sets may run on this machine."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if os.stat(f"/proc/{pid}/ns/net").st_ino not in netns:
                continue
        except OSError:
            continue
        name, state = stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1].split()[0]
        if state != "Z" and name in ("slurmctld", "slurmd", "slurmstepd", "slurmscriptd", "munged",
                                     "srun", "salloc", "sbatch"):
            found.append(f"{pid} {name}")
    return found


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def _wait(ready, what: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < end, what
        time.sleep(0.2)


def test_down_leaves_nothing_even_with_a_job_running():
    hosts = SlurmHosts().up()
    try:
        hosts.run(["sbatch", "-N2", "-o", "/dev/null", "--wrap", "srun sleep 300"])

        def sleeping(host: str) -> bool:  # the step's task (its path resolved by Slurm) on the host
            return any(_argv(pid)[:1] == ["/usr/bin/sleep"] for pid in namespace_pids(hosts.netns(host)))
        _wait(lambda: all(sleeping(h) for h in hosts.hosts), "the job's steps never started on both hosts")
        traces = hosts.traces()
        netns = {os.stat(f"/run/netns/{name}").st_ino for name in hosts.namespaces}
        tasks = [pid for pid in traces["processes"] if _argv(pid)[:1] == ["/usr/bin/sleep"]]
        assert len(tasks) == len(hosts.hosts), traces  # the job's own processes are among those checked
    finally:
        hosts.down()
    assert left_behind(traces) == []
    _wait(lambda: not _slurm_processes(netns), f"Slurm processes left: {_slurm_processes(netns)}", timeout=10)


def test_a_slurm_that_does_not_come_up_says_why_and_leaves_nothing():
    hosts = SlurmHosts(extra_conf="NoSuchParameter=1\n")
    with pytest.raises(RuntimeError) as failed:
        hosts.up()
    message = str(failed.value)
    # Whichever daemon read the conf first and died is named, with its own words from its log.
    assert "exited" in message and "NoSuchParameter" in message, message
    assert all(p.poll() is not None for p in [*hosts.daemons.values(), *hosts.holders.values()])
    assert left_behind({"netns": hosts.namespaces, "processes": {}, "where": hosts.where}) == []


def test_a_set_whose_test_process_was_killed_is_removed_by_the_next():
    script = ("import json\n"
              "from tests.cluster.slurm_hosts import SlurmHosts\n"
              "hosts = SlurmHosts().up()\n"
              "traces = hosts.traces()\n"
              "print(json.dumps(traces), flush=True)\n"
              "import time; time.sleep(300)\n")
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    try:
        traces = json.loads(owner.stdout.readline())
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        owner.stdout.close()
    assert left_behind(traces), "the killed test process's Slurm vanished by itself"
    SlurmHosts().up().down()
    assert left_behind(traces) == []
