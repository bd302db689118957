"""Per-test figures: a metric against message size, one line per run/configuration.

Drawn the way the thesis draws its Figures 5.5-5.31: log-log axes, the
message size on x, the test's own metric on y (bandwidth in B/s, latency in
s, roundtrip in transactions/s), with the 95% confidence interval of the
median as error bars.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from shoal import render
from shoal.runs.store import Run

METRIC_COLUMNS = {
    "bandwidth": ("bandwidth_median_Bps", "bandwidth"),
    "time": ("time_median_s", "time per operation"),
    "rate": ("rate_median_Hz", "transactions per second"),
}
# Tick labels in pretty units (the data stays SI): "4 KiB", "10 µs", "1 GB/s".
TICK_TEXT = {"bandwidth": render.bandwidth, "time": render.seconds, "rate": render.rate}


@dataclass(frozen=True)
class Series:
    label: str
    frame: pd.DataFrame


def load_results(runs: list[Run]) -> pd.DataFrame:
    """All results rows of several runs, with a ``run`` column naming each."""
    frames = []
    for run in runs:
        frame = run.read("results")
        if frame.empty:
            continue
        frame["run"] = run.path.name
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _error_bars(group: pd.DataFrame, metric: str) -> tuple[list[float], list[float]]:
    """Asymmetric error bars from the CI of the median time."""
    column = METRIC_COLUMNS[metric][0]
    y = group[column]
    if metric == "time":
        low, high = group["time_ci_low_s"], group["time_ci_high_s"]
    else:
        scale = group["bytes_per_op_B"] if metric == "bandwidth" else 1.0
        low, high = scale / group["time_ci_high_s"], scale / group["time_ci_low_s"]
    return list((y - low).clip(lower=0)), list((high - y).clip(lower=0))


def size_and_metric_axes(ax, metric: str) -> None:
    """Log-log axes labelled in bytes (powers of two) and the metric's own unit."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=9))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: render.byte_size(v) if v >= 1 else ""))
    text = TICK_TEXT[metric]
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: text(v)))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_runs(runs: list[Run], out_dir: Path, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    """Write one figure per test; return the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = load_results(runs)
    written: list[Path] = []
    if data.empty:
        return written
    out_dir.mkdir(parents=True, exist_ok=True)
    several_runs = data["run"].nunique() > 1
    for test, by_test in data.groupby("test", sort=True):
        metric = by_test["metric"].iloc[0]
        if metric not in METRIC_COLUMNS or by_test["size_B"].nunique() < 2:
            continue
        column, ylabel = METRIC_COLUMNS[metric]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for keys, group in by_test.groupby(["run", "config", "nodes", "ranks"], sort=True):
            run_name, config, nodes, ranks = keys
            group = group.sort_values("size_B")
            group = group[group["size_B"] > 0]
            label = f"{config}, {ranks} ranks" + (f", {nodes} nodes" if nodes > 1 else "")
            if several_runs:
                label = f"{run_name}: {label}"
            lower, upper = _error_bars(group, metric)
            unconverged = group["converged"].astype(str).str.lower() != "true"
            line = ax.errorbar(group["size_B"], group[column], yerr=[lower, upper], marker="o",
                               markersize=3, capsize=2, linewidth=1.2, label=label)
            if unconverged.any():
                ax.plot(group["size_B"][unconverged], group[column][unconverged], "x",
                        color=line[0].get_color(), markersize=8)
        size_and_metric_axes(ax, metric)
        ax.set_xlabel("message size")
        ax.set_ylabel(ylabel)
        ax.set_title(test)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        if (by_test["converged"].astype(str).str.lower() != "true").any():
            ax.text(0.01, 0.01, "x = CI target not reached", transform=ax.transAxes, fontsize=7)
        fig.tight_layout()
        for fmt in formats:
            path = out_dir / f"{test}.{fmt}"
            fig.savefig(path)
            written.append(path)
        plt.close(fig)
    return written
