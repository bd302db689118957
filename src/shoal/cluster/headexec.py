"""Run a command (``mpiexec``) in the head of a cluster spread over the hosts of an ssh
inventory, from the machine that runs ``shoal``::

    headexec ADDRESS SHARE -- COMMAND...

ssh joins its words into one line for a remote shell, so the command goes quoted, with the
environment the launch set up (the MPI's, the ranks', shoal's variables and PATH: a Slurm
step would pass the whole environment) in front, to ``nsexec`` on the head's host. A job
stopped here must stop there too, and ssh without a terminal passes no signal: the remote
side keeps a watcher on the connection's stdin, which this process holds open until it
ends, and stops the command when it closes (this process stopped, or killed).

Standard library only: it runs once per job.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

from shoal import environment

# What the launcher's environment carries to the ranks and its launcher helper.
_FORWARDED = re.compile(r"^(SHOAL_|MPIR_|MPICH_|HYDRA_|I_MPI_|OMPI_|PRTE_|PMIX_|OPAL_|FI_|UCX_)|^(PATH|LD_LIBRARY_PATH)$")
# The command in the background, stopped when stdin (the connection) closes; the watcher's
# output goes nowhere, so the session ends with the command. (A shell gives a background
# list /dev/null as its stdin unless told otherwise: the watcher reads a copy, fd 3.)
_WATCHED = ('exec 3<&0; "$@" </dev/null & pid=$!; '
            '(cat <&3 >/dev/null 2>&1; kill -TERM $pid 2>/dev/null) >/dev/null 2>&1 & exec 3<&-; wait $pid')


def in_head(share: str) -> list[str]:
    """The prefix that enters the head of ``share`` on its host."""
    return [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", share, "--run", "head", "--"]


def command(address: str, enter: list[str], argv: list[str], env: dict[str, str]) -> list[str]:
    """The ssh command line that runs ``argv`` behind ``enter`` on the host at ``address``."""
    ssh = env.get(environment.SSH.name) or shutil.which("ssh") or "ssh"
    # The head's interface is its eth0, whatever this machine's real hosts are told to use.
    forwarded = [f"{k}={v}" for k, v in sorted(env.items()) if _FORWARDED.match(k) and k != "HYDRA_IFACE"]
    remote = ["sh", "-c", _WATCHED, "sh", "env", *forwarded, *enter, *argv]
    return [ssh, "-o", "BatchMode=yes", address, shlex.join(remote)]


def main(words: list[str] | None = None) -> int:
    words = sys.argv[1:] if words is None else words
    if len(words) < 4 or words[2] != "--":
        print("usage: headexec ADDRESS SHARE -- COMMAND...", file=sys.stderr)
        return 255
    ssh = subprocess.Popen(command(words[0], in_head(words[1]), words[3:], dict(os.environ)),
                           stdin=subprocess.PIPE)

    def stop(signum, frame) -> None:  # the remote watcher sees the connection's stdin close
        ssh.stdin.close()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    return ssh.wait()


if __name__ == "__main__":
    sys.exit(main())
