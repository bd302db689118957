"""Remote hosts for tests: each a network namespace with its own hostname and a real sshd.

The hosts sit on a bridge in the root namespace, which is also where mpiexec
runs, as it would on a login node. Each has a UTS namespace of its own, so
the MPI sees distinct hosts. ``vanish(name)`` makes one disappear the way a
host that loses power does: its link drops first (nothing it says reaches
anyone), then every process on it dies.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
# Each set of hosts takes a /24 of its own in 10.250.0.0/16 (outside the emulated clusters'
# 10.77.0.0/16), so tests running at once in several pytest processes never share one.
SUBNETS = "10.250"
_SUBNET_LOCK = Path("/run/lock/shoal-test-sshd-subnets.lock")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def namespace_pids(netns: str) -> list[int]:
    done = _ip("netns", "pids", netns, check=False)
    return [int(p) for p in done.stdout.split()]


@dataclass
class SshdHosts:
    """``count`` hosts named h1.. at 10.250.X.2.. (X free when made), reachable with the ``ssh`` program below."""

    where: Path
    count: int = 2
    tag: str = field(default_factory=lambda: f"{os.getpid() % 100000}")
    addresses: dict[str, str] = field(default_factory=dict)
    subnet: str = ""

    @property
    def bridge(self) -> str:
        return f"sxb{self.tag}"

    def netns(self, name: str) -> str:
        return f"shoal-test-{self.tag}-{name}"

    def _veth(self, name: str) -> str:
        return f"sx{self.tag}{name}"

    @property
    def ssh(self) -> Path:
        """A client that logs in with the test's key and trusts the test's host key."""
        return self.where / "ssh"

    def up(self) -> "SshdHosts":
        assert Path(SSHD).exists(), f"{SSHD} is missing: make setup installs openssh-server"
        self.where.mkdir(parents=True, exist_ok=True)
        for key in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.where / key)],
                           check=True)
        shutil.copy(self.where / "user_key.pub", self.where / "authorized_keys")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)   # sshd's privilege separation dir
        self.ssh.write_text(
            "#!/bin/sh\n"
            f"exec ssh -i {self.where}/user_key -o StrictHostKeyChecking=no "
            "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \"$@\"\n")
        self.ssh.chmod(0o755)
        _ip("link", "add", self.bridge, "type", "bridge")
        self._claim_subnet()
        _ip("link", "set", self.bridge, "up")
        for i in range(1, self.count + 1):
            self._host(f"h{i}", f"{self.subnet}.{i + 1}")
        return self

    def _claim_subnet(self) -> None:
        """Give the bridge the first 10.250.X.1/24 no interface holds, checked and taken
        under one lock so two sets of hosts made at once cannot pick the same."""
        with _SUBNET_LOCK.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            held = set(re.findall(rf"inet {SUBNETS}\.(\d+)\.", _ip("-o", "-4", "addr", "show").stdout))
            free = next(str(x) for x in range(7, 255) if str(x) not in held)
            self.subnet = f"{SUBNETS}.{free}"
            _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)

    def _host(self, name: str, address: str) -> None:
        netns, veth = self.netns(name), self._veth(name)
        _ip("netns", "add", netns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        _ip("-n", netns, "route", "add", "default", "via", f"{self.subnet}.1")
        config = self.where / f"sshd-{name}.conf"
        config.write_text(f"ListenAddress {address}\nHostKey {self.where}/host_key\n"
                          f"PidFile {self.where}/sshd-{name}.pid\n"
                          f"AuthorizedKeysFile {self.where}/authorized_keys\n"
                          "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                          "PermitRootLogin prohibit-password\n")
        subprocess.run(["ip", "netns", "exec", netns, "unshare", "--uts", "sh", "-c",
                        f"hostname {name} && exec {SSHD} -f {config} -E {self.where}/sshd-{name}.log"],
                       check=True)
        self.addresses[name] = address
        end = time.monotonic() + 10
        while subprocess.run([str(self.ssh), "-o", "ConnectTimeout=2", address, "true"],
                             capture_output=True).returncode != 0:
            if time.monotonic() > end:
                raise RuntimeError(f"sshd on {name} did not answer; see {self.where}/sshd-{name}.log")
            time.sleep(0.1)

    def inventory(self, profile: str = "nuc") -> Path:
        path = self.where / "hosts.toml"
        path.write_text('[cluster]\nmode = "ssh"\n' + "".join(
            f'[[nodes]]\nname = "{name}"\naddress = "{address}"\nprofile = "{profile}"\n'
            for name, address in self.addresses.items()))
        return path

    def environment(self) -> dict[str, str]:
        """What a job from the root namespace needs to reach these hosts."""
        return {"SHOAL_SSH": str(self.ssh),
                # The hosts reach mpiexec at the bridge's address (this machine's own name
                # resolves to 127.0.0.1), and the ranks use TCP rather than shared memory,
                # which the hosts' common /dev/shm would otherwise offer.
                "HYDRA_IFACE": self.bridge, "UCX_TLS": "tcp,self"}

    def processes(self, name: str) -> list[str]:
        """Command lines running on a host, but for its sshd listener."""
        lines = []
        for pid in namespace_pids(self.netns(name)):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "[listener]" not in cmdline and not cmdline.startswith(SSHD):
                lines.append(cmdline.strip())
        return lines

    def vanish(self, name: str) -> None:
        _ip("link", "set", self._veth(name), "down")
        for pid in namespace_pids(self.netns(name)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def down(self) -> None:
        for name in self.addresses:
            self.vanish(name)
            _ip("netns", "del", self.netns(name), check=False)
            _ip("link", "del", self._veth(name), check=False)
        _ip("link", "del", self.bridge, check=False)


@contextmanager
def sshd_hosts(where: Path, count: int = 2):
    """``count`` hosts up for the ``with`` block, down after it however it ends."""
    made = SshdHosts(where, count)
    try:
        yield made.up()
    finally:
        made.down()
