"""cyclictest (Debian's rt-tests) beside Experiment C: the standard timer wake-up latency.

One measuring thread at the default 1 ms interval under SCHED_OTHER (``--policy=other``,
the policy shoal's sweep and every MPI rank run under, so the same 50 us default timer
slack applies), printing every cycle's latency in ns (``-v -N``) so the median and p99
come from the samples themselves, not from 1 us histogram buckets. ``--default-system``:
cyclictest leaves the machine's power-management latency alone.

cyclictest 2.x raises its main thread to SCHED_FIFO before it measures, whatever policy
it measures under, so it runs only as root or with an RLIMIT_RTPRIO of 1 or more
(``ulimit -r``); elsewhere :func:`unavailable` says so and Experiment C goes on
without it.
"""

from __future__ import annotations

import os
import resource

import numpy as np

from shoal import proc
from shoal.errors import ShoalError

INTERVAL_S = 1e-3
# Inside an emulated device the kernel refuses SCHED_FIFO: a cgroup with a CPU bandwidth
# limit takes real-time tasks only with real-time runtime of its own (CONFIG_RT_GROUP_SCHED).
IN_DEVICE = ("cyclictest's SCHED_FIFO main thread is refused inside a device's CPU cgroup "
             "(no real-time runtime there); the sweep stands alone in devices")


def _host_root() -> bool:
    """Root of the host's user namespace: an ordinary user's emulated cluster runs shoal as
    root of a user namespace of its own, where the kernel still refuses SCHED_FIFO."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/uid_map") as fh:
            return fh.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return True


def unavailable() -> str | None:
    """Why cyclictest cannot run here (one line), or None when it can."""
    if proc.find("cyclictest") is None:
        return "cyclictest not found (Debian: apt-get install rt-tests)"
    if not _host_root() and resource.getrlimit(resource.RLIMIT_RTPRIO)[0] < 1:
        return ("cyclictest needs root or an RLIMIT_RTPRIO of 1 or more (ulimit -r) for its "
                "SCHED_FIFO main thread; not run")
    return None


def argv(duration_s: float) -> list[str]:
    return [proc.tool("cyclictest", "timer wake-up latency", package="rt-tests"),
            "-D", f"{max(1, round(duration_s))}", "-i", str(round(INTERVAL_S * 1e6)), "-t", "1",
            "--policy=other", "--default-system", "-q", "-v", "-N"]


def latencies(stdout: str) -> np.ndarray:
    """Every cycle's latency (s) from ``-v -N`` lines "THREAD: LOOP: LATENCY_NS"."""
    values = []
    for line in stdout.splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            values.append(int(parts[2]))
    if not values:
        raise ShoalError("cyclictest printed no latencies")
    # The first cycle of a thread is measured against a start cyclictest itself chose: left out.
    return np.asarray(values[1:] if len(values) > 1 else values) * 1e-9


def summary(samples: np.ndarray) -> dict[str, float]:
    return {"measures": int(len(samples)), "longest_s": INTERVAL_S,
            "lateness_longest_p50_s": float(np.median(samples)),
            "lateness_longest_p99_s": float(np.quantile(samples, 0.99))}
