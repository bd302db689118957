"""A SIGKILL at every directory `cluster up` makes (each mkdir that does make one): whatever
was made before the kill is recorded, and the next `cluster down` removes it (strace's fault
injection kills the process at the Nth mkdir, as a crash or an OOM kill would)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shoal.cluster import cpulimit, state

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the host's cgroups and namespaces, where these clusters leave their traces, need root; an ordinary user's cluster lives in a user namespace held by its own processes, and its up/status/attach/down are tested in tests/user")


def shoal_cgroups(cluster_id: str) -> set[str]:
    """Every directory of the cluster's under shoal's cgroup bases (cpu, cpuset, cpuacct)."""
    layout = cpulimit.detect()
    found = set()
    for base in (layout.cpu_base, layout.cpuset_base, layout.acct_base):
        if base is not None and (Path(base) / cluster_id).is_dir():
            top = Path(base) / cluster_id
            found.update(str(p) for p in [top, *top.rglob("*")] if p.is_dir())
    return found


def netns(cluster_id: str) -> set[str]:
    names = os.listdir(state.NETNS_DIR) if state.NETNS_DIR.is_dir() else []
    return {name for name in names if name.startswith(f"shoal-{cluster_id}-")}


# One device: a second one's directories (its cgroups under each controller) would only
# repeat the first one's kill points, at two Python starts each.
UP = ["-m", "shoal", "cluster", "up", "--emulate", "1xminnowboard", "--no-calibrate", "--host-speed", "1"]


def _made_directories(name: str, log: Path) -> list[tuple[str, int]]:
    """The calls of a whole `cluster up` that made a directory, each as (syscall, its nth
    call): a call that found its directory there already makes nothing to leave behind."""
    up = subprocess.run(["strace", "-qq", "-o", str(log), "-e", "trace=mkdir,mkdirat",
                         sys.executable, *UP, "--name", name], capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stderr
    assert state.read(name)["persistent"] and netns(name), "the cluster is up, by its name"
    down = subprocess.run([sys.executable, "-m", "shoal", "cluster", "down", name],
                          capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    calls: dict[str, int] = {}
    made = []
    for line in log.read_text().splitlines():
        syscall = line.split("(", 1)[0]
        if syscall not in ("mkdir", "mkdirat"):
            continue  # a signal's line
        calls[syscall] = calls.get(syscall, 0) + 1
        if line.rstrip().endswith("= 0"):
            made.append((syscall, calls[syscall]))
    return made


def test_a_kill_at_any_mkdir_of_cluster_up_leaves_nothing_after_down(tmp_path):
    assert shutil.which("strace"), "strace is installed by make setup"
    # Named, so that only what this cluster makes is counted: the cluster id names every
    # namespace, cgroup and record (another suite's clusters come and go on a shared host).
    name = f"k{os.getpid() % 10**6}"
    assert not shoal_cgroups(name) and not netns(name) and state.read(name) is None
    made = _made_directories(name, tmp_path / "mkdir.log")
    # The state directory, the device's cgroups under each controller, the head's and the
    # switch's were each a kill point.
    assert len(made) > 6, made
    for syscall, when in made:  # killed as it is about to make each directory
        up = subprocess.run(["strace", "-qq", "-o", "/dev/null", "-e", "trace=mkdir,mkdirat",
                             "-e", f"inject={syscall}:signal=KILL:when={when}",
                             sys.executable, *UP, "--name", name], capture_output=True, text=True, timeout=120)
        assert up.returncode != 0, f"cluster up made fewer directories than before (kill at {syscall} #{when})"
        # What the next `down` does with a crashed one.
        down = subprocess.run([sys.executable, "-m", "shoal", "cluster", "down"],
                              capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stderr
        assert not shoal_cgroups(name), f"cgroups left after a kill at {syscall} #{when}"
        assert not netns(name), f"namespaces left after a kill at {syscall} #{when}"
        assert state.read(name) is None, f"a state record left after a kill at {syscall} #{when}"
