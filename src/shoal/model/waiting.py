"""What a device draws while its ranks wait: the two conditions a study reports.

- ``spinning``: the MPI libraries' default (both MPIs shoal ships poll their
  queues in a busy loop). A core that holds a rank is fully busy for the
  whole run, waiting or not; this is the condition of seed 000's
  measurements (its NUC drew 18.07-19.65 W under MPBench, Table 5.7).
- ``sleeping``: under libshoalwait a waiting rank sleeps, so its core draws
  idle power while it waits; the device's power follows the CPU time the
  work itself used.

Both are computed from what the real device would do, never from how an
emulator makes its ranks wait: an emulated device's ranks may sleep (so that
time dilation works) and still be charged busy watts under ``spinning``.
With the linear model P = P_idle + u (P_busy - P_idle), a device with r
spinning ranks on c cores has u = min(1, r / c).
"""

from __future__ import annotations

SPINNING = "spinning"
SLEEPING = "sleeping"
CONDITIONS = (SLEEPING, SPINNING)


def spinning_power_W(idle_W: float, busy_W: float, cores: int, ranks: int) -> float:
    """Power of one device whose ``ranks`` ranks spin on its ``cores`` cores for the whole run."""
    u = min(1.0, ranks / max(cores, 1))
    return idle_W + u * (busy_W - idle_W)


def spinning_idle_fraction() -> float:
    """Woo-Lee's k under spinning: a waiting device draws what a busy one does."""
    return 1.0
