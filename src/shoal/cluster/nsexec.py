"""The launcher helper: start a process inside an emulated device, like ssh would.

MPI launchers call it where they would call ssh (each MPI's module in
``shoal.mpi.kinds`` names it as its launcher agent), by way of the
per-cluster shim ``<state>/<id>/ssh``::

    nsexec --cluster ID [ssh options] HOST COMMAND...   # ssh mode
    nsexec --cluster ID --run NODE -- PROGRAM ARGS...   # direct mode, no shell
    nsexec --cluster ID --rank VAR NODE:K,... -- PROGRAM ARGS...   # by rank number

By rank number (the head-side launch: the launcher's daemon stays in the head
namespace and starts every rank itself, through this helper): the rank's
number is read from the MPI's variable VAR, and ranks fill the nodes in the
order given, K on each, as the launcher would place them one daemon per
device. The rank's index on its device goes into SHOAL_DEVICE_RANK (which
core of the device it takes).

Launchers hand ssh a command meant for a remote shell (one quotes the proxy
path, another passes ``VAR=...;export VAR;daemon ...`` as one word), so in
ssh mode the words are joined with spaces and run by ``/bin/sh -c`` exactly as
sshd would. The host name never reaches a shell: it must be a device of the
cluster, matched literally. The process then joins the device's cgroups, gets
a private mount namespace with the cluster's /etc/hosts, and enters the
device's network and UTS namespaces before exec.

Standard library only: it runs once per launched proxy.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import NoReturn

from shoal import environment
from shoal.cluster import sysns

# ssh options that take a value, and flags (ignored: the devices are local).
_SSH_VALUE = set("bcDEeFIiJLlmOopQRSWw")
_SSH_FLAG = set("46AaCfGgKkMNnqsTtVvXxYy")


def fail(message: str) -> NoReturn:
    print(f"shoal nsexec: {message}", file=sys.stderr)
    sys.exit(255)  # what ssh returns when it cannot reach or start on the host


def _by_rank(variable: str, layout: str) -> tuple[str, int]:
    """(node, index of the rank on it) for the rank whose number the environment's ``variable``
    holds, ranks filling ``layout`` ("NODE:K,NODE:K,...") in order."""
    text = os.environ.get(variable, "")
    if not text.isdigit():
        fail(f"--rank {variable}: the launcher set no rank number in {variable} ({text!r})")
    rank, first = int(text), 0
    for item in layout.split(","):
        node, _, count = item.partition(":")
        k = int(count) if count.isdigit() else 1
        if rank < first + k:
            return node, rank - first
        first += k
    fail(f"rank {rank} is beyond the {first} ranks of --rank's node list")


def parse_args(argv: list[str]) -> tuple[str, str, list[str], bool]:
    """Return (cluster id, host, command words, direct)."""
    if len(argv) < 2 or argv[0] != "--cluster":
        fail("usage: nsexec --cluster ID [ssh options] HOST COMMAND... | --run NODE -- PROGRAM...")
    cluster, rest = argv[1], argv[2:]
    if rest[:1] == ["--rank"]:
        if len(rest) < 5 or rest[3] != "--":
            fail("usage: nsexec --cluster ID --rank VARIABLE NODE:K,... -- PROGRAM ARGS...")
        node, index = _by_rank(rest[1], rest[2])
        os.environ[environment.DEVICE_RANK.name] = str(index)
        return cluster, node, rest[4:], True
    if rest[:1] == ["--run"]:
        if len(rest) < 4 or rest[2] != "--":
            fail("usage: nsexec --cluster ID --run NODE -- PROGRAM ARGS...")
        return cluster, rest[1], rest[3:], True
    i = 0
    while i < len(rest) and rest[i].startswith("-") and len(rest[i]) > 1:
        flags = rest[i][1:]
        for k, flag in enumerate(flags):
            if flag in _SSH_VALUE:
                if k == len(flags) - 1:
                    i += 1  # value is the next word
                break
            if flag not in _SSH_FLAG:
                fail(f"unsupported ssh option -{flag}")
        i += 1
    if i >= len(rest):
        fail("no host given")
    host = rest[i].rsplit("@", 1)[-1]
    command = rest[i + 1:]
    if not command:
        fail(f"{host}: no command given (interactive sessions are not supported)")
    return cluster, host, command, False


def _device(record: dict, host: str) -> dict:
    if host == "head":
        return record["head"]
    for name, node in record.get("nodes", {}).items():
        if host in (name, node.get("address")):
            return node
    known = ", ".join(sorted(record.get("nodes", {})))
    fail(f"{host!r} is not a device of emulated cluster {record['id']} (devices: {known})")


def _from_the_host(mirror: dict) -> None:
    """The cluster lives in an ordinary user's user namespace (its record here is the
    host's mirror): join its user, mount and PID namespaces, where the cluster's own record
    is, and go on in a child there; this process waits for it and ends with its status.

    (Not ``nsenter --pid``: it stops itself when its child is stopped, and the devices'
    CPU limit without cgroups stops and continues every process in a device, never the
    nsenter outside it.)"""
    holder = mirror.get("entry_pid") or mirror.get("owner_pid")
    inside = sysns.first_child(holder)
    if inside is None:
        fail(f"emulated cluster {mirror['id']} is gone (its process {holder} ended)")
    try:  # all opened first: the host's /proc is not in there
        joins = [(os.open(f"/proc/{inside}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC), kind)
                 for name, kind in (("user", sysns.CLONE_NEWUSER), ("mnt", sysns.CLONE_NEWNS),
                                    ("pid", sysns.CLONE_NEWPID))]
        for fd, kind in joins:
            sysns.setns_fd(fd, kind)
            os.close(fd)
    except OSError as exc:
        fail(f"cannot enter the user namespace of cluster {mirror['id']}: {exc}")
    # In there, records live in the cluster's own /run, not in this host's state root.
    os.environ.pop(environment.STATE_DIR.name, None)
    child = os.fork()
    if child == 0:
        return
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda number, frame: os.kill(child, number))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def main(argv: list[str] | None = None) -> None:
    cluster, host, command, direct = parse_args(sys.argv[1:] if argv is None else argv)
    if not cluster.replace("-", "").isalnum():
        fail(f"bad cluster id {cluster!r}")
    base = environment.state_root()
    try:
        with open(os.path.join(base, cluster, "state.json")) as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        fail(f"no emulated cluster {cluster!r} is up")
    if record.get("in_user_namespace"):
        _from_the_host(record)
        try:
            with open(os.path.join(environment.state_root(), cluster, "state.json")) as fh:
                record = json.load(fh)
        except (OSError, ValueError):
            fail(f"emulated cluster {cluster!r} is not up in its user namespace")
        base = environment.state_root()
    device = _device(record, host)
    directory = os.path.join(base, cluster)
    try:
        for group in device.get("cgroups", []):
            with open(os.path.join(group, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))
        sysns.unshare(sysns.CLONE_NEWNS)
        sysns.make_private("/")
        sysns.bind_mount(os.path.join(directory, "hosts"), "/etc/hosts")
        sysns.setns(os.path.join("/run/netns", device["netns"]), sysns.CLONE_NEWNET)
        sysns.setns(os.path.join(directory, device["uts"]), sysns.CLONE_NEWUTS)
    except OSError as exc:
        fail(f"cannot enter device {host}: {exc}")
    if host != "head":  # where a rank on this device finds its core (``SpreadDevices``)
        os.environ[environment.DEVICE_PLACEMENT.name] = os.path.join(directory, "oncore")
    try:
        if direct:
            os.execvp(command[0], command)
        os.execv("/bin/sh", ["sh", "-c", " ".join(command)])
    except OSError as exc:
        fail(f"cannot run {command[0]!r} on {host}: {exc.strerror}")


if __name__ == "__main__":
    main()
