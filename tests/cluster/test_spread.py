"""A cluster over hosts as a run sees it (``--attach ID``): mpiexec goes to the head on the
first host through an srun step and leaves the step's Slurm variables behind; what cannot run
yet is refused in one line. (Runs over two Slurm hosts under both MPIs, `work raytrace
--check` included: benchmarks/multihost_mpi.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal.cluster import headexec, inventory, spread
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


def test_over_ssh_mpiexec_goes_to_the_head_quoted_with_the_launchs_environment(tmp_path):
    prefix = spread.SpreadCluster(_record("ssh"), inventory.from_emulate("2xminnowboard")).head_prefix()
    assert prefix[1:3] == ["-m", "shoal.cluster.headexec"] and prefix[7:10] == ["10.0.0.1", "p-1", "--"]
    forward, local = prefix[4].split(","), prefix[6].split(",")
    assert prefix[3] == "--forward" and {"SHOAL_", "MPIR_", "OMPI_", "OPAL_", "PRTE_"} <= set(forward)
    assert prefix[5] == "--local" and local == ["HYDRA_IFACE"]  # the head's interface is its eth0
    # What the head's host gets: a fake ssh (SHOAL_SSH) runs the line with a local shell.
    fake = tmp_path / "ssh"
    fake.write_text('#!/bin/sh\nshift 3\nexec sh -c "$1"\n')  # -o BatchMode=yes ADDRESS LINE
    fake.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "SHOAL_SSH": str(fake), "MPIR_CVAR_X": "a b", "UNRELATED": "1",
           "HYDRA_IFACE": "enp1s0"}
    argv = headexec.command("10.0.0.1", [], ["sh", "-c", 'printf "%s|" "$@"; env', "sh", "a  b", "$(x)", ";"], env,
                            tuple(forward), tuple(local))
    assert argv[:4] == [str(fake), "-o", "BatchMode=yes", "10.0.0.1"]
    # Its stdin held open all along, as headexec holds it (its end stops the command).
    # The remote side starts from an environment of its own: only what the line carries.
    remote_env = {"PATH": "/usr/bin:/bin"}
    ran = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=remote_env, stdin=subprocess.PIPE)
    out = ran.stdout.read()
    assert ran.wait(timeout=60) == 0
    ran.stdin.close()
    assert out.startswith("a  b|$(x)|;|"), out
    names = dict(line.split("=", 1) for line in out.split("|")[-1].splitlines() if "=" in line)
    assert names["MPIR_CVAR_X"] == "a b" and names["SHOAL_SSH"] == str(fake)
    assert "UNRELATED" not in names and "HYDRA_IFACE" not in names  # the head's is its eth0


def test_over_ssh_a_job_stopped_here_stops_on_the_head_too(tmp_path):
    fake = tmp_path / "ssh"
    fake.write_text('#!/bin/sh\nshift 3\nexec sh -c "$1"\n')
    fake.chmod(0o755)
    marker = tmp_path / "pid"
    env = {"PATH": os.environ["PATH"], "SHOAL_SSH": str(fake)}
    ssh = subprocess.Popen(headexec.command("h", [], ["sh", "-c", f"echo $$ > {marker}; exec sleep 300"], env,
                                            ("SHOAL_",)), stdin=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text().strip()):
        assert time.monotonic() < deadline and ssh.poll() is None
        time.sleep(0.02)
    remote = int(marker.read_text())
    ssh.stdin.close()  # what headexec does when it is stopped, and what its death does
    assert ssh.wait(timeout=60) != 0
    deadline = time.monotonic() + 60
    while os.path.exists(f"/proc/{remote}") and "zombie" not in Path(f"/proc/{remote}/status").read_text():
        assert time.monotonic() < deadline, "the command on the head outlived the connection"
        time.sleep(0.02)


def test_headexec_stopped_here_stops_the_command_on_the_head_and_passes_on_its_status(tmp_path):
    fake = tmp_path / "ssh"
    fake.write_text('#!/bin/sh\nshift 3\nexec sh -c "$1"\n')
    fake.chmod(0o755)
    marker = tmp_path / "pid"
    env = {**os.environ, "SHOAL_SSH": str(fake)}
    # headexec itself, the head's nsexec left out (the fake ssh runs the line here).
    run = ("import sys, shoal.cluster.headexec as h; h.in_head = lambda share: []; "
           "sys.exit(h.main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", run, "--forward", "SHOAL_", "h", "p-1", "--", "sh", "-c", "exit 7"],
                          env=env, timeout=60)
    assert done.returncode == 7
    head = subprocess.Popen([sys.executable, "-c", run, "--forward", "SHOAL_", "h", "p-1", "--", "sh", "-c",
                             f"echo $$ > {marker}; exec sleep 300"], env=env)
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text().strip()):
        assert time.monotonic() < deadline and head.poll() is None
        time.sleep(0.02)
    remote = int(marker.read_text())
    head.terminate()
    assert head.wait(timeout=60) != 0
    deadline = time.monotonic() + 60
    while os.path.exists(f"/proc/{remote}") and "zombie" not in Path(f"/proc/{remote}/status").read_text():
        assert time.monotonic() < deadline, "the command on the head outlived headexec"
        time.sleep(0.02)


def test_an_ssh_inventorys_hosts_are_watched_during_a_run_and_slurms_are_left_to_slurm():
    from shoal.cluster import liveness, session

    devices = inventory.from_emulate("2xminnowboard")
    watched = session.SpreadDevices(spread.SpreadCluster(_record("ssh"), devices)).liveness()
    assert isinstance(watched, liveness.Watch) and watched.addresses == ["10.0.0.1", "10.0.0.2"]
    left = session.SpreadDevices(spread.SpreadCluster(_record("slurm"), devices)).liveness()
    assert isinstance(left, liveness.NoWatch)


def test_what_cannot_run_across_hosts_yet_is_refused_in_one_line():
    devices = inventory.from_emulate("2xminnowboard")
    with pytest.raises(ShoalError, match="devices on one host only; attach to its share"):
        _ = spread.SpreadCluster(_record(launcher=None), devices).launcher
