"""Emulated clusters for ordinary users: the whole command runs in a user namespace.

An unprivileged user may create network namespaces, veth pairs, bridges and
tc qdiscs inside a user namespace of their own (where the kernel allows
unprivileged user namespaces). shoal re-runs the command there, as that
namespace's root, with a private ``/run`` (a tmpfs, so ``ip netns`` and the
cluster state have somewhere to live) and its own PID namespace. When the
command ends — or is killed, even with SIGKILL — the kernel tears the
namespaces down with everything in them: nothing can leak.

What does not follow: cgroups are not delegated to the namespace, so device
CPUs are not limited (the cluster says so), and a cluster cannot outlive
the command (``shoal cluster up`` needs root).

Root can choose the same construction with ``SHOAL_USERNS=always``: then a
crashed run leaves no process, namespace or link behind either. Root's
cgroups (device CPU limits) live in the host's hierarchy and outlast a
SIGKILL; their record is mirrored to the host's state root, so the next
``shoal cluster down``, ``shoal doctor`` or cluster start removes them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from shoal import environment
from shoal.cluster import state, sysns
from shoal.errors import ShoalError

MODE = environment.USERNS.name  # "always": use a user namespace even as root
INSIDE = environment.USERNS_INSIDE.name
OWNER = environment.USERNS_OWNER.name  # "pid:start" of the command on the host (root only)


def inside() -> bool:
    return os.environ.get(INSIDE) == "1"


def needed() -> bool:
    """True when emulation must move into a user namespace first."""
    wanted = os.geteuid() != 0 or os.environ.get(MODE) == "always"
    return wanted and not inside()


def reexec(argv: list[str]) -> None:
    """Replace this process by the same shoal command inside a fresh user namespace."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise ShoalError("emulating devices as an ordinary user needs 'unshare' (util-linux); "
                         "install it or run as root")
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
    os.execv(unshare, [unshare, "--user", "--map-root-user", "--net", "--mount", "--pid", "--fork",
                       "--kill-child", "--mount-proc", sys.executable, "-m", "shoal.cluster.userns",
                       *argv])


def main(argv: list[str]) -> int:
    """Inside the namespaces: a private /run, then the shoal command itself."""
    owner = os.environ.pop(OWNER, "")
    if owner:
        # Opened before the private /run covers it: where cgroup records are mirrored.
        host = state.root()
        host.mkdir(parents=True, exist_ok=True)
        pid, start = owner.split(":")
        state.mirror_to_host(os.open(host, os.O_RDONLY | os.O_DIRECTORY), int(pid), int(start))
    for path in ("/run",):
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "shoal-run", path],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"shoal: cannot mount a private {path} in the user namespace: "
                  f"{done.stderr.strip()}", file=sys.stderr)
            return 2
    from shoal.cli import main as shoal_main

    return shoal_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
