"""The workloads part of the study report: the best cluster size from real programs.

One section for all workloads (a summary table with n*, its range, the
measured best and the f cross-check), and per workload a figure of
speed-up and perf/W over node counts with the fitted curves.
"""

from __future__ import annotations

import html
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from shoal import render  # noqa: E402
from shoal.report.html import Section, figure_svg, table_html  # noqa: E402
from shoal.report.study_figures import REFERENCE_STYLE  # noqa: E402

EXPLAIN = (
    "Each workload runs the same problem at every node count, ranks per device = its cores, "
    "waiting ranks under libshoalwait so that waiting shows as idle power. Perf/W is work per joule "
    "over the timed core phase; gross counts the devices in use and, once, the switch their links "
    "go through; net counts only the watts above idle. Amdahl's f is fitted to the speed-up; "
    "Woo-Lee's perf/W with the switch as shared power c (in units of one device's busy watts) has "
    "its best size at n* = sqrt(c f / (k (1 - f))), k = idle/busy watts of a device. The range of n* "
    "is one standard error of f either way; the sensitivity column gives n* with no switch, half, "
    "the profile's and twice its watts.")


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, fmt)


def _n_star_text(w: dict[str, Any]) -> str:
    star = w.get("n_star")
    if star is None:
        return "-" if w["fit"]["status"] != "ok" else "unbounded"
    lo, hi = w.get("n_star_range") or (None, None)
    return f"{star:.2f} ({_num(lo)}..{_num(hi) if hi is not None else '∞'})"


def _sensitivity(w: dict[str, Any]) -> str:
    return ", ".join(f"{s['switch_W']:.3g} W: {_num(s['n_star'], '.2g') if s['n_star'] else '∞'}"
                     for s in w.get("n_star_by_switch_W", []))


def summary_rows(workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for w in workloads:
        top = w["cluster"][-1] if w.get("cluster") else {}
        fit = w["fit"]
        rows.append({
            "workload": f"{w['workload']} {w['size']}",
            "speed-up": f"{top.get('speedup', 0):.2f} at n={top.get('nodes', '-')}" if top else "-",
            "f (fit)": (f"{fit['f']:.3f} ± {fit['f_stderr']:.3f}" if fit.get("f") is not None
                        and fit.get("f_stderr") is not None else "-"),
            "f (serial)": _num(w.get("f_serial"), ".3f"),
            "R² perf": _num(fit.get("r2_perf"), ".3f"),
            "n*": _n_star_text(w),
            "best measured": str(w.get("n_best_measured") or "-"),
            "n* by switch W": _sensitivity(w),
            "verdict": w.get("verdict", w.get("status", "")),
        })
    return rows


def section(findings: dict[str, dict[str, Any]]) -> Section | None:
    """The workloads section of the report (None when no run measured workloads)."""
    if not any(f.get("workloads") for f in findings.values()):
        return None
    out = Section("Optimal cluster size from real workloads")
    out.paragraphs.append(EXPLAIN)
    for name, f in findings.items():
        if not f.get("workloads"):
            continue
        overall = f.get("workloads_overall")
        if overall:
            out.paragraphs.append(f"<b>{html.escape(name)}</b>, over the workloads the model describes: "
                                  f"{html.escape(overall['reason'])}.")
        out.tables.append(f"<h3>{html.escape(name)}</h3>" + table_html(
            summary_rows(f["workloads"]), ["workload", "speed-up", "f (fit)", "f (serial)", "R² perf", "n*",
                                           "best measured", "n* by switch W", "verdict"]))
        for w in f["workloads"]:
            if w.get("cluster"):
                fig = figure(w)
                out.figures.append((figure_svg(fig), f"{w['workload']} {w['size']}: medians per node count "
                                    "(error bars: min..max over repetitions); lines: the fitted models."))
                plt.close(fig)
                out.tables.append(_points_table(w))
    return out


def _points_table(w: dict[str, Any]) -> str:
    unit = w["unit"]
    entries = list(w["cluster"]) + ([dict(w["reference"], nodes="reference")] if w.get("reference") else [])
    rows = [{"nodes": p["nodes"], "ranks": p["ranks"], "time": render.seconds(p["time_median_s"]),
             "spread": render.percent(p["time_spread"]) if p["time_spread"] is not None else "-",
             "speed-up": _num(p.get("speedup")), "serial": render.percent(p["serial_share"]),
             "comm": render.percent(p["comm_share"]),
             "power": render.watts(p["power_W"]) if p["power_W"] else "-",
             "switch": render.watts(p["shared_power_W"]) if p["shared_power_W"] else "-",
             f"{unit}/J": _num(p["perf_per_W"], ".4g"), f"{unit}/J net": _num(p["perf_per_W_net"], ".4g"),
             "check": p["checks"]} for p in entries]
    return table_html(rows, ["nodes", "ranks", "time", "spread", "speed-up", "serial", "comm", "power",
                             "switch", f"{unit}/J", f"{unit}/J net", "check"],
                      modelled={"power", "switch", f"{unit}/J", f"{unit}/J net"})


def figure(w: dict[str, Any]) -> plt.Figure:
    """Speed-up and perf/W (gross and net) over node counts, with the fitted curves and n*."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.8))
    points = w["cluster"]
    n = np.array([p["nodes"] for p in points], dtype=float)
    base = points[0]["time_median_s"]
    speed = np.array([p["speedup"] for p in points])
    fit = w.get("_fit")
    grid = np.linspace(1, max(n.max() * 2, n.max() + 2), 80)
    left.plot(grid, grid, color="0.7", linewidth=1, label="linear")
    left.plot(n, speed, "o", label="measured (median)")
    if fit is not None:
        left.plot(grid, fit.predict(grid).speedup, "-", label=f"Amdahl, f = {fit.f:.3f}")
    left.set_xlabel("devices")
    left.set_ylabel(f"speed-up over 1 device ({render.seconds(base)})")
    left.grid(True, alpha=0.3)
    left.legend(fontsize=7)

    ppw = np.array([p["perf_per_W"] or np.nan for p in points])
    net = np.array([p["perf_per_W_net"] or np.nan for p in points])
    right.plot(n, ppw / ppw[0], "o", label="measured, gross")
    if np.isfinite(net).any() and np.isfinite(net[0]):
        right.plot(n, net / net[0], "s", mfc="none", label="measured, net of idle")
    if fit is not None and fit.has_efficiency:
        curve = fit.predict(grid).perf_per_watt
        right.plot(grid, curve / curve[0], "-", label=f"Woo-Lee, k = {w['k']:.2f}, c = {w['c']:.2f}")
    if w.get("n_star") and w["n_star"] <= grid.max():
        right.axvline(w["n_star"], linestyle=":", color="C3", label=f"n* = {w['n_star']:.2f}")
    ref = w.get("reference")
    if ref and ref.get("perf_per_W") and points[0]["perf_per_W"]:
        right.axhline(ref["perf_per_W"] / points[0]["perf_per_W"], label="reference", **REFERENCE_STYLE)
    right.set_xlabel("devices")
    right.set_ylabel("perf/W relative to 1 device")
    right.grid(True, alpha=0.3)
    right.legend(fontsize=7)
    fig.suptitle(f"{w['workload']} {w['size']}")
    fig.tight_layout()
    return fig


def markdown(f: dict[str, Any]) -> list[str]:
    if not f.get("workloads"):
        return []
    lines = ["| workload | speed-up | f (fit) | n* | best measured | verdict |", "|---|---|---|---|---|---|"]
    for row in summary_rows(f["workloads"]):
        lines.append(f"| {row['workload']} | {row['speed-up']} | {row['f (fit)']} | {row['n*']} | "
                     f"{row['best measured']} | {row['verdict']} |")
    return lines + [""]
