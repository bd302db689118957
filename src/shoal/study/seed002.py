"""Seed 002's printed numbers (§V text, Fig. 7-8, Table I), as kept in ``shoal/data/seed002.csv``.

Every row names where in the seed it is printed (``source``) and what it averages over
(``note``); the study's report and ``benchmarks/seed002_shapes.py`` put shoal's
measurements beside them.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

SEED_FILE = Path(__file__).resolve().parent.parent / "data" / "seed002.csv"


@dataclass(frozen=True)
class SeedValue:
    quantity: str  # e.g. raytrace_time, msa_time, bcast_time_mean_sizes
    machine: str  # profile name: stb or xeon-blade
    nodes: int | None  # boxes, or blade ranks
    item: str  # image side (512) or MSA set (S100-L1500); "" when none
    size_B: int | None  # message size, for IMB rows that are per size
    value: float
    value_high: float | None  # the upper end where the seed prints a range
    unit: str
    source: str
    note: str


def _int(text: str) -> int | None:
    return int(text) if text else None


@functools.lru_cache(maxsize=None)
def values() -> tuple[SeedValue, ...]:
    with SEED_FILE.open() as fh:
        return tuple(SeedValue(r["quantity"], r["machine"], _int(r["nodes"]), r["image_or_set"],
                               _int(r["size_B"]), float(r["value"]),
                               float(r["value_high"]) if r["value_high"] else None, r["unit"], r["source"],
                               r["note"]) for r in csv.DictReader(fh))


def find(quantity: str, machine: str, nodes: int | None = None, item: str = "",
         size_B: int | None = None) -> SeedValue | None:
    """The seed's value for one cell, or None where the seed prints none."""
    for v in values():
        if (v.quantity, v.machine, v.nodes, v.item, v.size_B) == (quantity, machine, nodes, item, size_B):
            return v
    return None
