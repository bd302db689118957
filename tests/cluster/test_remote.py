"""ssh pre-flight and Slurm allocations, with a fake ssh and a fake scontrol on PATH.

These cannot reach real remote hosts here: the fake ssh runs the probe
locally (so the happy path compares this machine with itself) or fails the
way ssh does for hosts named 'down*'.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shoal import cluster, stackfacts
from shoal.cluster import inventory, remote
from shoal.errors import ShoalError

FAKE_SSH = """#!/bin/sh
# Fake ssh: skip options, refuse hosts named down*, run the command here.
while [ $# -gt 0 ]; do
  case "$1" in -o|-p|-l) shift 2 ;; -*) shift ;; *) break ;; esac
done
host="$1"; shift
echo "$host" >> "$FAKE_SSH_LOG"
case "$host" in down*) echo "ssh: connect to host $host port 22: No route to host" >&2; exit 255 ;; esac
exec /bin/sh -c "$*"
"""


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ssh = bindir / "ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSH_LOG", str(tmp_path / "ssh.log"))
    monkeypatch.delenv("SHOAL_SSH", raising=False)
    return bindir


def ssh_inventory(tmp_path, names):
    text = '[cluster]\nmode = "ssh"\n' + "".join(
        f'[[nodes]]\nname = "{n}"\nprofile = "rpi3"\n' for n in names)
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    return inventory.load(path)


def test_preflight_one_line_per_failing_host(tmp_path, fake_bin, mpich):
    inv = ssh_inventory(tmp_path, ["node1", "down1", "node2", "down2"])
    binary = tmp_path / "prog"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    problems = remote.preflight(inv, mpich, str(binary))
    assert len(problems) == 2
    assert problems[0].startswith("down1: ssh failed (ssh: connect to host down1")
    assert problems[1].startswith("down2: ")
    assert sorted(Path(tmp_path / "ssh.log").read_text().split()) == ["down1", "down2", "node1", "node2"]
    missing = remote.preflight(ssh_inventory(tmp_path, ["node1"]), mpich, str(tmp_path / "absent"))
    assert missing == [f"node1: {tmp_path / 'absent'} is missing; copy it there or build on a shared filesystem"]


def test_preflight_reads_each_hosts_own_stack(tmp_path, fake_bin, mpich):
    stacks: dict[str, dict] = {}
    assert remote.preflight(ssh_inventory(tmp_path, ["node1", "node2"]), mpich, None, stacks) == []
    assert set(stacks) == {"node1", "node2"}   # here the fake hosts are this machine
    assert stacks["node2"]["kernel"] == stackfacts.kernel_release()
    assert stacks["node1"]["distribution"] == stackfacts.distribution()


def test_preflight_notices_a_different_mpi(tmp_path, fake_bin, mpich, openmpi):
    # The fake host answers with this machine's MPICH; ask as if we used Open MPI's mpiexec
    # but the remote shell reports MPICH's version string.
    wrapper = fake_bin / "ssh"
    wrapper.write_text(FAKE_SSH.replace('exec /bin/sh -c "$*"',
                                        'echo "mpi=HYDRA build details: other"; echo shoal=0.1.0'))
    problems = remote.preflight(ssh_inventory(tmp_path, ["node1"]), openmpi)
    assert len(problems) == 1 and "MPI differs" in problems[0]


def test_ssh_cluster_jobs_go_to_inventory_addresses(tmp_path, mpich, openmpi):
    path = tmp_path / "inv.toml"
    path.write_text('[[nodes]]\nname = "a"\naddress = "10.1.0.5"\nprofile = "nuc"\nslots = 2\n'
                    '[[nodes]]\nname = "b"\naddress = "10.1.0.6"\nprofile = "nuc"\n')
    with cluster.open(inventory=str(path)) as c:
        argv, _ = c.job(mpich, nodes=2, ranks_per_node=2, argv=["prog"]).command()
        assert argv[argv.index("-hosts") + 1] == "10.1.0.5:2,10.1.0.6:2"
        argv, _ = c.job(openmpi, nodes=1, argv=["prog"]).command()
        assert argv[argv.index("--host") + 1] == "10.1.0.5:1"
        assert c.describe()["mode"] == "ssh"


def test_nodelist_expansion():
    assert remote.expand_nodelist("node[01-03,7],gpu1") == ["node01", "node02", "node03", "node7", "gpu1"]
    assert remote.expand_nodelist("rack[1-2]-n[0-1]") == ["rack1-n0", "rack1-n1", "rack2-n0", "rack2-n1"]
    assert remote.expand_nodelist("single") == ["single"]
    with pytest.raises(ShoalError, match="cannot read"):
        remote.expand_nodelist("n[3-1]")


def test_slurm_allocation_with_fake_scontrol(tmp_path, monkeypatch, mpich):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    scontrol = bindir / "scontrol"
    scontrol.write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] || exit 1\n'
                        'echo "$3" > "$SCONTROL_LOG"\nprintf "c1\\nc2\\nc3\\n"\n')
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("SCONTROL_LOG", str(tmp_path / "scontrol.log"))
    path = tmp_path / "slurm.toml"
    path.write_text('[cluster]\nmode = "slurm"\n[[nodes]]\nname = "c2"\nprofile = "nuc"\n'
                    '[[nodes]]\nname = "default"\nprofile = "rpi3"\n')
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(ShoalError, match="not inside a Slurm allocation"):
        cluster.open(inventory=str(path))
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "c[1-3]")
    with cluster.open(inventory=str(path)) as c:
        assert [(n.name, n.profile.name) for n in c.inventory.nodes] == [
            ("c1", "nuc"), ("c2", "nuc"), ("c3", "nuc")]
        argv, _ = c.job(mpich, nodes=3, argv=["prog"]).command()
        assert argv[argv.index("-hosts") + 1] == "c1:1,c2:1,c3:1"
    assert (tmp_path / "scontrol.log").read_text().strip() == "c[1-3]"
    # Without scontrol the built-in parser reads the same syntax.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "c[1-2]")
    assert remote.allocation_hosts() == ["c1", "c2"]
