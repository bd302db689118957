"""The user-space CPU limit on real processes in a network namespace of their own.

Any user may run these: ``unshare -Urn`` gives the "device" a network namespace
without root. The limit's precision is measured by benchmarks/cpu_fidelity.py,
not here (no timed assertions).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from shoal import environment
from shoal.cluster import dutycycle

BURN = "import time\nwhile True: pass\n"
NAP = "import time\nwhile True: time.sleep(1)\n"


def _in_a_netns(code: str, core: int | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop(environment.DEVICE_CORE.name, None)
    if core is not None:
        env[environment.DEVICE_CORE.name] = str(core)
    return subprocess.Popen(["unshare", "-Urn", sys.executable, "-c", code], env=env)


def _netns(pid: int) -> int:
    """The process's own network namespace, once it runs the program: between unshare's
    namespace and its exec of Python, the process's environment (where the controller reads
    its core) can be unreadable, and a single scan would take it for a daemon."""
    for _ in range(200):
        try:
            inode = os.stat(f"/proc/{pid}/ns/net").st_ino
            with open(f"/proc/{pid}/comm") as fh:
                running = fh.read().strip().startswith("python")
        except OSError:
            inode, running = None, False
        if running and inode is not None and inode != os.stat("/proc/self/ns/net").st_ino:
            return inode
        time.sleep(0.01)
    raise AssertionError("the process never ran the program in its own network namespace")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


@pytest.fixture
def burners():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        try:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
        except ProcessLookupError:
            pass
        p.wait()


def test_ranks_are_found_by_namespace_and_core_and_daemons_share_one_budget(burners):
    rank0, rank1, daemon = _in_a_netns(NAP, 0), _in_a_netns(NAP, 1), _in_a_netns(NAP)
    burners += [rank0, rank1, daemon]
    # Three namespaces, one device each: a two-core device, placed by SHOAL_DEVICE_CORE.
    inode = _netns(rank0.pid)
    controller = dutycycle.Controller({inode: (0.25, 2), _netns(rank1.pid): (0.25, 2),
                                       _netns(daemon.pid): (0.25, 2)})
    controller.scan()
    cores, daemons = controller.devices[inode]
    assert cores[0].pids == {rank0.pid} and not cores[1].pids and not daemons.pids
    cores, daemons = controller.devices[_netns(rank1.pid)]
    assert cores[1].pids == {rank1.pid}
    cores, daemons = controller.devices[_netns(daemon.pid)]
    assert daemons.pids == {daemon.pid} and not cores[0].pids
    assert all(os.getpid() not in c.pids for c in controller.cores())


def test_a_core_that_used_its_budget_is_stopped_then_continued(burners):
    rank = _in_a_netns(BURN, 0)
    burners.append(rank)
    controller = dutycycle.Controller({_netns(rank.pid): (0.05, 1)})
    controller.scan()
    core = controller.devices[_netns(rank.pid)][0][0]
    core.used_s()  # the first look only notes where its threads stand
    states = set()
    deadline = time.monotonic() + 30
    last = time.monotonic()
    while not {"T", "R"} <= states and time.monotonic() < deadline:
        time.sleep(0.002)
        now = time.monotonic()
        core.step(now - last)
        last = now
        states.add(_state(rank.pid))
    assert {"T", "R"} <= states, states  # stopped (T) once its bucket was empty, and run again
    assert core.tokens < core.depth
    controller.release()
    time.sleep(0.05)
    assert _state(rank.pid) != "T"


def test_a_process_leaving_a_stopped_budget_for_a_running_one_is_continued(burners, monkeypatch):
    daemon = _in_a_netns(NAP)
    burners.append(daemon)
    inode = _netns(daemon.pid)
    controller = dutycycle.Controller({inode: (0.25, 1)})
    controller.scan()
    cores, daemons = controller.devices[inode]
    daemons.signal(signal.SIGSTOP)
    daemons.stopped = True
    time.sleep(0.05)
    assert _state(daemon.pid) == "T"
    # As if it had exec'd into a rank placed on core 0 (its environment now names the core).
    monkeypatch.setattr(dutycycle, "_core_of", lambda pid: 0)
    controller.scan()
    assert cores[0].pids == {daemon.pid} and not daemons.pids
    time.sleep(0.05)
    assert _state(daemon.pid) != "T"
