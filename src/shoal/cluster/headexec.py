"""Run a command (``mpiexec``) in the head of a cluster spread over the hosts of an ssh
inventory, from the machine that runs ``shoal``::

    headexec --forward PREFIX,... [--local NAME,...] ADDRESS SHARE -- COMMAND...

ssh joins its words into one line for a remote shell, so the command goes quoted, with the
launch's environment in front (the variables whose names start with a ``--forward``
prefix, and PATH and LD_LIBRARY_PATH; those named ``--local`` belong to this machine's own
network and stay here: a Slurm step would pass the whole environment), to ``nsexec`` on the
head's host. A job stopped here must stop there too, and ssh without a terminal passes no
signal: the remote side keeps a watcher on the connection's stdin, which this process holds
open until it ends, and stops the command when it closes (this process stopped, or killed).

Standard library only: it runs once per job.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys

from shoal import environment

ALWAYS = ("PATH", "LD_LIBRARY_PATH")
# The command in the background, stopped when stdin (the connection) closes; the watcher's
# output goes nowhere, so the session ends with the command. (A shell gives a background
# list /dev/null as its stdin unless told otherwise: the watcher reads a copy, fd 3.)
_WATCHED = ('exec 3<&0; "$@" </dev/null & pid=$!; '
            '(cat <&3 >/dev/null 2>&1; kill -TERM $pid 2>/dev/null) >/dev/null 2>&1 & exec 3<&-; wait $pid')


def in_head(share: str) -> list[str]:
    """The prefix that enters the head of ``share`` on its host."""
    return [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", share, "--run", "head", "--"]


def command(address: str, enter: list[str], argv: list[str], env: dict[str, str],
            forward: tuple[str, ...], local: tuple[str, ...] = ()) -> list[str]:
    """The ssh command line that runs ``argv`` behind ``enter`` on the host at ``address``, with
    the variables of ``env`` whose names start with a ``forward`` prefix (and ``ALWAYS``)."""
    ssh = env.get(environment.SSH.name) or shutil.which("ssh") or "ssh"
    carried = [f"{k}={v}" for k, v in sorted(env.items())
               if (k in ALWAYS or k.startswith(forward)) and k not in local]
    remote = ["sh", "-c", _WATCHED, "sh", "env", *carried, *enter, *argv]
    return [ssh, "-o", "BatchMode=yes", address, shlex.join(remote)]


def main(words: list[str] | None = None) -> int:
    words = sys.argv[1:] if words is None else words
    if "--" not in words:
        print("usage: headexec --forward PREFIX,... [--local NAME,...] ADDRESS SHARE -- COMMAND...",
              file=sys.stderr)
        return 255
    cut = words.index("--")
    parser = argparse.ArgumentParser(prog="headexec")
    parser.add_argument("--forward", default="")
    parser.add_argument("--local", default="")
    parser.add_argument("address")
    parser.add_argument("share")
    args = parser.parse_args(words[:cut])
    argv = command(args.address, in_head(args.share), words[cut + 1:], dict(os.environ),
                   tuple(p for p in args.forward.split(",") if p), tuple(n for n in args.local.split(",") if n))
    # ssh's stdin: a pipe held open here until this process ends.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(read_end, 0)
        os.close(read_end)
        os.close(write_end)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(255)
    os.close(read_end)

    def stop(signum, frame) -> None:  # the remote watcher sees the connection's stdin close
        try:
            os.close(write_end)
        except OSError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
