"""An ordinary user's cluster agent: its host's share in a user namespace of its own.

Root's agent builds its share in the host's own namespaces. Anyone else (a Slurm user is
not root on the nodes) builds it as a one-host cluster is built for them (``userns``): the
agent re-runs itself in fresh user, network, mount and PID namespaces. Two things in
there need the host's own side, which a user namespace cannot ``setns`` back to:

- the forwarder's UDP socket to the other hosts' forwarders: bound here, on the host's
  network, and inherited by the forwarder inside (``AGENT_UDP_FD``);
- the ``srun`` or ssh with which the launcher helper in the head reaches another host:
  run here, by this process's relay (``hostrelay``; its socket in ``AGENT_RELAY``).

The plan read on stdin goes in through a pipe (``AGENT_PLAN_FD``). This process stays on
the host's side as the share's owner (its pid is in the share's mirrored record, which
``agent down`` finds): a stopping signal is passed on to the agent inside, which removes
the share and says so. The namespaces' holder dies with this process (its parent-death
signal), and the share with them, however this process ends.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import tempfile
import time

from shoal import environment, proc
from shoal.cluster import hostrelay, state, sysns, userns
from shoal.errors import ShoalError

# How long the agent inside may take to remove its share once asked.
STOP_WAIT_S = 30.0
_PR_SET_PDEATHSIG = 1


def needed() -> bool:
    """Whether this agent must build its share in a user namespace (not root, not inside)."""
    return userns.needed()


def bind_udp(port: int) -> socket.socket:
    """The forwarder's socket, bound on the host's network (its buffers are set inside)."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        udp.bind(("0.0.0.0", port))
    except OSError as exc:
        udp.close()
        raise ShoalError(f"cannot bind UDP port {port} for the links to other hosts: {exc.strerror}; "
                         "another program (or cluster) holds it: bring the cluster up under another "
                         "--name") from None
    return udp


def run(argv: list[str], plan: dict, host: str) -> int:
    """Run ``shoal argv`` (this agent's ``up``) in a user namespace with ``plan``, the host's
    side kept here; its exit status."""
    userns.check_allowed()
    links = plan.get("links")
    udp = bind_udp(int(links["port"])) if links and host in plan["hosts"] else None
    plan_read, plan_write = os.pipe()
    relay_dir, relay_path = _relay_place(plan["hosts"][host]["id"])
    owner = f"{os.getpid()}:{sysns.process_start_time(os.getpid())}"
    env = {**os.environ, userns.INSIDE: "1", userns.HOST_STATE: str(state.root()), userns.OWNER: owner,
           environment.AGENT_PLAN_FD.name: str(plan_read), environment.AGENT_RELAY.name: relay_path}
    if udp is not None:
        env[environment.AGENT_UDP_FD.name] = str(udp.fileno())
    command = userns.command_inside(argv)
    pid = os.fork()
    if pid == 0:  # the namespaces' holder: dies with this process, whatever ends it
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != int(owner.split(":")[0]):
                os._exit(1)  # the agent is already gone
            os.close(plan_write)
            for fd in (plan_read, *(() if udp is None else (udp.fileno(),))):
                os.set_inheritable(fd, True)
            env[userns.ENTRY] = f"{os.getpid()}:{sysns.process_start_time(os.getpid())}"
            os.execve(command[0], command, env)
        finally:
            os._exit(127)
    os.close(plan_read)
    with os.fdopen(plan_write, "w") as out:
        json.dump(plan, out)
    if udp is not None:
        udp.close()  # the forwarder inside holds it
    relay = hostrelay.Relay(relay_path).start()
    try:
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
    except BaseException:  # a stopping signal: the agent inside removes the share first
        with proc.signals_held():
            _stop_inside(pid)
        raise
    finally:
        relay.close()
        try:  # the share's mirror directory, empty now (or a temporary one)
            os.rmdir(relay_dir)
        except OSError:
            pass


def _relay_place(share: str) -> tuple[str, str]:
    """(directory, socket path) of the relay: beside the share's mirrored record, which
    whatever removes the share removes; a temporary directory where that path is longer
    than a Unix socket's may be."""
    directory = state.cluster_dir(share)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "relay.sock"
    if len(str(path)) < 100:
        return str(directory), str(path)
    temporary = tempfile.mkdtemp(prefix="shoal-relay-")
    return temporary, os.path.join(temporary, "sock")


def _stop_inside(holder: int) -> None:
    inside = sysns.first_child(holder)
    if inside is not None:
        try:
            os.kill(int(inside), signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        if os.waitpid(holder, os.WNOHANG)[0]:
            return
        time.sleep(0.05)
    os.kill(holder, signal.SIGKILL)  # its child, and the namespaces, go with it
    os.waitpid(holder, 0)


def read_plan() -> dict | None:
    """Inside: the plan the agent outside passed in (None: this agent read its own)."""
    fd = environment.AGENT_PLAN_FD.get()
    if not fd:
        return None
    os.environ.pop(environment.AGENT_PLAN_FD.name)
    with os.fdopen(int(fd)) as stream:
        return json.load(stream)


def udp_fd() -> int | None:
    """Inside: the forwarder's socket the agent outside bound (None: the forwarder binds)."""
    fd = os.environ.pop(environment.AGENT_UDP_FD.name, None)
    return int(fd) if fd else None


def relay_path() -> str | None:
    """Inside: the relay through which the launcher helper reaches other hosts."""
    return os.environ.pop(environment.AGENT_RELAY.name, None)

