"""A distribution's background activity on emulated devices (`--emulate 1xnuc@fedora`):
the noise program's schedule, and a device carrying it in its own namespace on its budget."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from shoal.cluster import inventory, state
from shoal.cluster.emulated import EmulatedCluster
from shoal.errors import ShoalError

host_namespaces = pytest.mark.skipif(os.geteuid() != 0, reason="clusters in the host's namespaces need root; an ordinary user's (in a user namespace) are tested in tests/user")


def _forks_since_boot() -> int:
    with open("/proc/stat") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("processes "))


def test_the_noise_forks_on_its_schedule_and_never_ahead_of_it():
    before = _forks_since_boot()
    noise = subprocess.Popen([sys.executable, "-m", "shoal.cluster.osnoise", "--forks", "200",
                              "--cpu", "0.2"], stdout=subprocess.PIPE, text=True)
    assert noise.stdout.readline().strip() == "ready"
    forks = 0
    while forks < 3:   # asked until it has forked a few times, however loaded the host
        noise.send_signal(signal.SIGUSR1)
        words = noise.stdout.readline().split()
        assert words[0::2] == ["forks", "busy_s", "wall_s"]
        forks, wall = int(words[1]), float(words[5])
        assert forks <= 200 * wall + 1          # the schedule is never run ahead
    noise.send_signal(signal.SIGTERM)
    out, _ = noise.communicate(timeout=30)
    words = out.split()
    forks, busy, wall = int(words[1]), float(words[3]), float(words[5])
    assert 3 <= forks <= 200 * wall + 1
    assert _forks_since_boot() - before >= forks + 1   # each one a real process (and itself)
    assert 0 < busy <= wall


def test_an_unknown_os_noise_profile_is_one_line():
    with pytest.raises(ShoalError, match=r"@arch is neither a clock .*, an OS noise profile \(known: "
                                         r"clear-linux, fedora, yocto\) nor a background \(known: "
                                         r"mpeg2-sd, .*\); add \[os_noise.arch\]"):
        inventory.from_emulate("2xminnowboard@arch")
    nodes = inventory.from_emulate("1xminnowboard@yocto+1xnuc").nodes
    assert nodes[0].describe()["os_noise"] == {"name": "yocto", "forks_per_s": 3.25, "cpu_share": 0.01}
    assert "os_noise" not in nodes[1].describe()


@host_namespaces
def test_a_device_carries_its_os_noise_in_its_namespace_on_its_core():
    with EmulatedCluster(inventory.from_emulate("1xnuc@fedora"), calibrate=False) as emu:
        record = state.read(emu.id)
        noise = record["nodes"]["nuc1"]["os_noise"]
        assert noise["name"] == "fedora"
        pid = noise["pid"]
        device_ns = os.stat(state.NETNS_DIR / record["nodes"]["nuc1"]["netns"]).st_ino
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == device_ns
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            assert b"shoal.cluster.osnoise\0--forks\x005.0\0--cpu\x000.04" in fh.read()
        with open(f"/proc/{pid}/environ", "rb") as fh:   # placed on a core of the device
            core = [e for e in fh.read().split(b"\0") if e.startswith(b"SHOAL_DEVICE_CORE=")]
        assert len(core) == 1 and int(core[0].split(b"=")[1]) < record["nodes"]["nuc1"]["cores"]
        assert [n["os_noise"]["name"] for n in emu.describe()["nodes"]] == ["fedora"]
    # Down ends it with the device.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            assert fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        pass
