"""Per rank count: median time, spread over repetitions, speed-up, phases, energy.

The summary is derived from ``results.csv`` and written as ``summary.csv``
(rewritten whole, like every derived table). Speed-up is against the
smallest rank (node) count of the same configuration; spread is
(max - min) / median over the repetitions.
"""

from __future__ import annotations

import statistics
from typing import Any

from shoal.runs.store import Run

SUMMARY_COLUMNS = [
    "config", "nodes", "ranks", "workload", "size", "reps", "checks",
    "time_median_s", "time_min_s", "time_max_s", "time_spread", "speedup",
    "compute_median_s", "comm_median_s", "serial_median_s", "throughput_median_per_s",
    "energy_median_J", "energy_per_unit_median_J", "energy_per_B_median_J", "power_median_W",
]


def _median(rows: list[dict[str, str]], column: str) -> float | None:
    """The median of a column, None where it is empty (an empty cell, JSON null)."""
    values = [float(r[column]) for r in rows if r.get(column) not in (None, "")]
    return statistics.median(values) if values else None


def summarize(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int, int], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault((row["config"], int(row["nodes"]), int(row["ranks"])), []).append(row)
    out: list[dict[str, Any]] = []
    base: dict[str, float] = {}
    for (config, nodes, ranks), group in sorted(groups.items()):
        times = [float(r["time_s"]) for r in group]
        median = statistics.median(times)
        base.setdefault(config, median)
        checks = sorted({r["check"] for r in group})
        out.append({
            "config": config, "nodes": nodes, "ranks": ranks,
            "workload": group[0]["workload"], "size": group[0]["size"], "reps": len(group),
            "checks": "/".join(checks),
            "time_median_s": median, "time_min_s": min(times), "time_max_s": max(times),
            "time_spread": (max(times) - min(times)) / median if median > 0 else None,
            "speedup": base[config] / median if median > 0 else None,
            "compute_median_s": _median(group, "compute_s"),
            "comm_median_s": _median(group, "comm_s"),
            "serial_median_s": _median(group, "serial_s"),
            "throughput_median_per_s": _median(group, "throughput_per_s"),
            "energy_median_J": _median(group, "energy_J"),
            "energy_per_unit_median_J": _median(group, "energy_per_unit_J"),
            "energy_per_B_median_J": _median(group, "energy_per_B_J"),
            "power_median_W": _median(group, "power_mean_W"),
        })
    return out


def write(run: Run) -> list[dict[str, Any]]:
    rows = summarize(run.rows("results"))
    run.rewrite("summary", rows, SUMMARY_COLUMNS)
    traffic_figures(run)
    return rows


def traffic_figures(run: Run) -> list:
    """A heatmap of who talked to whom per configuration and rank count (its first
    repetition's launch), from ``traffic.csv`` when libshoalwait counted it."""
    cells = run.rows("traffic") if run.table_path("traffic").exists() else []
    if not cells:
        return []
    from shoal.wait import traffic

    launches: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    first_rep: dict[tuple[str, int, int], str] = {}
    for c in cells:
        key = (c["config"], int(c["nodes"]), int(c["ranks"]))
        if first_rep.setdefault(key, c["rep"]) == c["rep"]:
            launches.setdefault(key, []).append(
                {"src": int(c["src"]), "dst": int(c["dst"]), "kind": c["kind"],
                 "bytes": int(c["bytes"]), "messages": int(c["messages"]), "what": c["workloads"]})
    paths = []
    for (config, nodes, ranks), table in sorted(launches.items()):
        stem = run.path / f"traffic-{config}-{nodes}n-{ranks}r"
        paths += traffic.heatmap(table, ranks, stem, f"{table[0]['what']} on {config}, "
                                                     f"{nodes} node(s), {ranks} ranks")
    return paths
