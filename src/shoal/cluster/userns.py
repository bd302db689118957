"""Emulated clusters for ordinary users: the whole command runs in a user namespace.

An unprivileged user may create network namespaces, veth pairs, bridges and
tc qdiscs inside a user namespace of their own (where the kernel allows
unprivileged user namespaces). shoal re-runs the command there, as that
namespace's root, with a private ``/run`` (a tmpfs, so ``ip netns`` and the
cluster state have somewhere to live) and its own PID namespace. When the
command ends — or is killed, even with SIGKILL — the kernel tears the
namespaces down with everything in them: nothing can leak.

Device CPU limits need a cgroup the user may write. Where systemd runs a
user manager, the command first moves into a scope with ``Delegate=yes``
(``systemd-run --user --scope``) and its devices' cgroups are made under it
(see ``cpulimit.prepare_delegated``); a cgroup an administrator delegated by
hand (the directory owned by the user, the command inside it) serves as well.
Where neither exists, devices run at host speed and the cluster says so once;
their power is then modelled from the CPU time of their namespaces.

Root can choose the same construction with ``SHOAL_USERNS=always``: then a
crashed run leaves no process, namespace or link behind either. Root's
cgroups (device CPU limits) live in the host's hierarchy and outlast a
SIGKILL; their record is mirrored to the host's state root, so the next
``shoal cluster down``, ``shoal doctor`` or cluster start removes them.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from pathlib import Path

from shoal import environment, proc, verbose
from shoal.cluster import cpulimit, state, sysns
from shoal.errors import ShoalError

MODE = environment.USERNS.name  # "always": use a user namespace even as root
INSIDE = environment.USERNS_INSIDE.name
OWNER = environment.USERNS_OWNER.name  # "pid:start" of the command's namespace holder on the host
HOST_STATE = environment.USERNS_HOST_STATE.name  # the host's state root, where records are mirrored
ENTRY = environment.USERNS_ENTRY.name  # "pid:start" of the namespace holder, where not the owner
ATTACHED = "attached"  # INSIDE's value in a command that joined a cluster's namespaces
READY = b"\0"  # what a detached command writes once its cluster is up
SCOPED = environment.USERNS_SCOPED.name  # set once the command runs in a delegated systemd scope

_prepared = False


def inside() -> bool:
    """True in the command re-run inside its user namespace."""
    return _prepared or os.environ.get(INSIDE) == "1"


def needed() -> bool:
    """True when emulation must move into a user namespace first."""
    wanted = os.geteuid() != 0 or os.environ.get(MODE) == "always"
    return wanted and not inside()


def _user_manager() -> bool:
    """A systemd user manager this user can ask for a delegated scope."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    return proc.find("systemd-run") is not None and Path(runtime, "systemd", "private").exists()


def reexec(argv: list[str], detach: bool = False) -> None:
    """Replace this process by the same shoal command inside a fresh user namespace
    (``detach``: one that outlives this process, for ``cluster up``)."""
    if os.geteuid() != 0 and cpulimit.detect().version == 0:
        # A v2 group delegated by hand (or the systemd scope below): room for the devices.
        cpulimit.prepare_delegated()
    if (os.geteuid() != 0 and not os.environ.get(SCOPED) and cpulimit.detect().version == 0
            and _user_manager()):
        # Into a systemd scope whose cgroup this user may divide, then back here.
        os.environ[SCOPED] = "1"
        argv_scope = [proc.tool("systemd-run"), "--user", "--scope", "--quiet", "--collect",
                      "-p", "Delegate=yes", "--", sys.executable, "-m", "shoal", *argv]
        verbose.show(argv_scope)
        os.execv(argv_scope[0], argv_scope)
    check_allowed()
    os.environ[INSIDE] = "1"
    os.environ[HOST_STATE] = str(state.root())
    argv_ns = command_inside(argv)
    verbose.show(argv_ns)
    if detach:
        _exec_detached(argv_ns)
    _own_the_namespace()
    os.execv(argv_ns[0], argv_ns)


def check_allowed() -> None:
    """Refuse in one line where this kernel keeps ordinary users from user namespaces."""
    probe = proc.run([proc.tool("unshare", "emulating devices as an ordinary user"),
                      "--user", "--map-root-user", "--net", "true"])
    if not probe.ok:
        raise ShoalError("this kernel does not let ordinary users create user namespaces "
                         f"({probe.tail(1) or 'unshare failed'}); run as root, or allow them "
                         "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces)")


def command_inside(argv: list[str]) -> list[str]:
    """The command line that runs ``shoal argv`` in fresh user, network, mount and PID
    namespaces, as their root; they end with it (``--kill-child``)."""
    return [proc.tool("unshare"), "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork",
            "--kill-child", "--mount-proc", sys.executable, "-m", "shoal", *argv]


def _own_the_namespace() -> None:
    # This pid becomes unshare's, which holds the namespaces: the records' owner on the host.
    start = sysns.process_start_time(os.getpid())
    if start is not None:
        os.environ[OWNER] = f"{os.getpid()}:{start}"


def _exec_detached(argv_ns: list[str]) -> None:
    """Run the namespace holder in a session of its own; relay its output until it
    says the cluster is up (see ``hold``), then end; or end with its status."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            _own_the_namespace()
            os.execv(argv_ns[0], argv_ns)
        finally:
            os._exit(127)
    os.close(out_w)
    os.close(err_w)
    # unshare keeps both pipes open while it holds the namespaces: READY, not EOF, ends this.
    sinks = {out_r: sys.stdout.buffer, err_r: sys.stderr.buffer}
    while sinks:
        for fd in select.select(list(sinks), [], [])[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                del sinks[fd]
                continue
            sinks[fd].write(chunk.rstrip(READY) if fd == out_r else chunk)
            sinks[fd].flush()
            if fd == out_r and chunk.endswith(READY):
                while select.select([err_r], [], [], 0)[0] and (rest := os.read(err_r, 65536)):
                    sys.stderr.buffer.write(rest)
                sys.stderr.flush()
                os._exit(0)  # the holder keeps the cluster
    _, status = os.waitpid(pid, 0)
    os._exit(os.waitstatus_to_exitcode(status))


def hold() -> None:
    """In a detached command (``cluster up``): keep the namespaces, and with them the
    cluster, until ``cluster down`` ends this process."""
    if not inside():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, READY)  # tells the command that started this one that the cluster is up
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while True:
        signal.pause()


def inside_pid(record: dict) -> str | None:
    """A process inside the namespaces of a record mirrored from a user namespace: the
    holder's child (the holder, unshare, stays on the host's side). None: it is gone."""
    return sysns.first_child(record.get("entry_pid") or record.get("owner_pid"))


def entering(pid: str) -> list[str]:
    """The prefix that runs a command inside the namespaces of process ``pid``: its user,
    mount, network and PID namespaces, credentials kept (this uid is the namespace's root,
    and setgroups is denied there)."""
    return [proc.tool("nsenter"), "--target", pid, "--user", "--preserve-credentials",
            "--mount", "--net", "--pid", "--"]


def enter(record: dict, argv: list[str]) -> None:
    """Re-run this command inside the namespaces of a cluster another command holds."""
    child = inside_pid(record)
    if child is None:
        raise ShoalError(f"emulated cluster {record['id']} is gone (its process {record.get('owner_pid')} "
                         f"ended); 'shoal cluster down {record['id']}' removes what is left")
    os.environ[INSIDE] = ATTACHED
    # Its records are in the cluster's own /run, where the host's state root (SHOAL_STATE_DIR)
    # would hold only their mirror.
    os.environ.pop(environment.STATE_DIR.name, None)
    argv_ns = [*entering(child), sys.executable, "-m", "shoal", *argv]
    verbose.show(argv_ns)
    os.execv(argv_ns[0], argv_ns)


def prepare() -> None:
    """First thing inside the namespaces: a private /run (and the host mirror for root)."""
    global _prepared
    if _prepared:
        return
    _prepared = True
    # Records inside live in the namespace's private /run, never in a state root the host
    # sees (SHOAL_STATE_DIR): there the host's mirror of the same cluster would take the
    # record's place. Commands this one starts see the same.
    os.environ.pop(environment.STATE_DIR.name, None)
    # Commands this one starts are not re-run commands.
    if os.environ.pop(INSIDE, None) == ATTACHED:
        return  # the cluster's /run is the one to use
    owner = os.environ.pop(OWNER, "")
    host_state = os.environ.pop(HOST_STATE, "")
    if owner and host_state:
        # Opened before the private /run covers it: where records are mirrored.
        host = Path(host_state)
        host.mkdir(parents=True, exist_ok=True)
        pid, start = owner.split(":")
        state.mirror_to_host(os.open(host, os.O_RDONLY | os.O_DIRECTORY), int(pid), int(start),
                             os.environ.pop(ENTRY, None), host_state)
    try:
        sysns.mount_tmpfs("/run")
    except OSError as exc:
        raise ShoalError(f"cannot mount a private /run in the user namespace: {exc}") from None


def builds_emulation(emulate: str | None = None, inventory: str | None = None,
                     resume: str | os.PathLike | None = None) -> bool:
    """Whether a command given these options emulates devices on this machine."""
    if resume and not (emulate or inventory):
        try:
            request = json.loads((Path(resume) / "manifest.json").read_text()).get("request", {})
        except (OSError, ValueError):
            return False  # the command itself reports what is wrong with the directory
        emulate, inventory = request.get("emulate"), request.get("cluster")
    if emulate:
        return True
    if inventory:
        from shoal.cluster import inventory as _inventory

        try:
            return _inventory.load(inventory).mode == "emulated"
        except ShoalError:
            return False  # the command itself reports the bad file
    return False
