"""A real Slurm whose hosts are namespaces on this machine, for tests.

``SlurmHosts(count=2).up()`` makes a controller ``shoal-ctl`` and hosts ``shoal-h1``..,
each a network, UTS and mount namespace of its own: its own hostname, its own /run
(where its munged puts its socket), /etc/hosts naming every host and /etc/resolv.conf
naming no outside server. Their network namespaces are joined by veth pairs to a
bridge in a namespace of its own, on 10.99.0.0/24, an underlay nothing outside these
namespaces sees. Each runs Debian's daemons in the foreground: munged (with a key made
for this set) everywhere, slurmctld on the controller, one slurmd per host (started
with ``-N`` its host's name), all with a slurm.conf made here that keeps every spool,
state, pid and log file in the set's temporary directory (readable by ordinary users, whose Slurm
commands read slurm.conf too) and needs no cgroup plugin
(``proctrack/linuxproc``, ``task/none``). ``up()`` returns once every host is idle.

``run(argv)`` runs a command on the controller, as on a login node: ``srun``,
``salloc`` and ``sinfo`` there use this Slurm (``SLURM_CONF``); ``start(argv, node)`` starts
one in the background. ``down()`` kills every
process in the namespaces, deletes them and removes the directory; it is safe to call
after a failed or half-done ``up()``. ``with slurm_hosts(count) as hosts:`` does both.
A set whose test process was killed is removed by the next set's ``up()``.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
MUNGED = "/usr/sbin/munged"
SRUN = "/usr/bin/srun"  # with salloc, sbatch, sinfo and scontrol (slurm-client)
PROGRAMS = (SLURMCTLD, SLURMD, MUNGED, SRUN)
# Every set uses the same addresses: each lives only in namespaces of its own set, so sets made
# at once by several test processes never meet, and no address reaches this machine's network.
SUBNET = "10.99.0"
CONTROLLER = "shoal-ctl"
_serial = itertools.count(1)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def namespace_pids(netns: str) -> list[int]:
    return [int(p) for p in _ip("netns", "pids", netns, check=False).stdout.split()]


def reap() -> None:
    """Remove the sets of test processes that died without ``down()`` (killed with SIGKILL)."""
    netns_dir = Path("/run/netns")
    names = [p.name for p in netns_dir.iterdir()] if netns_dir.is_dir() else []
    for name in names:
        match = re.fullmatch(r"shoal-test-slurm-(\d+)-\d+-\w+", name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            for pid in namespace_pids(name):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _ip("netns", "del", name, check=False)
    for path in Path(tempfile.gettempdir()).glob("shoal-test-slurm-*-*-*"):
        match = re.match(r"shoal-test-slurm-(\d+)-", path.name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            shutil.rmtree(path, ignore_errors=True)


def _started(pid: int) -> str | None:
    """A live process's start time (with its pid, its identity), None if it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]  # a zombie holds nothing; init reaps it


def left_behind(traces: dict) -> list[str]:
    """What is still there of a set's ``traces()``: namespaces, processes, its directory."""
    left = [f"network namespace {ns}" for ns in _ip("netns", "list").stdout.split() if ns in traces["netns"]]
    for pid, started in traces["processes"].items():
        if _started(int(pid)) == started:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                command = "?"
            left.append(f"process {pid} ({command})")
    if traces["where"] is not None and Path(traces["where"]).exists():
        left.append(f"directory {traces['where']}")
    return left


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"--- {path.name}: none"
    return f"--- {path.name} (last {len(text)} lines):\n" + "\n".join(text)


@dataclass
class SlurmHosts:
    """``count`` Slurm hosts shoal-h1.. at 10.99.0.11.. and a controller shoal-ctl at 10.99.0.1."""

    count: int = 2
    cpus: int = 1
    timeout: float = 60.0
    extra_conf: str = ""
    tag: str = field(default_factory=lambda: f"{os.getpid()}-{next(_serial)}")
    where: Path = field(default=None)
    holders: dict[str, subprocess.Popen] = field(default_factory=dict)
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)  # "munged on shoal-h1": ...

    @property
    def hosts(self) -> list[str]:
        return [f"shoal-h{i}" for i in range(1, self.count + 1)]

    @property
    def nodes(self) -> list[str]:
        """The controller, then the hosts."""
        return [CONTROLLER, *self.hosts]

    def address(self, node: str) -> str:
        return f"{SUBNET}.1" if node == CONTROLLER else f"{SUBNET}.{10 + self.hosts.index(node) + 1}"

    def netns(self, node: str) -> str:
        return f"shoal-test-slurm-{self.tag}-{node.removeprefix('shoal-')}"

    @property
    def bridge_netns(self) -> str:
        return f"shoal-test-slurm-{self.tag}-br"

    @property
    def namespaces(self) -> list[str]:
        return [self.bridge_netns, *(self.netns(n) for n in self.nodes)]

    @property
    def conf(self) -> Path:
        return self.where / "slurm.conf"

    def environment(self) -> dict[str, str]:
        """What a Slurm command on the controller needs."""
        return {"SLURM_CONF": str(self.conf)}

    # -- up ------------------------------------------------------------------------------
    def up(self) -> "SlurmHosts":
        reap()
        if self.where is None:
            self.where = Path(tempfile.mkdtemp(prefix=f"shoal-test-slurm-{self.tag}-"))
            # Ordinary users' Slurm commands read slurm.conf there too (the key stays root's).
            self.where.chmod(0o755)
        try:
            self._files()
            _ip("netns", "add", self.bridge_netns)
            _ip("-n", self.bridge_netns, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.bridge_netns, "link", "set", "br0", "up")
            for node in self.nodes:
                self._node(node)
            for node in self.nodes:
                self._start(node, "munged", [MUNGED, "--foreground", "--force",
                                             f"--key-file={self.where}/munge.key",
                                             f"--seed-file={self.where}/{node}/munged.seed",
                                             f"--log-file={self.where}/{node}/munged.log"])
            for node in self.nodes:
                self._wait_for(lambda n=node: (self.where / n / "run/munge/munge.socket.2").exists(),
                               f"munged on {node} did not make its socket")
            self._start(CONTROLLER, "slurmctld", [SLURMCTLD, "-D", "-f", str(self.conf)])
            for host in self.hosts:
                self._start(host, "slurmd", [SLURMD, "-D", "-f", str(self.conf), "-N", host])
            self._wait_for(self._all_idle, f"the hosts {', '.join(self.hosts)} did not all become idle")
        except BaseException:
            self.down()
            raise
        return self

    def _files(self) -> None:
        key = self.where / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (self.where / "hosts").write_text("127.0.0.1 localhost\n" + "".join(
            f"{self.address(n)} {n}\n" for n in self.nodes))
        (self.where / "resolv.conf").write_text("options timeout:1 attempts:1\n")  # no server
        for node in self.nodes:
            for sub in ("run/munge", "spool"):
                (self.where / node / sub).mkdir(parents=True, mode=0o755)
        (self.where / CONTROLLER / "state").mkdir()
        node_lines = "".join(f"NodeName={h} NodeAddr={self.address(h)} CPUs={self.cpus} State=UNKNOWN\n"
                             for h in self.hosts)
        self.conf.write_text(
            "ClusterName=shoal\n"
            f"SlurmctldHost={CONTROLLER}({self.address(CONTROLLER)})\n"
            "SlurmUser=root\nSlurmdUser=root\n"
            "AuthType=auth/munge\nCredType=cred/munge\n"
            # No cgroup plugin: processes tracked by their parentage, tasks not confined.
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
            "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
            "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
            "MpiDefault=none\nSwitchType=switch/none\n"
            "ReturnToService=2\n"
            # The hosts' own CPU count (this machine's) gives way to the one configured here.
            "SlurmdParameters=config_overrides\n"
            "MailProg=/bin/true\n"
            f"StateSaveLocation={self.where}/{CONTROLLER}/state\n"
            f"SlurmctldPidFile={self.where}/{CONTROLLER}/slurmctld.pid\n"
            f"SlurmctldLogFile={self.where}/{CONTROLLER}/slurmctld.log\n"
            f"SlurmdSpoolDir={self.where}/%n/spool\n"
            f"SlurmdPidFile={self.where}/%n/slurmd.pid\n"
            f"SlurmdLogFile={self.where}/%n/slurmd.log\n"
            + node_lines +
            "PartitionName=shoal Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
            + self.extra_conf)

    def _node(self, node: str) -> None:
        """A network namespace on the bridge, and a process holding a UTS and mount namespace
        of the node's own (its hostname, /run, /etc/hosts, /etc/resolv.conf) inside it."""
        netns, port = self.netns(node), node.removeprefix("shoal-")
        _ip("netns", "add", netns)
        _ip("-n", self.bridge_netns, "link", "add", port, "type", "veth", "peer", "name", "eth0",
            "netns", netns)
        _ip("-n", self.bridge_netns, "link", "set", port, "master", "br0", "up")
        _ip("-n", netns, "addr", "add", f"{self.address(node)}/24", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        mounts = (f"mount --bind {self.where}/{node}/run /run && "
                  f"mount --bind {self.where}/hosts /etc/hosts && "
                  f"mount --bind {self.where}/resolv.conf /etc/resolv.conf")
        holder = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{netns}", "unshare", "--uts", "--mount", "--propagation",
             "private", "sh", "-c", f"hostname {node} && {mounts} && echo ready && exec sleep infinity"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.holders[node] = holder
        if holder.stdout.readline().strip() != "ready":
            raise RuntimeError(f"could not make {node}'s namespaces: {holder.stderr.read()}")

    def _enter(self, node: str) -> list[str]:
        return ["nsenter", "-t", str(self.holders[node].pid), "--net", "--uts", "--mount", "--"]

    def _start(self, node: str, name: str, argv: list[str]) -> None:
        with open(self.where / node / f"{name}.out", "w") as out:
            self.daemons[f"{name} on {node}"] = subprocess.Popen(
                self._enter(node) + argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, **self.environment()}, start_new_session=True)

    def _all_idle(self) -> bool:
        done = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=15, check=False)
        states = dict(line.split() for line in done.stdout.splitlines() if len(line.split()) == 2)
        return done.returncode == 0 and all(states.get(h) == "idle" for h in self.hosts)

    def _wait_for(self, ready, what: str) -> None:
        end = time.monotonic() + self.timeout
        while not ready():
            dead = [name for name, p in self.daemons.items() if p.poll() is not None]
            if dead or time.monotonic() > end:
                why = f"{', '.join(dead)} exited" if dead else f"not within {self.timeout:.0f} s"
                raise RuntimeError(f"{what}: {why}\n{self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        """The tails of every daemon's log, for a failure message."""
        parts = []
        for name, lines in (("slurmctld", 15), ("slurmd", 15), ("munged", 4)):
            for node in self.nodes:
                # A daemon's own log once it has one; before that (a bad slurm.conf) its stderr.
                for path in (self.where / node / f"{name}.log", self.where / node / f"{name}.out"):
                    if path.exists() and path.stat().st_size:
                        parts.append(f"{node}: {_tail(path, lines)}")
                        break
        return "\n".join(parts) or "(no daemon wrote a log)"

    # -- use -----------------------------------------------------------------------------
    def run(self, argv: list[str], node: str = CONTROLLER, timeout: float = 60, check: bool = True,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` on ``node`` (the controller: a login node) with this Slurm's conf."""
        done = subprocess.run(self._enter(node) + argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **self.environment(), **(env or {})})
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} on {node} exited {done.returncode}: "
                               f"{done.stderr.strip()}\n{self.logs()}")
        return done

    def allocate(self) -> dict[str, str]:
        """An allocation of every host (``salloc --no-shell``); what a login shell inside it
        has in its environment (its job id and node list)."""
        granted = self.run(["salloc", f"-N{self.count}", "--no-shell"]).stderr
        job = granted.split("Granted job allocation")[1].split()[0]
        return {"SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": f"shoal-h[1-{self.count}]"}

    def start(self, argv: list[str], node: str = CONTROLLER) -> subprocess.Popen:
        """Start ``argv`` on ``node`` in the background (a server a test talks to); its
        output is piped, and the caller waits for it."""
        return subprocess.Popen(self._enter(node) + argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, **self.environment()})

    def traces(self) -> dict:
        """What of this set could outlive it: its namespaces, every process in them (by pid and
        start time: a namespace's inode number is reused as soon as it is gone) and its directory."""
        processes = {pid: _started(pid) for ns in self.namespaces for pid in namespace_pids(ns)}
        return {"netns": list(self.namespaces), "processes": {p: t for p, t in processes.items() if t},
                "where": None if self.where is None else str(self.where)}

    # -- down ----------------------------------------------------------------------------
    def down(self) -> None:
        for _ in range(50):  # until nothing is left: a dying slurmd may still start a step
            pids = [p for ns in self.namespaces for p in namespace_pids(ns)]
            pids += [h.pid for h in self.holders.values() if h.poll() is None]
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        for process in [*self.daemons.values(), *self.holders.values()]:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (process.stdout, process.stderr):
                if stream:
                    stream.close()
        for netns in self.namespaces:
            _ip("netns", "del", netns, check=False)
        if self.where is not None:
            shutil.rmtree(self.where, ignore_errors=True)


@contextmanager
def slurm_hosts(count: int = 2, **options):
    """A ``SlurmHosts`` up for the ``with`` block, down after it however it ends."""
    hosts = SlurmHosts(count, **options)
    try:
        yield hosts.up()
    finally:
        hosts.down()
