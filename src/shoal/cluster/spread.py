"""A cluster spread over hosts as the machine that brought it up sees it, for runs
(``--attach ID``): its devices and dilation from the record, and how ranks start there.

``mpiexec`` runs in the cluster's head, on the first host with devices, started there the
way the engine reaches a host (an ``srun --overlap`` step on that node of the allocation);
it starts its daemons in the devices through the launcher helper the agents wrote
(``spreadexec``). Over an ssh inventory it is started over ssh (``headexec``: quoted, with
the launch's environment, and stopped when this side stops).
"""

from __future__ import annotations

import shlex
import sys

from shoal import environment, proc
from shoal.cluster import hostengine, remote
from shoal.cluster.inventory import Inventory
from shoal.errors import ShoalError


# mpiexec in the head is no Slurm step's launcher: without the step's variables, it takes
# the devices it is given instead of the allocation's nodes (one MPI refuses them otherwise).
# SLURM_CONF stays: the launcher helper's srun reads it.
_NOT_A_STEP = 'unset $(env | sed -n "/^SLURM_CONF=/d; s/^\\(SLURM_[A-Za-z0-9_]*\\)=.*/\\1/p"); exec "$@"'


class SpreadCluster:
    """The record of a cluster over hosts, read for a run."""

    def __init__(self, record: dict, inventory: Inventory) -> None:
        self.id = record["id"]
        self.record = record
        self.inventory = inventory
        self.dilation = float(record.get("dilation", 1.0))
        self.head_host, self.head_share = next(iter(record["shares"].items()))

    @property
    def launcher(self) -> str:
        """The launcher helper on the head's host (``spreadexec``), for mpiexec."""
        launcher = self.head_share.get("launcher")
        if not launcher:
            raise ShoalError(f"cluster {self.id} has devices on one host only; attach to its share "
                             f"({self.head_share['id']}) on {self.head_host}")
        return launcher

    def rank_prefix(self, rank_variable: str, layout: str) -> list[str]:
        """argv prefix that starts a rank, from the head, in the device its rank number
        (the MPI's ``rank_variable``) falls on in ``layout`` ("NODE:K,..."), on whichever
        host (the head layout: the launcher's daemon in the head starts every rank)."""
        return [self.launcher, "--rank", rank_variable, layout, "--"]

    def in_share(self, host: str) -> list[str]:
        """argv prefix that runs one shell command line (the last argument, as ssh takes it)
        in the head of ``host``'s share, on that host: a device's power sampler there."""
        enter = [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", self.record["shares"][host]["id"], "head"]
        engine = hostengine.from_record(self.record["hosts"])
        if engine.kind == hostengine.SLURM:
            return [*self._srun_on(engine, host), *enter]
        state = [f"{environment.STATE_DIR.name}={environment.STATE_DIR.get()}"] if environment.STATE_DIR.is_set() else []
        return [remote.ssh_program(), "-o", "BatchMode=yes", engine.addresses[host], shlex.join(["env", *state, *enter])]

    @staticmethod
    def _srun_on(engine: hostengine.Engine, host: str) -> list[str]:
        return [proc.tool("srun", "Slurm job steps", "slurm-client"), f"--jobid={engine.job_id}", "--overlap",
                "--nodes=1", "--ntasks=1", f"--nodelist={host}", "--cpu-bind=none", "--quiet"]

    def head_prefix(self) -> list[str]:
        """argv prefix that runs a program (mpiexec) in the cluster's head, on its host."""
        engine = hostengine.from_record(self.record["hosts"])
        if engine.kind != hostengine.SLURM:  # over ssh, quoted, with the launch's environment
            from shoal.mpi import kinds

            return [sys.executable, "-m", "shoal.cluster.headexec",
                    "--forward", ",".join(("SHOAL_", *kinds.launcher_prefixes())),
                    "--local", ",".join(kinds.host_settings()), engine.addresses[self.head_host],
                    self.head_share["id"], "--", "/bin/sh", "-c", _NOT_A_STEP, "sh"]
        return [*self._srun_on(engine, self.head_host),
                sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", self.head_share["id"], "--run", "head",
                "--", "/bin/sh", "-c", _NOT_A_STEP, "sh"]

    def limited(self) -> bool:
        """Whether the devices' CPUs are held to their budgets (cgroups or user space)."""
        return self.record.get("emulation", {}).get("cpu_limit", "none") != "none"

    def describe(self) -> dict:
        return {"id": self.id, **self.inventory.describe(), "hosts": self.record["hosts"],
                "shares": self.record["shares"],
                "addresses": {n: v.get("address") for n, v in self.record.get("nodes", {}).items()},
                "emulation": self.record.get("emulation", {}), "time": self.record.get("time", {})}
