"""benchmarks/study_repeatability.py counts a run as agreeing when the range its headline names
holds every other run's best size (no study runs here: headlines as findings.json holds them)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _benchmark():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("study_repeatability", BENCHMARKS / "study_repeatability.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


def _head(size: int, low: int | None = None, high: int | None = None) -> dict:
    head = {"size": size, "largest_measured": 4, "text": f"best at {size}"}
    if low is not None:
        head["best_range"] = {"low": low, "high": high, "within": 0.02, "level": 0.95}
    return head


def test_runs_naming_four_and_three_agree_when_each_names_the_range_three_to_four():
    bench = _benchmark()
    # The six studies of issue 39: 4, 4, 4, 3, 3, 3 devices, each within 2 % of the other size.
    heads = [_head(4, 3, 4)] * 3 + [_head(3, 3, 4)] * 3
    assert bench.agreeing(heads) == [True] * 6
    # A run whose 3 stands clear of 4 does not hold the others' 4; theirs hold its 3.
    assert bench.agreeing([_head(4, 3, 4), _head(4, 3, 4), _head(3, 3, 3)]) == [True, True, False]
    # Older findings without a range name their one size; a missing headline agrees with nothing.
    assert bench.agreeing([_head(3), _head(3), None]) == [False, False, False]
    assert bench.agreeing([_head(3), _head(3)]) == [True, True]
