"""JSON that commands print and write: numbers as numbers, lists as arrays, never NaN.

Run tables are CSV, so a row read back holds text (``"2"``, ``"1.8e-05"``,
``"[1.9e-05, 1.93e-05]"``, ``"true"``). ``typed`` turns such a row into
what its cells mean; ``dumps`` writes any value as strict JSON: NaN and
infinities (which JSON has no words for) become null, and a typed row
names each such cell in ``null_reasons``.
"""

from __future__ import annotations

import json
import math
from typing import Any

# Columns of run tables that hold names, not numbers, even when a name looks like one.
TEXT_COLUMNS = frozenset({
    "point_id", "config", "suite", "test", "metric", "stop", "check", "wait_mode", "power_source",
    "power_kind", "reason", "detail", "status", "mpi", "contender", "experiment", "mode", "node",
    "name", "kind", "label", "channel", "domain", "source", "quantity", "unit", "host",
})


def typed_cell(column: str, text: Any) -> Any:
    """The value a CSV cell stands for: None, bool, int, float, list/dict, or its text."""
    if not isinstance(text, str) or column in TEXT_COLUMNS:
        return text
    cell = text.strip()
    if cell == "":
        return None
    if cell in ("true", "false"):
        return cell == "true"
    if cell[:1] in "[{":
        try:
            return finite(json.loads(cell))
        except json.JSONDecodeError:
            return text
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        return float(cell)
    except ValueError:
        return text


def typed(row: dict[str, Any]) -> dict[str, Any]:
    """A row with typed cells; non-finite numbers are null and named in ``null_reasons``."""
    out: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for column, text in row.items():
        value = typed_cell(column, text)
        if isinstance(value, float) and not math.isfinite(value):
            reasons[column] = f"not a finite number ({text.strip()})"
            value = None
        out[column] = value
    if reasons:
        out["null_reasons"] = reasons
    return out


def typed_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [typed(r) for r in rows]


def finite(value: Any) -> Any:
    """The same value with NaN and infinities (also inside lists and dicts) as None."""
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _default(value: Any) -> Any:
    """numpy scalars and arrays as JSON values; paths and the rest as text."""
    if hasattr(value, "tolist"):
        return finite(value.tolist())
    return str(value)


def dumps(value: Any, **kwargs: Any) -> str:
    """Strict JSON (never NaN or Infinity) of ``value``."""
    return json.dumps(finite(value), default=_default, allow_nan=False, **kwargs)
