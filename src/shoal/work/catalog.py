"""The workloads shoal can run, as the workload program describes them.

The program's ``--list`` output names every workload, what its work is
counted in, its default size and its small one; ``--describe NAME:SIZE``
checks a size and says how much memory a rank needs for it. Sizes have two
aliases here: ``default`` and ``small`` (seconds on one core, and well under
a second at any rank count: tests, quick looks). Everything about one
workload lives in its C file (docs/work.md: adding a workload).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from shoal import proc
from shoal.errors import ShoalError

# Short unit names for rendering; the data keep units per second.
SHORT_UNITS = {"pixel": "px", "alignment": "aln", "frame": "frames", "image": "img", "op": "op",
               "key": "keys"}


@dataclass(frozen=True)
class Workload:
    name: str
    unit: str  # what one unit of work is: pixel, alignment, frame, image, op, key
    default_size: str
    small_size: str
    description: str

    def metric(self, per_second: float) -> str:
        """Throughput for people: 3 significant digits with an SI prefix (12.3 Mop/s)."""
        unit = SHORT_UNITS.get(self.unit, self.unit)
        for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")):
            if abs(per_second) >= scale or scale == 1.0:
                return f"{per_second / scale:.3g} {prefix}{unit}/s"
        return ""


@functools.lru_cache(maxsize=8)
def load(program: Path) -> tuple[Workload, ...]:
    entries = _ask(program, ["--list"])
    return tuple(Workload(e["name"], e["unit"], e["default_size"], e["small_size"], e["description"])
                 for e in entries)


def find(workloads: tuple[Workload, ...], name: str) -> Workload:
    for workload in workloads:
        if workload.name == name.lower():
            return workload
    raise ShoalError(f"unknown workload '{name}'; {known(workloads)}")


def known(workloads: tuple[Workload, ...]) -> str:
    """The names, for a message about a missing or unknown workload."""
    return f"known: {', '.join(w.name for w in workloads)} (shoal work --list)"


def resolve_size(workload: Workload, size: str | None) -> str:
    if size in (None, "", "default"):
        return workload.default_size
    if size == "small":
        return workload.small_size
    return size


def describe(program: Path, workload: Workload, size: str) -> dict:
    """Check a size with the program; returns {"size", "memory_per_rank_B"}."""
    answer = _ask(program, ["--describe", f"{workload.name}:{size}"], allow_exit=(2,))
    if not answer.get("valid"):
        raise ShoalError(f"{answer.get('error', 'invalid size')}")
    return answer


def _ask(program: Path, args: list[str], allow_exit: tuple[int, ...] = ()) -> dict | list:
    out = proc.run([str(program), *args], timeout=30, what=f"workload program {program}")
    if out.returncode != 0 and out.returncode not in allow_exit:
        raise ShoalError(f"workload program {program} {' '.join(args)} failed: {out.stderr.strip()[:200]}")
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError as exc:
        raise ShoalError(f"workload program {program} {' '.join(args)} printed invalid JSON ({exc})") from exc
