"""How long one MPBench or IMB call takes on switched links (a port per device, full duplex),
by the link model and the algorithms the default MPI picks for long messages.

A call's time is the bytes its busiest port carries one after another, over the port's
payload rate, plus one latency per step. Only calls of long messages matter to a study's
time (a 32 MiB call on 100 Mbit/s Ethernet is 2.85 s of device time; a 2 KiB one is not
worth planning), so the algorithms are the default MPI's for long messages on few ranks:
binomial broadcast below 8 ranks, scatter and ring allgather from 8; reduce and allreduce
as reduce-scatter then gather or allgather (Rabenseifner), with one more whole message each
way for the ranks beyond the largest power of two. Ranks on one device exchange through
memory and cost nothing here. The study plans its points by it (``shoal.study.bench_budget``).
"""

from __future__ import annotations

import math

from shoal.cluster import linkmodel
from shoal.profiles import LinkType

# The default MPI's binomial-tree broadcast below this many ranks (its own minimum for the
# long-message broadcast), scatter and ring allgather from it.
BCAST_MIN_PROCS = 8

# MPBench's bidirectional bandwidth (Isend and Irecv both ways, then Waitall) took up to twice
# a one-way call on the emulated boards' full-duplex ports: 2.9-3.4 s or 5.71 s against 2.85 s
# at 32 MiB, half of the points each (the seed000 preset's two runs). A plan counts the slower:
# its busiest port carrying both messages one after the other.
BIBW_SERIAL = 2.0


# Collectives ran above their modelled calls on the emulated boards (32 MiB, 2-6 boards, the
# seed000 preset's first run, the default MPI): broadcast 1.0-1.40x, reduce 1.16-1.24x (the
# sums on the boards' slow cores), allreduce 1.09-1.68x, all-to-all 1.05-1.49x (six senders
# into each port at once). A point is planned at the highest.
SLOW_TESTS = {"bcast": 1.40, "reduce": 1.24, "allreduce": 1.68, "alltoall": 1.49}


def _pof2(p: int) -> int:
    return 1 << (p.bit_length() - 1)


def _kind(test: str) -> str:
    """A test's call, MPBench's and IMB's alike by name (``mpbench.bcast``, ``imb.Bcast``):
    all-to-all apart, where MPBench sends size/P to every rank and IMB size."""
    suite, _, short = test.rpartition(".")
    name = short.lower()
    return "imb_alltoall" if name == "alltoall" and suite == "imb" else name


def _port_messages(test: str, p: int) -> tuple[float, int]:
    """(whole messages the busiest port carries one after another, steps) for one call on
    ``p`` devices, one rank on each."""
    log2 = max(1, math.ceil(math.log2(p)))
    pof2 = _pof2(p)
    extra = 0 if pof2 == p else 1  # the ranks beyond a power of two fold in first
    halves = 2 * (pof2 - 1) / pof2  # reduce-scatter and allgather (or gather) over pof2 ranks
    table = {
        "bandwidth": (1, 1), "latency": (1, 1), "roundtrip": (2, 2), "bibw": (BIBW_SERIAL, 1),
        "pingpong": (2, 2), "pingping": (1, 1), "uniband": (1, 1), "biband": (BIBW_SERIAL, 1),
        "sendrecv": (1, 1), "exchange": (2, 2),
        "bcast": (log2, log2) if p < BCAST_MIN_PROCS else (2 * (p - 1) / p, 2 * log2),
        "reduce": (halves + extra, 2 * log2 + extra),
        "allreduce": (halves + 2 * extra, 2 * log2 + 2 * extra),
        "reduce_scatter": ((p - 1) / p, log2),
        "allgather": (p - 1, log2), "gather": (p - 1, log2), "scatter": (p - 1, log2),
        "alltoall": ((p - 1) / p, p - 1),  # MPBench: size/p to every rank
        "imb_alltoall": (p - 1, p - 1),    # IMB: size to every rank
        "barrier": (0, 2 * log2),
    }
    return table.get(_kind(test), (p - 1, log2))


def slowed_call_s(test: str, nodes: int, size_B: int, link: LinkType) -> float:
    """A call's modelled time, slowed as the boards were measured to slow its test."""
    return call_s(test, nodes, size_B, link) * SLOW_TESTS.get(_kind(test), 1.0)


def call_s(test: str, nodes: int, size_B: int, link: LinkType) -> float:
    """One call's device time on ``nodes`` devices of ``link`` (one rank each; on one device
    the ranks meet in memory: 0)."""
    if nodes < 2:
        return 0.0
    messages, steps = _port_messages(test, nodes)
    path = linkmodel.path(link)
    return messages * size_B / path.stream_Bps() + steps * path.latency_s
