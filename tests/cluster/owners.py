"""A process that brings an emulated cluster up and then waits, to be killed by a test."""

from __future__ import annotations

import subprocess
import sys

from shoal.cluster import state


def start_owner(emulate: str, then: str = "") -> tuple[subprocess.Popen, str, dict]:
    """Start the owner of a ``--emulate`` cluster: (process, cluster id, its state record).

    ``then`` is Python run inside the owner once the cluster ``c`` is up
    (before it prints the id), e.g. to start a process in a device.
    """
    script = ("import subprocess, time\n"
              "from shoal.cluster import inventory\n"
              "from shoal.cluster.emulated import EmulatedCluster\n"
              f"c = EmulatedCluster(inventory.from_emulate({emulate!r}), calibrate=False).up()\n"
              f"{then}"
              "print(c.id, flush=True)\n"
              "time.sleep(300)\n")
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    cluster_id = owner.stdout.readline().strip()
    return owner, cluster_id, state.read(cluster_id)
