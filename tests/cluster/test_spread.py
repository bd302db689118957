"""A cluster over hosts as a run sees it (``--attach ID``): mpiexec goes to the head on the
first host through an srun step and leaves the step's Slurm variables behind; what cannot run
yet is refused in one line. (Runs over two Slurm hosts under both MPIs, `work raytrace
--check` included: benchmarks/multihost_mpi.py.)"""

from __future__ import annotations

import os
import subprocess

import pytest

from shoal.cluster import inventory, spread
from shoal.errors import ShoalError


def _record(engine: str = "slurm", launcher: str | None = "/run/shoal/p-1/spread-ssh") -> dict:
    first = {"id": "p-1", "devices": ["minnowboard1"], **({"launcher": launcher} if launcher else {})}
    return {"id": "p", "dilation": 2.0,
            "hosts": {"engine": engine, "hosts": ["h1", "h2"], "addresses": {"h1": "10.0.0.1", "h2": "10.0.0.2"},
                      "job_id": "42"},
            "shares": {"h1": first, "h2": {"id": "p-2", "devices": ["minnowboard2"], "launcher": "x"}},
            "nodes": {"minnowboard1": {"address": "10.77.0.2"}, "minnowboard2": {"address": "10.77.0.3"}},
            "emulation": {"cpu_limit": "cgroup"}}


def test_mpiexec_runs_in_the_head_of_the_first_host_through_an_srun_step():
    cluster = spread.SpreadCluster(_record(), inventory.from_emulate("2xminnowboard"))
    prefix = cluster.head_prefix()
    assert prefix[1:7] == ["--jobid=42", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=h1", "--cpu-bind=none"]
    assert prefix[-9:-4] == ["--cluster", "p-1", "--run", "head", "--"]
    assert cluster.launcher == "/run/shoal/p-1/spread-ssh" and cluster.dilation == 2.0 and cluster.limited()


def test_the_head_leaves_the_steps_slurm_variables_but_not_slurm_conf():
    # The prefix's last words, as the head runs them, in front of `env`.
    tail = spread.SpreadCluster(_record(), inventory.from_emulate("2xminnowboard")).head_prefix()[-4:]
    seen = subprocess.run([*tail, "env"], capture_output=True, text=True, check=True,
                          env={**os.environ, "SLURM_JOB_ID": "42", "SLURM_NODELIST": "h1", "SLURM_CONF": "/x.conf"})
    names = {line.split("=", 1)[0] for line in seen.stdout.splitlines()}
    assert "SLURM_CONF" in names and not {"SLURM_JOB_ID", "SLURM_NODELIST"} & names
    assert "PATH" in names


def test_what_cannot_run_across_hosts_yet_is_refused_in_one_line():
    devices = inventory.from_emulate("2xminnowboard")
    with pytest.raises(ShoalError, match="ssh inventory: runs across them start under Slurm only"):
        spread.SpreadCluster(_record("ssh"), devices).head_prefix()
    with pytest.raises(ShoalError, match="devices on one host only; attach to its share"):
        _ = spread.SpreadCluster(_record(launcher=None), devices).launcher
