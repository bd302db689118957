"""The study's figures, as the thesis drew them (Figures 5.24-5.38) plus the model.

Each function returns a matplotlib Figure; callers embed or save it.
Modelled power is drawn hatched and labelled "modelled".
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from shoal.report.figures import METRIC_COLUMNS, size_and_metric_axes  # noqa: E402
from shoal.study.findings import BenchmarkResult, Findings  # noqa: E402

REFERENCE_STYLE = {"color": "black", "linestyle": "--", "linewidth": 1.6}


def perf_vs_size(frames: dict[str, pd.DataFrame], test: str, cluster_labels: dict[str, str]) -> plt.Figure:
    """One test's metric against message size, one line per node count (and run)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    several = len(frames) > 1
    for run_name, frame in frames.items():
        rows = frame[(frame["test"] == test) & (frame["size_B"] > 0)]
        if rows.empty:
            continue
        metric = rows["metric"].iloc[0]
        column, ylabel = METRIC_COLUMNS[metric]
        for (config, nodes), group in rows.groupby(["config", "nodes"], sort=True):
            group = group.sort_values("size_B")
            is_ref = config == "reference"
            label = "reference" if is_ref else f"{nodes} node{'s' if nodes > 1 else ''}"
            if several:
                label = f"{run_name}: {label}"
            style = REFERENCE_STYLE if is_ref else {"marker": "o", "markersize": 3, "linewidth": 1.2}
            ax.plot(group["size_B"], group[column], label=label, **style)
        ax.set_ylabel(ylabel)
        size_and_metric_axes(ax, metric)
    ax.set_xlabel("message size")
    ax.set_title(f"{test}: performance against message size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def power_by_nodes(findings: dict[str, Findings]) -> plt.Figure:
    """Average power of each node count (thesis Fig. 5.32), reference as a line."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    width = 0.8 / max(1, len(findings))
    for i, (run_name, f) in enumerate(findings.items()):
        cluster = [p for p in f.power if not p["is_reference"]]
        if not cluster:
            continue
        x = np.array([p["nodes"] for p in cluster], dtype=float) + (i - (len(findings) - 1) / 2) * width
        modelled = any(p["power_kind"] != "measured" for p in cluster)
        label = (f"{run_name}: " if len(findings) > 1 else "") + ("modelled" if modelled else "measured")
        ax.bar(x, [p["power_mean_W"] for p in cluster], width=width, label=label,
               hatch="//" if modelled else None, alpha=0.8,
               yerr=[[p["power_mean_W"] - p["power_min_W"] for p in cluster],
                     [p["power_max_W"] - p["power_mean_W"] for p in cluster]], capsize=3)
        for p in f.power:
            if p["is_reference"]:
                kind = "modelled" if p["power_kind"] != "measured" else "measured"
                ax.axhline(p["power_mean_W"], label=f"reference ({kind})", **REFERENCE_STYLE)
    ax.set_xlabel("nodes")
    ax.set_ylabel("average power (W)")
    ax.set_title("Average power per node count (min..max over the tests)")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def ppw_vs_nodes(tests: dict[str, BenchmarkResult], test: str) -> plt.Figure:
    """Performance per watt against node count, the reference, and the fitted model."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    unit = ""
    for run_name, t in tests.items():
        points = [p for p in t.cluster if math.isfinite(p.perf_per_W)]
        if not points:
            continue
        unit = t.perf_unit
        prefix = f"{run_name}: " if len(tests) > 1 else ""
        n = np.array([p.nodes for p in points], dtype=float)
        ppw = np.array([p.perf_per_W for p in points])
        lo = np.array([p.perf_ci[0] / p.power_W for p in points])
        hi = np.array([p.perf_ci[1] / p.power_W for p in points])
        modelled = any(p.power_kind != "measured" for p in points)
        line = ax.errorbar(n, ppw, yerr=[np.clip(ppw - lo, 0, None), np.clip(hi - ppw, 0, None)],
                           fmt="o", capsize=3,
                           label=f"{prefix}measured perf / {'modelled' if modelled else 'measured'} W")
        fit = t.model_fit
        if fit is not None and fit.ok and fit.has_efficiency:
            grid = np.linspace(1, max(2 * n.max(), n.max() + 2), 60)
            pred = fit.predict(grid)
            ax.plot(grid, pred.perf_per_watt, "-", color=line[0].get_color(), alpha=0.7,
                    label=f"{prefix}Woo-Lee fit (f={fit.f:.2f}, k={fit.k:.2f})")
            beyond = grid > n.max()
            ax.fill_between(grid[beyond], (pred.perf_per_watt - 2 * pred.perf_per_watt_se)[beyond],
                            (pred.perf_per_watt + 2 * pred.perf_per_watt_se)[beyond],
                            color=line[0].get_color(), alpha=0.12, label=f"{prefix}prediction beyond measured n")
        opt = t.optimum
        if opt and opt.status == "ok" and opt.n_recommended:
            ax.axvline(opt.n_recommended, color=line[0].get_color(), linestyle=":",
                       label=f"{prefix}recommended n = {opt.n_recommended}")
        ref = t.reference
        if ref and math.isfinite(ref.perf_per_W):
            ax.axhline(ref.perf_per_W, label=f"{prefix}reference", **REFERENCE_STYLE)
    ax.set_yscale("log")  # the reference may be orders of magnitude away
    ax.set_xlabel("nodes")
    ax.set_ylabel(f"performance per watt ({unit}/W)")
    size = next((t.size_B for t in tests.values() if t.size_B is not None), None)
    ax.set_title(f"{test}: performance per watt" + (f" at {size} B" if size is not None else ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def offload_map(rows: list[dict[str, Any]]) -> plt.Figure:
    """Which option wins over stream rate and node count."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    colors = {"local": "#3a7d2c", "offload": "#2c5d9e", "neither": "#bbbbbb"}
    for choice, color in colors.items():
        pts = [r for r in rows if r["choice"] == choice]
        if pts:
            ax.scatter([r["rate_Bps"] for r in pts], [r["nodes"] for r in pts], c=color, s=28,
                       marker="s", label={"local": "process locally", "offload": "ship to datacenter",
                                          "neither": "neither keeps up"}[choice])
    ax.set_xscale("log")
    ax.set_xlabel("data stream produced at the devices (B/s)")
    ax.set_ylabel("devices")
    ax.set_title("Process locally or offload (lower energy among feasible options)")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
