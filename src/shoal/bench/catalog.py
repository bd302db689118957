"""The benchmark tests shoal can run, as the native program describes them.

The native program's test table is the single source of truth: its
``--list`` output (JSON) names every test, its suite, the ranks it needs and
its metric. This module reads that once per build and resolves what users
ask for (``mpbench``, ``imb``, ``imb.PingPong``, ``bandwidth``...).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from shoal import proc
from shoal.errors import ShoalError

SUITES = ("mpbench", "imb")


@dataclass(frozen=True)
class TestInfo:
    name: str  # qualified, e.g. "imb.PingPong"
    suite: str
    min_ranks: int
    metric: str  # "bandwidth" | "time" | "rate"
    bytes_per_op: str
    description: str

    @property
    def short(self) -> str:
        return self.name.split(".", 1)[1]


@functools.lru_cache(maxsize=8)
def load(program: Path) -> tuple[TestInfo, ...]:
    out = proc.run([str(program), "--list"], timeout=30, what=f"benchmark program {program} --list")
    if out.returncode != 0:
        raise ShoalError(f"benchmark program {program} --list failed: {out.stderr.strip()[:200]}")
    try:
        entries = json.loads(out.stdout)
    except json.JSONDecodeError as exc:
        raise ShoalError(f"benchmark program {program} --list printed invalid JSON ({exc})") from exc
    # Every test measures communication: with one rank it would time a memcpy.
    return tuple(
        TestInfo(e["name"], e["suite"], max(2, int(e.get("min_ranks", 1))), e["metric"],
                 str(e.get("bytes_per_op", "")), e.get("description", ""))
        for e in entries
    )


def select(tests: tuple[TestInfo, ...], spec: str) -> list[TestInfo]:
    """Resolve a comma-separated list of suites and test names.

    A bare name matches case-insensitively in any suite (``pingpong``,
    ``bandwidth``); a name matching in both suites must be qualified.
    """
    by_name = {t.name.lower(): t for t in tests}
    chosen: list[TestInfo] = []
    for word in (w.strip() for w in spec.split(",") if w.strip()):
        low = word.lower()
        if low == "all":
            matches = list(tests)
        elif low in SUITES:
            matches = [t for t in tests if t.suite == low]
        elif low in by_name:
            matches = [by_name[low]]
        else:
            matches = [t for t in tests if t.short.lower() == low]
            if len(matches) > 1:
                names = ", ".join(t.name for t in matches)
                raise ShoalError(f"test '{word}' is ambiguous ({names}); give it with its suite, e.g. {names.split(', ')[0]}")
        if not matches:
            known = ", ".join(t.name for t in tests)
            raise ShoalError(f"unknown test '{word}'; use a suite ({', '.join(SUITES)}) or a test: {known}")
        for test in matches:
            if test not in chosen:
                chosen.append(test)
    if not chosen:
        raise ShoalError("no tests selected; use e.g. --tests mpbench or --tests imb.PingPong")
    return chosen
