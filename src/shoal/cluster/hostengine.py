"""The hosts an emulated cluster spreads over, and how a command reaches each of them.

Two engines hand out hosts: a Slurm allocation (the hosts of ``SLURM_JOB_NODELIST``; one
``srun`` step with one task per host runs a command on all of them at once) and an ssh
inventory (``mode = "ssh"``; one ssh per host). shoal never schedules hosts itself.

Each engine answers the same three asks: ``hosts`` (their names, in order), ``commands(argv)``
(the command lines that run ``argv`` once on every host) and ``describe()`` (what a record
keeps so that a later command, ``cluster down``, reaches the same hosts again).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from shoal import environment, proc
from shoal.cluster import inventory, remote
from shoal.errors import ShoalError

SLURM = "slurm"
SSH = "ssh"
# How the agent on a host learns its name under Slurm (one srun step for every host).
SLURM_NODE_NAME = "SLURMD_NODENAME"


@dataclass
class Engine:
    """The hosts and how to reach them (``SLURM`` or ``SSH``)."""

    kind: str
    hosts: list[str]
    addresses: dict[str, str] = field(default_factory=dict)  # ssh: host -> address
    job_id: str = ""  # slurm: the allocation the steps run in

    def commands(self, argv: list[str]) -> list[list[str]]:
        """Command lines that run ``argv`` once on every host. Under Slurm, one step with a
        task per host (each finds its host by ``SLURMD_NODENAME``); over ssh, one per host,
        each told its host's name (``--host``). Steps overlap: the agents' step, running all
        along, holds no CPU that a later step (an MPI job, ``cluster down``) would wait for;
        and its task is bound to no CPU, so that the devices' cores spread over the node's.
        What the command gets on stdin goes to every host (srun ``--input=all``, each ssh)."""
        if self.kind == SLURM:
            count = str(len(self.hosts))
            return [[proc.tool("srun", "Slurm job steps", "slurm-client"), f"--jobid={self.job_id}",
                     f"--nodes={count}", f"--ntasks={count}", "--ntasks-per-node=1", "--overlap", "--cpu-bind=none",
                     "--input=all",
                     "--kill-on-bad-exit=0", f"--nodelist={','.join(self.hosts)}", *argv]]
        ssh = remote.ssh_program()
        # Where clusters are recorded goes along, as srun passes the whole environment.
        state_root = [f"{environment.STATE_DIR.name}={environment.STATE_DIR.get()}"] \
            if environment.STATE_DIR.is_set() else []
        return [[ssh, "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", self.addresses[host],
                 shlex.join(["env", *state_root, *argv, "--host", host])] for host in self.hosts]

    def describe(self) -> dict:
        return {"engine": self.kind, "hosts": list(self.hosts), "addresses": dict(self.addresses),
                "job_id": self.job_id}


def from_option(value: str) -> Engine:
    """``--hosts slurm`` (inside an allocation) or ``--hosts FILE`` (an ssh inventory)."""
    if value == SLURM:
        hosts = remote.allocation_hosts()
        return Engine(SLURM, hosts, job_id=os.environ["SLURM_JOB_ID"])
    hosts_file = inventory.load(value)
    if hosts_file.mode != SSH:
        raise ShoalError(f"--hosts {value}: mode is {hosts_file.mode!r}; give an ssh inventory "
                         "(mode = \"ssh\", one node per host) or 'slurm' inside an allocation")
    return Engine(SSH, [n.name for n in hosts_file.nodes], {n.name: n.address for n in hosts_file.nodes})


def from_record(described: dict) -> Engine:
    return Engine(described["engine"], list(described["hosts"]), dict(described.get("addresses", {})),
                  described.get("job_id", ""))
