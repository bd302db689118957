"""Clocks: wall time onto the monotonic timeline, and one node's clock onto another's.

All power data lives on ``time.monotonic()`` (CLOCK_MONOTONIC), the clock
the benchmark program stamps its points with. Meter logs carry wall-clock
times, and a sampler on another node has its own monotonic clock; both are
mapped with an offset measured by pairing timestamps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable


def wall_minus_mono(tries: int = 5) -> float:
    """``time.time() - time.monotonic()`` now, from the tightest of a few tries.

    Each try reads monotonic, wall, monotonic; the pair whose two monotonic
    reads are closest brackets the wall read best.
    """
    best = None
    for _ in range(max(1, tries)):
        m0 = time.monotonic()
        w = time.time()
        m1 = time.monotonic()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, w - (m0 + m1) / 2.0)
    return best[1]


@dataclass(frozen=True)
class Offset:
    """``remote_time - local_time``, within +/- ``uncertainty_s``."""

    offset_s: float
    uncertainty_s: float

    def to_local(self, t_remote: float) -> float:
        return t_remote - self.offset_s


def estimate_offset(exchanges: Iterable[tuple[float, float, float]]) -> Offset:
    """Offset of a remote clock from paired timestamps (Cristian's method).

    Each exchange is ``(local_send, remote_time, local_receive)``: the local
    side asked for the remote time at ``local_send`` and got ``remote_time``
    back at ``local_receive``. The remote read happened somewhere in between,
    so ``offset = remote - (send + receive) / 2`` is off by at most half the
    round trip; the exchange with the shortest round trip wins.
    """
    best = None
    for send, remote, receive in exchanges:
        rtt = receive - send
        if rtt < 0:
            raise ValueError(f"exchange received before it was sent ({send} > {receive})")
        if best is None or rtt < best[0]:
            best = (rtt, remote - (send + receive) / 2.0)
    if best is None:
        raise ValueError("no clock exchanges to estimate an offset from")
    return Offset(offset_s=best[1], uncertainty_s=best[0] / 2.0)
