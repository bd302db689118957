"""Pretty units and tables for people; the data always stays in SI units."""

from __future__ import annotations

import math


def _scaled(value: float | None, unit: str, steps: list[tuple[float, str]]) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    for factor, prefix in steps:
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    factor, prefix = steps[-1]
    return f"{value / factor:.3g} {prefix}{unit}"


def seconds(value: float) -> str:
    return _scaled(value, "s", [(1, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")])


def byte_size(value: float) -> str:
    for factor, unit in [(1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")]:
        if value >= factor:
            return f"{value / factor:g} {unit}"
    return f"{value:g} B"


def bandwidth(value: float) -> str:
    return _scaled(value, "B/s", [(1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")])


def watts(value: float) -> str:
    return _scaled(value, "W", [(1e3, "k"), (1, ""), (1e-3, "m")])


def joules(value: float) -> str:
    return _scaled(value, "J", [(1e3, "k"), (1, ""), (1e-3, "m"), (1e-6, "µ")])


def rate(value: float) -> str:
    return _scaled(value, "/s", [(1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")])


def percent(value: float) -> str:
    return "-" if value is None or value == "" else f"{100 * float(value):.1f}%"


def narrow_table(headers: list[str], left: tuple[str, ...] = (), title: str | None = None):
    """A rich table that fits an 80-column terminal (and a log, which rich
    renders at 80): light borders, headers that may take two lines ("\\n"),
    cells that never wrap. Columns named in `left` are left-justified."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for head in headers:
        table.add_column(head, justify="left" if head in left else "right", no_wrap=True)
    return table


def host_speed(described: dict | None) -> str:
    """One line for a host speed as recorded (``HostSpeed.describe()``); "" when none is."""
    if not described:
        return ""
    kernels = ", ".join(f"{k} {v:.3g}" for k, v in (described.get("by_kernel") or {}).items())
    how = described.get("source", "")
    if how == "asked":
        return f"host speed {described['value']:.3g} reference cores (given)"
    model = f" on {described['cpu_model']}" if described.get("cpu_model") else ""
    return (f"host speed {described['value']:.3g} reference cores{model} ({kernels}; spread "
            f"{described.get('spread', 0):.1%}, {how})")
