"""Run a command on the host's side for a process inside a user namespace.

An ordinary user's share of a cluster over hosts lives in a user namespace (``agentns``),
whose network has no way out. The MPI launcher in the cluster's head must still reach
the other hosts (``srun``, ssh) to start its daemons in their devices. The agent outside
listens on a Unix socket (``Relay``) in a directory both sides see; the launcher helper
inside (``spreadexec``) sends it one command with its environment and its standard
descriptors (``run``), and the relay runs it there with them, as if the helper had run
it itself: its exit status comes back, and a helper that ends (stopped by its launcher)
stops the command.

Standard library only: the helper runs once per launched proxy.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading

# How long a command may take to end once its helper has gone.
STOP_WAIT_S = 5.0


def run(path: str, argv: list[str], env: dict[str, str]) -> int:
    """Have the relay at ``path`` run ``argv`` with this process's stdin, stdout and stderr;
    its exit status (255 where the relay cannot be reached, as ssh's)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(path)
            request = json.dumps({"argv": argv, "env": env}).encode() + b"\n"
            # Nothing more is sent: the connection stays open while this process lives.
            socket.send_fds(conn, [request], [0, 1, 2])
            answer = b""
            while not answer.endswith(b"\n") and (chunk := conn.recv(4096)):
                answer += chunk
            return int(json.loads(answer)["status"])
        except (OSError, ValueError, KeyError) as exc:
            print(f"shoal: the host's relay at {path} did not run {argv[0]}: {exc}", file=sys.stderr)
            return 255


class Relay:
    """A Unix socket at ``path`` whose requests this process runs (see the module's text)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        os.chmod(path, 0o600)  # this user's processes only
        self.server.listen(64)
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> "Relay":
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    @staticmethod
    def _one(conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            while not data.endswith(b"\n"):
                more = conn.recv(1 << 20)
                if not more:
                    return
                data += more
            request = json.loads(data)
            if len(fds) != 3:
                return
            for fd in fds:  # only their copies at 0, 1 and 2 go to the command
                os.set_inheritable(fd, False)
            try:
                child = os.posix_spawnp(request["argv"][0], request["argv"], request["env"],
                                        file_actions=[(os.POSIX_SPAWN_DUP2, fd, i) for i, fd in enumerate(fds)])
            except OSError as exc:
                os.write(fds[2], f"shoal: cannot run {request['argv'][0]}: {exc.strerror}\n".encode())
                conn.sendall(json.dumps({"status": 255}).encode() + b"\n")
                return
            for fd in fds:
                os.close(fd)
            fds = []
            ended = threading.Event()
            threading.Thread(target=_stop_when_gone, args=(conn, child, ended), daemon=True).start()
            status = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
            ended.set()
            conn.sendall(json.dumps({"status": status if status >= 0 else 128 - status}).encode() + b"\n")
        except (OSError, ValueError, KeyError, TypeError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
            try:  # wakes the watcher below, and the helper, at once
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def _stop_when_gone(conn: socket.socket, child: int, ended: threading.Event) -> None:
    """The helper sends nothing more: its end of the connection closes when it ends."""
    try:
        conn.recv(1)
    except OSError:
        pass
    if ended.is_set():
        return
    try:
        os.kill(child, signal.SIGTERM)
        if not ended.wait(STOP_WAIT_S):
            os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        pass
