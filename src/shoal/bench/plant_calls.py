"""How long one IMB call takes on a shared plant (seed 002's DOCSIS upstream), by the link
model, and how long a point may then run before it counts as hung.

On one shared medium every byte any device sends crosses the one channel: a call's time is
at least the bytes all ranks send in it over the channel's rate, and at least its steps'
messages each sent by one box at its own cap, plus its sequential steps of one latency each.
The study plans its IMB points by it (``shoal.study.bench_budget``), and ``shoal bench`` on such
a plant waits for a point as long as its calls could take.
"""

from __future__ import annotations

import math
from typing import Iterable

from shoal.cluster import linkmodel
from shoal.profiles import LinkType

# The calibration's one trial, which is also the warm-up once a call outlasts the point's budget
# (shoal-bench), and one counted repetition.
CALLS_PER_POINT = 2

# Gathers and exchanges queue on the plant beyond the model's bytes: Gather of 128 KiB at 128
# boxes took 18.9 s against 4.9 s modelled, and the others 3-4 times their calls.
SLOW_TESTS = {"Gather": 4.0, "Allgather": 4.0, "Exchange": 4.0}


def _log2(p: int) -> int:
    return max(1, math.ceil(math.log2(p)))


# Per test: (bytes all ranks send in one call, sequential latency steps), for P ranks and
# m bytes, as the MPIs' usual algorithms move them (binomial trees, recursive doubling, pairwise).
def _traffic(test: str, p: int, m: int) -> tuple[float, int]:
    short = test.split(".", 1)[-1]
    return {
        "PingPong": (2 * m, 2), "PingPing": (2 * m, 1), "Uniband": (m, 1), "Biband": (2 * m, 1),
        "Sendrecv": (p * m, 1), "Exchange": (2 * p * m, 2),
        "Bcast": ((p - 1) * m, _log2(p)), "Reduce": ((p - 1) * m, _log2(p)),
        "Gather": ((p - 1) * m, _log2(p)), "Scatter": ((p - 1) * m, _log2(p)),
        "Reduce_scatter": ((p - 1) * m, _log2(p)), "Allreduce": (2 * (p - 1) * m, 2 * _log2(p)),
        "Allgather": (p * (p - 1) * m, _log2(p)), "Alltoall": (p * (p - 1) * m, p - 1),
        "Barrier": (0, 2 * _log2(p)),
    }.get(short, (p * m, _log2(p)))


def call_s(test: str, ranks: int, size_B: int, link: LinkType) -> float:
    """One call's time on the real plant (device time), by the message-level model."""
    sent, steps = _traffic(test, ranks, size_B)
    messages = max(1, steps)
    wire = linkmodel.wire_bytes(max(1, int(sent / messages))) * messages if sent else 0
    # Each step has a box sending its message at its own rate (a capped box, below the channel's).
    own = linkmodel.wire_bytes(size_B) * steps if sent else 0
    return max(8 * wire / link.up_channel_bps, 8 * own / link.upstream_bps) + steps * linkmodel.path(link).latency_s


# Host seconds a point costs beside its modelled calls, a + b * ranks, at D = 2 (the default MPI):
# the least-squares line through what two runs left a point beyond its modelled calls, the
# seed002 preset in pieces (4.8, 8.0, 10.2 and 39.1 s a point at 8, 16, 32 and 128 boxes) and
# its first end-to-end run (means 4.0, 6.5, 10.5, 9.9 and 36 s at 8, 16, 32, 64 and 128;
# docs/study.md): 1.5 + 0.267 N: the harness's own collectives and its timing negotiation on
# slow boxes over the request-grant plant. The boxes' share of it runs D times slower, so it
# scales with D (an upper bound for the launcher's share, which does not slow down).
FIXED_S = 1.5
FIXED_PER_RANK_S = 0.267
FIXED_AT_DILATION = 2.0


def point_fixed_s(ranks: int) -> float:
    """Device seconds of a point beside its calls, at ``ranks`` (one per box)."""
    return (FIXED_S + FIXED_PER_RANK_S * ranks) / FIXED_AT_DILATION


def hung_after_s(longest_call_s: float, ranks: int = 0) -> float:
    """Device seconds a point may take before it counts as hung: its warm-up and one call of
    the longest, and (given ``ranks``) its fixed cost, six times over. The model counts no
    TCP acknowledgement queueing for its own grant: a 128-box Bcast of 256 KiB took 1.3 times
    its modelled call, a Sendrecv of 128 KiB (5 s modelled) had not done two calls in 30 s;
    an MPI that connects on first use had not done its first Alltoall of 64 B on 128 boxes
    (every box connecting to 127 others) in 60 s; and a point declared hung costs a new
    launch, 150-250 s at 128 boxes."""
    return 6 * (CALLS_PER_POINT * longest_call_s + (point_fixed_s(ranks) if ranks else 0.0))


def slowed_call_s(test: str, ranks: int, size_B: int, link: LinkType) -> float:
    """A call's modelled time (device seconds), slowed as the plant was measured to slow its
    test."""
    return call_s(test, ranks, size_B, link) * SLOW_TESTS.get(test.split(".", 1)[-1], 1.0)


def longest_call_s(points: Iterable[tuple[str, int, int]], link: LinkType) -> float:
    """The longest slowed call of ``points`` (test, size_B, ranks)."""
    return max((slowed_call_s(test, ranks, size_B, link) for test, size_B, ranks in points),
               default=0.0)
