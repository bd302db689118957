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
import subprocess
import sys
from pathlib import Path

from shoal import verbose
from shoal.cluster import cpulimit, state, sysns, tools
from shoal.errors import ShoalError

MODE = "SHOAL_USERNS"  # "always": use a user namespace even as root
INSIDE = "SHOAL_USERNS_INSIDE"
OWNER = "SHOAL_USERNS_OWNER"  # "pid:start" of the command on the host (root only)
SCOPED = "SHOAL_USERNS_SCOPED"  # set once the command runs in a delegated systemd scope

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
    return tools.find("systemd-run") is not None and Path(runtime, "systemd", "private").exists()


def reexec(argv: list[str]) -> None:
    """Replace this process by the same shoal command inside a fresh user namespace."""
    unshare = tools.find("unshare")
    if unshare is None:
        raise ShoalError("emulating devices as an ordinary user needs 'unshare' (util-linux); "
                         "install it or run as root")
    if (os.geteuid() != 0 and not os.environ.get(SCOPED) and cpulimit.detect().version == 0
            and _user_manager()):
        # Into a systemd scope whose cgroup this user may divide, then back here.
        os.environ[SCOPED] = "1"
        argv_scope = [tools.need("systemd-run"), "--user", "--scope", "--quiet", "--collect",
                      "-p", "Delegate=yes", "--", sys.executable, "-m", "shoal", *argv]
        verbose.show(argv_scope)
        os.execv(argv_scope[0], argv_scope)
    if os.environ.get(SCOPED) == "1":
        os.environ[SCOPED] = "done"
        cpulimit.prepare_delegated()
    probe = subprocess.run([unshare, "--user", "--map-root-user", "--net", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        raise ShoalError("this kernel does not let ordinary users create user namespaces "
                         f"({probe.stderr.strip() or 'unshare failed'}); run as root, or allow them "
                         "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces)")
    os.environ[INSIDE] = "1"
    start = sysns.process_start_time(os.getpid())
    if os.geteuid() == 0 and start is not None:   # this pid stays the command's (unshare's)
        os.environ[OWNER] = f"{os.getpid()}:{start}"
    argv_ns = [unshare, "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork",
               "--kill-child", "--mount-proc", sys.executable, "-m", "shoal", *argv]
    verbose.show(argv_ns)
    os.execv(unshare, argv_ns)


def prepare() -> None:
    """First thing inside the namespaces: a private /run (and the host mirror for root)."""
    global _prepared
    if _prepared:
        return
    _prepared = True
    os.environ.pop(INSIDE, None)  # commands this one starts are not re-run commands
    owner = os.environ.pop(OWNER, "")
    if owner:
        # Opened before the private /run covers it: where cgroup records are mirrored.
        host = state.root()
        host.mkdir(parents=True, exist_ok=True)
        pid, start = owner.split(":")
        state.mirror_to_host(os.open(host, os.O_RDONLY | os.O_DIRECTORY), int(pid), int(start))
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
