"""A reference of several emulated devices (``--reference 8xxeon-blade``): seed 002's computer
cluster of 8 Xeon blades on Gigabit Ethernet beside its 128 set-top boxes.

How many blades a host holds: a study runs at one dilation D, so blades that would need a
larger D than the cluster and one blade slow every point of the cluster's study too (8 blades
are 22 host CPUs at real time, D = 15 on 2 cores, against D = 2 for 128 boxes and one blade).
A preset's reference (``reference_fallback``) then runs on the most blades, halving from its
count, that keep the study's D, and says so in one line; a reference the user gave is run as
given.

Where the blades' ranks go, as the seed spread its 8-64 processes evenly over its blades:

- the reference configuration (``reference``: the study's perf/W comparison) is every blade
  with a rank on each core (the seed's 64 processes); IMB's reference point is one rank on each
  of two blades, across their link (the seed's PingPong of 45-50 MB/s is Gigabit's, not a
  blade's memory);
- ``blades``: the seed's other blade points, Bcast over 1, 2, 4 and 8 ranks a blade (8..64
  ranks), ray tracing at one rank a blade (8 ranks) and sequence alignment on one processor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from shoal.errors import ShoalError
from shoal.execute.placement import Placement
from shoal.study.reference import Reference

BLADES = "blades"  # the configuration of the reference devices' other rank counts
# Ranks a blade for Bcast over the blades (seed 002 §V: 8 to 64 processes on 8 blades).
BCAST_RANKS_PER_BLADE = (1, 2, 4, 8)
BCAST_TESTS = "imb.Bcast"


@dataclass(frozen=True)
class Fitted:
    reference: Reference
    note: str | None  # one line when fewer devices than asked run, and why


def fit(request: Any, spec_of: Any, at_once_of: Any) -> Fitted:
    """The most reference devices (halving from the request's count) whose study runs at the D
    of the cluster and one device; ``spec_of(reference)``: the emulation spec with that
    reference, ``at_once_of(reference)``: its sets of devices that compute at once."""
    asked = request.reference
    if not (request.reference_fallback and asked.emulated and asked.count > 1 and request.emulate):
        return Fitted(asked, None)

    def fits(reference: Reference) -> float:
        """The study's D with these reference devices (inf: the cluster's devices could not be
        held to their budgets at the D they need)."""
        where = replace(request.where(), emulate=spec_of(reference), dilation=None)
        try:
            return where.planned_dilation(at_once_of(reference))
        except ShoalError:
            return math.inf

    base = fits(asked.with_count(1))
    ceiling = max(base, request.dilation or 0.0)
    every = fits(asked)
    if every <= ceiling:
        return Fitted(asked, None)
    # The D the devices need by themselves, for the line that says why fewer run.
    needed = replace(request.where(), emulate=str(asked), dilation=None).planned_dilation()
    count = asked.count // 2
    while count > 1 and fits(asked.with_count(count)) > ceiling:
        count //= 2
    why = (f"which would slow every point of the study {every / base:.1f}x (give --reference {asked} to "
           f"run them all at D = {every:g})" if math.isfinite(every) else
           f"at which the cluster's devices could not be held to their budgets (shoal bench or work "
           f"--emulate {asked} measures them alone)")
    return Fitted(asked.with_count(count),
                  f"reference: {count} of the preset's {asked.count} {asked.profile} devices: all "
                  f"{asked.count} compute at D = {needed:g} on this host, against D = {base:g} for the "
                  f"cluster and one, {why}")


def imb_reference(names: list[str]) -> Placement:
    """IMB's reference point: two ranks, across two devices' link where there are two."""
    if len(names) >= 2:
        return Placement("reference", 2, 1, tuple(names[:2]))
    return Placement("reference", 1, 2, tuple(names), with_shared=False)


def bcast_placements(names: list[str], cores: int) -> list[Placement]:
    """Bcast over the devices at 1, 2, 4, ... ranks each up to their cores (none for one device)."""
    if len(names) < 2:
        return []
    return [Placement(BLADES, len(names), r, tuple(names)) for r in BCAST_RANKS_PER_BLADE if r <= cores]


def work_reference(names: list[str], cores: int) -> Placement:
    """The workloads' reference point: a rank on every core of every device."""
    return Placement("reference", len(names), cores, tuple(names), with_shared=len(names) > 1)


def work_others(workload: str, names: list[str]) -> list[Placement]:
    """The seed's other points of a workload on several devices: ray tracing at one rank a
    device (its 8-rank point), sequence alignment on one processor (Table I's first column)."""
    if len(names) < 2:
        return []
    if workload == "raytrace":
        return [Placement(BLADES, len(names), 1, tuple(names))]
    if workload == "msa":
        return [Placement(BLADES, 1, 1, tuple(names[:1]), with_shared=False)]
    return []
