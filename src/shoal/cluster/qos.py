"""A device's service flow on a shared plant: the most it may send upstream (``--qos``).

Seed 002 (§V, Discussion) ran its plant "without QoS parameters to manage bandwidth
allocations" and names DOCSIS's "facilities for managing and prioritizing bandwidth on a
per device or application basis" as the next step. A cable operator sets each modem's
upstream service flow, its maximum sustained rate; on a shared medium that is the link's
``device_rate_bps``. ``--qos stb=10M`` gives every box of that profile its own (``@qos=10M``
on its ``--emulate`` term, as ``--background`` and ``--freq`` fold into the term), refused
above the upstream channel's rate or on a link that is not a shared medium. ``stb=10M/7``
also sets the flow's traffic priority (DOCSIS's 0-7): on a channel where any device has one,
the head-end's turn goes to the highest priority waiting (shoal-linkemu's queues per
priority), so a priority-7 box's frames pass a priority-0 box's bulk upstream.
"""

from __future__ import annotations

import re
from dataclasses import replace

from shoal.errors import ShoalError

SUFFIX = "qos="
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKMG]?)(?:bit/s|bps|b/s)?\s*$")
_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


PRIORITIES = range(8)  # DOCSIS traffic priority: 0 (the default) to 7, served first


def flow(text: str) -> tuple[float, int | None]:
    """``10M`` or ``10M/7``: a service flow's rate (bit/s) and its traffic priority (None: none)."""
    rate, slash, priority = text.partition("/")
    if not slash:
        return bits_per_s(rate), None
    if not (priority.strip().isdigit() and int(priority) in PRIORITIES):
        raise ShoalError(f"--qos {text!r}: a service flow's priority is 0 to 7 (7 first), e.g. 10M/7")
    return bits_per_s(rate), int(priority)


def bits_per_s(text: str) -> float:
    """``10M``, ``512k``, ``2.5e7``, ``10Mbit/s``: bits per second (decimal prefixes)."""
    match = _RATE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise ShoalError(f"--qos {text!r} is not a rate: give bits per second, e.g. 10M or 512k")
    return float(match.group(1)) * _PREFIX[match.group(2)]


def parse(text: str) -> dict[str, str]:
    """``--qos stb=10M[/PRIORITY][,KIND=RATE...]``: device profile -> its upstream service flow
    (as typed)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        kind, sep, rate = (part.strip() for part in item.partition("="))
        if not (kind and sep and rate):
            raise ShoalError(f"--qos {text!r}: give PROFILE=RATE[/PRIORITY],... in bits per second (e.g. "
                             "stb=10M or stb=10M/7)")
        flow(rate)
        out[kind.lower()] = rate
    return out


def with_qos(spec: str, flows: dict[str, str]) -> str:
    """An emulate spec with ``@qos=RATE`` on every term of each profile ``flows`` names."""
    from shoal.cluster import terms

    return terms.with_suffix(spec, flows, lambda rate: SUFFIX + rate,
                             lambda word: word.startswith(SUFFIX), "--qos", "a service flow")


def apply(link, rate_bps: float, where: str, priority: int | None = None):
    """``link`` with a device's upstream held to ``rate_bps`` (and its frames served at
    ``priority``); refused where it cannot be."""
    if not link.shared:
        raise ShoalError(f"{where}: a service flow caps a device on a shared medium; {link.name} gives "
                         "every device a port of its own: use --link docsis-27m or another shared one")
    if rate_bps > link.up_channel_bps:
        raise ShoalError(f"{where}: a service flow of {rate_bps / 1e6:g} Mbit/s is above {link.name}'s "
                         f"upstream channel of {link.up_channel_bps / 1e6:g} Mbit/s: give at most that")
    sources = {**link.sources, "device_rate": f"{where} (a service flow set for these devices)"}
    if priority is not None:
        sources["device_priority"] = f"{where} (a service flow's traffic priority)"
    return replace(link, device_rate_bps=rate_bps, device_priority=priority, sources=sources)
