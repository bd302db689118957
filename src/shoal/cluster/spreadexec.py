"""The launcher helper of a cluster spread over hosts: start a process in a device on any
host, like ssh would.

``mpiexec`` runs in the cluster's head (in the first host's share); the MPI's launcher
(each MPI's module names it as its launcher agent) calls this where it would call ssh,
through the shim ``<state>/<share>/spread-ssh`` the agent writes::

    spreadexec --cluster SHARE [ssh options] DEVICE COMMAND...
    spreadexec --cluster SHARE --rank VARIABLE NODE:K,... -- PROGRAM ARGS...   # the head layout

A device of this host's share is entered as on one host (``nsexec``). For a device on
another host the helper leaves the head's network and mount namespaces for the host's own
(those of the agent that holds the share), then reaches the device's host as the cluster's
engine does (an ``srun --overlap`` step on that node of the allocation, or ssh), where
``nsexec`` enters the device. Which device is on which host, in which share, and the engine
are in ``spread.json`` beside the shim (``write``). An ordinary user's share is in a user
namespace, which cannot be left: there the agent outside runs the ``srun`` or ssh
(``hostrelay``).

Standard library only: it runs once per launched proxy.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys

from shoal import environment
from shoal.cluster import hostrelay, nsexec, sysns

MAP = "spread.json"
SHIM = "spread-ssh"
# Variables that belong to the host a command runs on (a rank's other variables go along).
_HOSTS_OWN = frozenset({"HOME", "PWD", "OLDPWD", "SHLVL", "_", "HOSTNAME", "USER", "LOGNAME", "SHELL",
                        "TERM", "MAIL", "DISPLAY", "XDG_RUNTIME_DIR", "XDG_SESSION_ID", "SSH_CLIENT",
                        "SSH_CONNECTION", "SSH_TTY", "SSH_AUTH_SOCK", environment.STATE_DIR.name})


def write(directory: str, share: str, cluster: str, engine: dict, members: dict[str, dict],
          relay: str | None = None, host_state: str | None = None) -> str:
    """Write the map (``members``: a device's name and address -> its host and share; for an
    ordinary user's agent, its ``relay``, see ``hostrelay``, and the hosts' state root, where
    the shares' records are mirrored) and the shim into a share's directory; return the
    shim's path (the launcher to give mpiexec)."""
    with open(os.path.join(directory, MAP), "w") as out:
        json.dump({"cluster": cluster, "engine": engine, "members": members, "relay": relay,
                   "host_state": host_state}, out)
    shim = os.path.join(directory, SHIM)
    state = environment.STATE_DIR.get()
    with open(shim, "w") as out:
        out.write(f"#!/bin/sh\n# Launcher helper of cluster {cluster} (over hosts), from share {share}\n"
                  f"{environment.STATE_DIR.name}={shlex.quote(state)} exec {shlex.quote(sys.executable)} "
                  f"-m shoal.cluster.spreadexec --cluster {share} \"$@\"\n")
    os.chmod(shim, 0o755)
    return shim


def _reach(engine: dict, host: str, argv: list[str], state_root: str, rank: bool = False) -> list[str]:
    """The command that runs ``argv`` on ``host`` the way the cluster's engine reaches it
    (``state_root``: where the shares are recorded there). A ``rank`` (the head layout:
    the MPI's daemon in the head starts it) needs the environment its daemon gave it: srun
    passes the whole environment, ssh the variables named on its command line."""
    if engine["engine"] == "slurm":
        srun = shutil.which("srun") or "srun"
        return [srun, f"--jobid={engine['job_id']}", "--overlap", "--nodes=1", "--ntasks=1",
                f"--nodelist={host}", "--cpu-bind=none", "--kill-on-bad-exit=0", *argv]
    ssh = environment.SSH.get() or shutil.which("ssh") or "ssh"
    carried = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k not in _HOSTS_OWN] if rank else []
    state = f"{environment.STATE_DIR.name}={state_root}"
    return [ssh, "-o", "BatchMode=yes", engine["addresses"][host], shlex.join(["env", *carried, state, *argv])]


def main(argv: list[str] | None = None) -> None:
    words = sys.argv[1:] if argv is None else argv
    share, host, _, rank = nsexec.parse_args(words)
    base = environment.state_root()
    try:
        with open(os.path.join(base, share, MAP)) as fh:
            spread = json.load(fh)
        with open(os.path.join(base, share, "state.json")) as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        nsexec.fail(f"share {share!r} of a cluster over hosts is not up here")
    target = spread["members"].get(host)
    if target is None:
        nsexec.fail(f"{host!r} is not a device of cluster {spread['cluster']} "
                    f"(devices: {', '.join(sorted(m for m in spread['members'] if not m[0].isdigit()))})")
    enter = [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", target["share"], *words[2:]]
    if target["share"] == share:  # on this host
        os.execv(sys.executable, enter)
    if spread.get("relay"):  # in a user namespace: the agent outside reaches the other host
        env = {**os.environ, environment.STATE_DIR.name: spread["host_state"]}
        sys.exit(hostrelay.run(spread["relay"], _reach(spread["engine"], target["host"], enter,
                                                       spread["host_state"], rank), env))
    try:  # out of the head, into the host's own namespaces (the agent's), to reach the other host
        agent = record["owner_pid"]
        sysns.setns(f"/proc/{agent}/ns/net", sysns.CLONE_NEWNET)
        sysns.setns(f"/proc/{agent}/ns/mnt", sysns.CLONE_NEWNS)
    except (OSError, KeyError) as exc:
        nsexec.fail(f"cannot leave the head for host {target['host']}: {exc}")
    command = _reach(spread["engine"], target["host"], enter, environment.STATE_DIR.get(), rank)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        nsexec.fail(f"cannot reach host {target['host']} ({command[0]}): {exc.strerror}")


if __name__ == "__main__":
    main()
