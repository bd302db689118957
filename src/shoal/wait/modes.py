"""Wait modes: the grammar of ``SHOAL_WAIT`` and its validation.

The same grammar is checked again by libshoalwait at MPI_Init, so a program
started without shoal is never run in another mode than asked either::

    busy                          pass-through: the MPI's own spinning
    yield                         sched_yield() between tests
    sleep:US                      fixed sleep of US microseconds between tests
                                  (sleep:0 still calls clock_nanosleep: 003's
                                  shortest static sleep)
    linear[:DMIN_NS,DMAX_NS,DSTEP_NS]
                                  003's adaptive receive: sleeps grow by DSTEP
                                  from DMIN to DMAX, restarting on every call
                                  (default 1,1000,1: 1 ns steps to 1 us)
    backoff[:SPIN_US,CAP_US]      spin where waits are short; sleep through
                                  the gap to the arrival each call site's
                                  rhythm predicts; else sleeps growing
                                  exponentially up to a cap that follows the
                                  rhythm, at most CAP_US (default 50,10000)
    auto[:TARGET]                 backoff whose cap is also tuned online so
                                  the added wake-up delay stays under
                                  TARGET x the wait (default 0.05)
    event[:CAP_US]                sleeps of CAP_US (default 1000), each ended
                                  at once by a TCP socket event: no spin, so
                                  what emulated devices run (a polling rank
                                  spends its device's CPU quota)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shoal.errors import ShoalError

MODES_HELP = ("busy, yield, sleep:US, linear[:DMIN_NS,DMAX_NS,DSTEP_NS], "
              "backoff[:SPIN_US,CAP_US], auto[:TARGET] or event[:CAP_US]")

_NUMBER = re.compile(r"^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$|^\.[0-9]+$")
_INTEGER = re.compile(r"^[0-9]{1,15}$")
CLASSES = ("p2p", "send", "coll")


@dataclass(frozen=True)
class WaitMode:
    """A validated wait mode; ``text`` is what goes into SHOAL_WAIT."""

    name: str
    text: str
    params: tuple[float, ...] = ()

    def __str__(self) -> str:
        return self.text


def _bad(text: str, why: str) -> ShoalError:
    return ShoalError(f"wait mode '{text}': {why}")


def _number(s: str) -> float | None:
    return float(s) if _NUMBER.match(s or "") else None


def parse_mode(text: str) -> WaitMode:
    """Validate a wait mode string; raise ShoalError with one line if malformed."""
    if not isinstance(text, str) or not text:
        raise ShoalError(f"empty wait mode; use {MODES_HELP}")
    name, sep, params = text.partition(":")
    if name in ("busy", "yield"):
        if sep:
            raise _bad(text, f"mode '{name}' takes no parameters")
        return WaitMode(name, text)
    if name == "sleep":
        us = _number(params)
        if us is None or not 0 <= us <= 1e7:
            raise _bad(text, "sleep needs a time in microseconds from 0 to 1e7, e.g. sleep:100")
        return WaitMode(name, text, (us,))
    if name == "linear":
        if not sep:
            return WaitMode(name, text, (1, 1000, 1))
        parts = params.split(",")
        if len(parts) != 3 or not all(_INTEGER.match(p) for p in parts):
            raise _bad(text, "linear takes three integers DMIN_NS,DMAX_NS,DSTEP_NS, "
                             "e.g. linear:1,1000,1")
        dmin, dmax, dstep = (int(p) for p in parts)
        if dmin > dmax or dstep == 0 or dmax > 10**10:
            raise _bad(text, "linear needs DMIN_NS <= DMAX_NS <= 1e10 and DSTEP_NS > 0")
        return WaitMode(name, text, (dmin, dmax, dstep))
    if name == "backoff":
        if not sep:
            return WaitMode(name, text, (50.0, 10000.0))
        parts = params.split(",")
        values = [_number(p) for p in parts]
        if (len(parts) != 2 or None in values or values[0] > 1e6 or not 0 < values[1] <= 1e7):
            raise _bad(text, "backoff takes SPIN_US,CAP_US, e.g. backoff:50,10000")
        return WaitMode(name, text, tuple(values))
    if name == "auto":
        if not sep:
            return WaitMode(name, text, (0.05,))
        target = _number(params)
        if target is None or not 0 < target < 1:
            raise _bad(text, "auto takes a target fraction between 0 and 1, e.g. auto:0.05")
        return WaitMode(name, text, (target,))
    if name == "event":
        if not sep:
            return WaitMode(name, text, (1000.0,))
        cap = _number(params)
        if cap is None or not 0 < cap <= 1e7:
            raise _bad(text, "event takes a cap in microseconds from 1 to 1e7, e.g. event:1000")
        return WaitMode(name, text, (cap,))
    raise ShoalError(f"unknown wait mode '{name}'; use {MODES_HELP}")


def parse_classes(text: str) -> str:
    """Validate ``SHOAL_WAIT_CLASSES`` (comma list of p2p, send, coll, or none)."""
    parts = [p for p in text.split(",")]
    if parts == ["none"]:
        return text
    bad = [p for p in parts if p not in CLASSES]
    if bad or len(parts) > 3:
        raise ShoalError(f"wait classes '{text}': unknown class '{(bad or parts)[0]}'; "
                         "use a comma list of p2p, send, coll (or none)")
    return text
