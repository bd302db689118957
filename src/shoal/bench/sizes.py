"""Message-size lists: parse what users type, with SI bytes in the result.

Accepted forms (sizes in bytes, suffixes K/M/G are powers of 1024):
  ``1,8,1K,4M``   an explicit list
  ``1..4M``       every power of two from 1 B to 4 MiB
  ``1K..1M:4``    from 1 KiB to 1 MiB, multiplying by 4
"""

from __future__ import annotations

import re

from shoal.errors import ShoalError

DEFAULT_SIZES = "1..4M"
QUICK_SIZES = "1,64,1K,16K,256K,4M"

_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2,
          "MIB": 1024**2, "G": 1024**3, "GB": 1024**3, "GIB": 1024**3}
_SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str) -> int:
    match = _SIZE.match(text)
    if not match or match.group(2).upper() not in _UNITS:
        raise ShoalError(f"malformed size '{text}': use bytes like 8, 64K or 4M")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def parse_sizes(text: str) -> list[int]:
    """Parse a size list; result is sorted, without duplicates."""
    sizes: set[int] = set()
    for part in (p for p in text.split(",") if p.strip()):
        if ".." in part:
            span, _, step_text = part.partition(":")
            lo_text, _, hi_text = span.partition("..")
            lo, hi = parse_size(lo_text), parse_size(hi_text)
            step = int(step_text) if step_text.strip().isdigit() else 2
            if step_text and not step_text.strip().isdigit():
                raise ShoalError(f"malformed size step in '{part}': the factor after ':' must be an integer")
            if lo < 1 or hi < lo or step < 2:
                raise ShoalError(f"malformed size range '{part}': need 1 <= start <= end and a factor >= 2")
            value = lo
            while value <= hi:
                sizes.add(value)
                value *= step
        else:
            sizes.add(parse_size(part))
    if not sizes:
        raise ShoalError(f"no sizes in '{text}': give e.g. --sizes 1..4M or --sizes 8,1K,1M")
    return sorted(sizes)
