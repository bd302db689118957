"""The small grammars of what users type: sizes, counts, rates, numbers, lists.

Every option and file field that is not a plain name goes through one of
these, so ``--sizes``, ``--flush``, ``--nodes``, ``--ranks``, ``--data-rate``
and the numeric options read the same way everywhere and refuse the same
nonsense (NaN, infinities, negative or zero where that means nothing)::

    size    8, 64K, 4M, 1G              bytes; K/M/G are powers of 1024
    sizes   1,8,1K,4M  1..4M  1K..1M:4  a list; a range of powers of 2 (or of :FACTOR)
    counts  4  1..4  2..8:2  1,2,4,6    whole numbers; a range steps by +1 (or +STEP)
    rate    250000  250k  1.5M  2GB/s   bytes per second, decimal prefixes
    number  finite, within the bounds its caller states

Errors are ``GrammarError`` with a message that says what is wrong and what
to write instead; callers put the option or field name in front.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from shoal.errors import ShoalError

T = TypeVar("T")

# MPI counts are C ints: no message of MPI_BYTE is larger.
MAX_MESSAGE_B = 2**30
# Ranks (slots) on one node at most: more than any device shoal runs on has cores.
MAX_SLOTS = 4096
# Longest any wait, budget or timeout may be (a day): longer is a typo, and
# larger values overflow the timeouts of threads and selectors.
MAX_SECONDS = 86400.0
_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2,
               "MIB": 1024**2, "G": 1024**3, "GB": 1024**3, "GIB": 1024**3}
_SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")
_RANGE = re.compile(r"^\s*([^.:]+?)\s*\.\.\s*([^.:]*?)\s*(?::\s*(.*?)\s*)?$")
_RATE_PREFIX = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


class GrammarError(ValueError):
    """Text that does not follow its grammar; str() says what to write instead."""


def parse(option: str, grammar: Callable[..., T], text: Any, *args: Any, **kwargs: Any) -> T:
    """``grammar(text)``, with a failure as a ShoalError that names ``option``."""
    try:
        return grammar(text, *args, **kwargs)
    except GrammarError as exc:
        raise ShoalError(f"{option} {text}: {exc}") from None


@dataclass(frozen=True)
class Bounds:
    """An interval a number must fall in; ``None`` leaves a side open-ended."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def check(self, value: float) -> None:
        if not math.isfinite(value):
            raise GrammarError(f"must be a finite number {self.describe()}, got {value!r}")
        low_bad = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
        high_bad = self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi)
        if low_bad or high_bad:
            raise GrammarError(f"must be {self.describe()}, got {value:g}")

    def describe(self) -> str:
        lo = None if self.lo is None else (f"above {self.lo:g}" if self.lo_open else f"at least {self.lo:g}")
        hi = None if self.hi is None else (f"below {self.hi:g}" if self.hi_open else f"at most {self.hi:g}")
        return " and ".join(p for p in (lo, hi) if p) or "(any finite value)"


POSITIVE = Bounds(0, lo_open=True)
NON_NEGATIVE = Bounds(0)
# A core's speed relative to the reference core: a thousand times either way is a typo.
SPEED = Bounds(1e-3, 1e3)
SECONDS = Bounds(0, MAX_SECONDS, lo_open=True)
SECONDS_OR_ZERO = Bounds(0, MAX_SECONDS)
FRACTION = Bounds(0, 1)


def number(text: str | float, bounds: Bounds = Bounds(), integer: bool = False) -> float:
    """A finite number (a whole one with ``integer``) within ``bounds``."""
    if isinstance(text, bool):
        raise GrammarError(f"must be a number, got {text!r}")
    if isinstance(text, (int, float)):
        value = text
    else:
        try:
            value = int(text, 10) if integer else float(text)
        except (TypeError, ValueError):
            kind = "a whole number" if integer else "a number"
            raise GrammarError(f"must be {kind} {bounds.describe()}, got {text!r}") from None
    if integer and (not isinstance(value, int) and not float(value).is_integer()):
        raise GrammarError(f"must be a whole number {bounds.describe()}, got {value!r}")
    bounds.check(value)
    return int(value) if integer else float(value)


def integer(text: str | int, bounds: Bounds = Bounds(1)) -> int:
    return int(number(text, bounds, integer=True))


def size(text: str, limit: int = MAX_MESSAGE_B) -> int:
    """Bytes: ``8``, ``64K``, ``4M`` (K, M, G are powers of 1024)."""
    match = _SIZE.match(text)
    if not match or match.group(2).upper() not in _SIZE_UNITS:
        raise GrammarError(f"malformed size {text!r}: use bytes like 8, 64K or 4M")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]
    if value > limit:
        raise GrammarError(f"size {text!r} is above the largest of {limit // 1024**2} MiB; "
                           "give a smaller size")
    return value


def _items(text: str, what: str, example: str) -> list[str]:
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise GrammarError(f"no {what} in {text!r}: give e.g. {example}")
    if "" in parts:
        raise GrammarError(f"empty item in {text!r}: separate {what} by single commas, e.g. {example}")
    return parts


def sizes(text: str) -> list[int]:
    """A list of sizes and ranges ``LO..HI[:FACTOR]``; sorted, without duplicates."""
    found: set[int] = set()
    for part in _items(text, "sizes", "1..4M or 8,1K,1M"):
        span = _RANGE.match(part)
        if not span:
            found.add(size(part))
            continue
        lo, hi = size(span.group(1)), size(span.group(2))
        factor = 2 if span.group(3) is None else _whole(span.group(3), part, "factor")
        if lo < 1 or hi < lo or factor < 2:
            raise GrammarError(f"malformed size range {part!r}: need 1 <= start <= end and a factor >= 2")
        value = lo
        while value <= hi:
            found.add(value)
            value *= factor
    return sorted(found)


def counts(text: str, lo: int = 1, hi: int | None = None, what: str = "count") -> list[int]:
    """Whole numbers: ``4``, ``1..4``, ``2..8:2`` (step), ``1,2,4``; sorted, without duplicates."""
    found: set[int] = set()
    for part in _items(text, f"{what}s", "4, 1..4 or 1,2,4"):
        span = _RANGE.match(part)
        if span:
            start = _whole(span.group(1), part, "start")
            end = _whole(span.group(2), part, "end")
            step = 1 if span.group(3) is None else _whole(span.group(3), part, "step")
            if start > end or step < 1:
                raise GrammarError(f"range {part!r} must go up with a step >= 1 (e.g. 1..4 or 2..8:2)")
            found.update(range(start, end + 1, step))
        else:
            found.add(_whole(part, part, what))
    if min(found) < lo:
        raise GrammarError(f"{what}s start at {lo}, got {min(found)} in {text!r}")
    if hi is not None and max(found) > hi:
        raise GrammarError(f"{max(found)} is more than the {hi} available in {text!r}; give at most {hi}")
    return sorted(found)


def _whole(text: str, part: str, role: str) -> int:
    text = text.strip()
    if not text.isdigit():
        where = f"{text!r}" if text == part.strip() else f"{role} {text!r} in {part!r}"
        raise GrammarError(f"{where} is not a whole number "
                           "(write a count, a range like 1..4 or a list like 1,2,4)")
    return int(text)


def rate(text: str) -> float:
    """Bytes per second: ``250000``, ``250k``, ``1.5M``, ``2GB/s`` (decimal prefixes)."""
    value = text.strip().removesuffix("/s").removesuffix("B")
    scale = _RATE_PREFIX.get(value[-1:], 1.0)
    try:
        result = float(value[:-1] if scale != 1.0 else value) * scale
    except ValueError:
        raise GrammarError(f"{text!r} is not a data rate: give bytes per second, e.g. 250k or 1.5M") from None
    NON_NEGATIVE.check(result)
    return result


_FREQUENCY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKMG]?)(?:Hz)?\s*$")


def frequency(text: str | float) -> float:
    """A clock frequency in Hz: ``1333000000``, ``1.33G``, ``500MHz``, ``800M`` (decimal prefixes)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        match = _FREQUENCY.match(str(text))
        if not match:
            raise GrammarError(f"{text!r} is not a frequency: give Hz with an optional k, M or G, "
                               "e.g. 1.33G or 500MHz")
        value = float(match.group(1)) * _RATE_PREFIX.get(match.group(2), 1.0)
    POSITIVE.check(value)
    return value


def frequencies(text: str) -> list[float]:
    """A comma list of frequencies (``--freqs 500M,1G,1.33G``), in the order given, no repeats."""
    values = [frequency(item) for item in _items(text, "frequency", "500M,1.33G")]
    if len(set(values)) != len(values):
        raise GrammarError(f"{text!r} names a frequency twice; list each once")
    return values


def choices(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """A comma list of names, each one of ``allowed``, in the order given."""
    items = tuple(_items(text, what, ",".join(allowed[:2])))
    bad = [i for i in items if i not in allowed]
    if bad:
        raise GrammarError(f"unknown {what} {bad[0]!r}; use a comma list of {', '.join(allowed)}")
    return items
