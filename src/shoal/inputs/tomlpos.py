"""Find the line of a key in a TOML file, for one-line error messages.

``tomllib`` returns plain dicts without positions. Inventories are small,
hand-written files, so a line scan that follows ``[table]`` and
``[[array]]`` headers and ``key =`` lines is enough to point at the field
a message is about.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=""")


def _split_key(text: str) -> list[str]:
    parts = re.findall(r""""([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+)""", text)
    return [a or b or c for a, b, c in parts]


def line_of(text: str, path: tuple) -> int | None:
    """Return the 1-based line that best matches ``path`` (keys and array indices).

    The deepest match wins: an error about ``("nodes", 2, "slots")`` points at
    the ``slots =`` line of the third ``[[nodes]]`` table, or at that table's
    header if the key is missing.
    """
    best_line, best_depth = None, -1
    table: list = []
    counts: dict[tuple, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            names = _split_key(header.group(2))
            if header.group(1) == "[[":
                key = tuple(names)
                counts[key] = counts.get(key, -1) + 1
                table = [*names, counts[key]]
            else:
                table = names
            depth = _match_depth(table, path)
            if depth > best_depth:
                best_line, best_depth = number, depth
            continue
        key = _KEY.match(line)
        if key:
            full = [*table, *_split_key(key.group(1))]
            depth = _match_depth(full, path)
            if depth > best_depth:
                best_line, best_depth = number, depth
    return best_line if best_depth > 0 else None


def _match_depth(found: list, wanted: tuple) -> int:
    """How many leading parts of ``wanted`` ``found`` names (0 if it names anything else)."""
    if len(found) > len(wanted):
        return 0
    for a, b in zip(found, wanted):
        if a != b:
            return 0
    return len(found)
