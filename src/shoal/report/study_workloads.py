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
from shoal.study.findings import Findings, WorkloadResult  # noqa: E402

EXPLAIN = (
    "Each workload runs the same problem at every node count, ranks per device = its cores, "
    "repeated in rounds over the node counts and the reference until the 95 % CI of each point's "
    "median time is within the study's target. Perf/W is work per joule over the timed core phase; "
    "gross counts the devices in use and, once, the switch their links go through; net counts only "
    "the watts above idle. Energy is given under two waiting conditions: <i>sleeping</i>, waiting "
    "ranks asleep under libshoalwait (the power follows the CPU time the work used), and "
    "<i>spinning</i>, every core that holds a rank at busy watts for the whole run, as under the MPI "
    "libraries' default busy polling (the thesis's condition). Amdahl's f is fitted to the speed-up; "
    "Woo-Lee's perf/W with the switch as shared power c (in units of one device's busy watts) has its "
    "best size at n* = sqrt(c f / (k (1 - f))), k = idle/busy watts of a device when sleeping and 1 "
    "when spinning. The n* interval is the 2.5-97.5 % range of n* over 400 bootstrap resamples of the "
    "repetitions, f refitted to each; f ± one standard error is its cross-check. The sensitivity "
    "column gives n* with no switch, half, the profile's and twice its watts.")


def _interval_text(i: Any) -> str:
    d = i if isinstance(i, dict) else i.to_dict()
    if d.get("lo") is None:
        return "-"
    value = "unbounded" if d.get("value") is None else f"{d['value']:.2f}"
    hi = "∞" if d.get("hi") is None else f"{d['hi']:.2f}"
    return f"{value} ({d['lo']:.2f}..{hi})"


def condition_rows(workloads: list[WorkloadResult]) -> list[dict[str, Any]]:
    """Per workload: measured best and n* when sleeping and when spinning, and the energy saved."""
    rows = []
    for w in workloads:
        if not w.conditions:
            continue
        sleep, spin = w.conditions.get("sleeping"), w.conditions.get("spinning")
        saved = [f"n={p['nodes']}: {p['energy_saved']:.0%}" for p in w.cluster if p.get("energy_saved") is not None]
        rows.append({"workload": w.name,
                     "best measured, sleeping": str(sleep and sleep.best_measured or "-"),
                     "n* sleeping (95 %)": _interval_text(sleep.n_star) if sleep else "-",
                     "best measured, spinning": str(spin and spin.best_measured or "-"),
                     "n* spinning (95 %)": _interval_text(spin.n_star) if spin else "-",
                     "energy saved by sleeping": ", ".join(saved) or "-"})
    return rows


def _combined_text(c: Any) -> str:
    d = c if isinstance(c, dict) else c.to_dict()
    weights = ", ".join(f"{name} {w:.2f}" for name, w in d["weights"].items())
    text = (f"{d['condition']}: mix of {weights}; measured best at n = {d['best_measured']}; model "
            f"n*_mix = {_interval_text(d['n_star'])}.")
    if d.get("measured_ppw"):
        text += (" Measured perf/W of the mix over one device's (95 % interval over the points' own "
                 "repetitions): " + ", ".join(f"n = {n}: {i['value']:.3f} ({i['lo']:.3f}..{i['hi']:.3f})"
                                             for n, i in d["measured_ppw"].items()) + ".")
    if d.get("ppw_vs_best"):
        text += (f" Over the best's (n = {d['best_measured']}), within each resample; an interval that holds 1 "
                 "is a size the measurements cannot tell from the best: "
                 + ", ".join(f"n = {n}: {i['value']:.3f} ({i['lo']:.3f}..{i['hi']:.3f})"
                             for n, i in d["ppw_vs_best"].items() if int(n) != d["best_measured"]) + ".")
    if d["left_out"]:
        text += " Left out: " + "; ".join(f"{k} ({v})" for k, v in d["left_out"].items()) + "."
    text += (" Where they disagree: " + "; ".join(d["disagree"]) + "." if d["disagree"]
             else " The members agree with the mix.")
    return text


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, fmt)


def _n_star_text(w: WorkloadResult) -> str:
    star = w.n_star
    if star is None:
        return "-" if w.fit is None or w.fit.status != "ok" else "unbounded"
    lo, hi = w.n_star_range_se or (None, None)
    return f"{star:.2f} ({_num(lo)}..{_num(hi) if hi is not None else '∞'})"


def _sensitivity(w: WorkloadResult) -> str:
    return ", ".join(f"{s['switch_W']:.3g} W: {_num(s['n_star'], '.2g') if s['n_star'] else '∞'}"
                     for s in w.n_star_by_switch_W)


def summary_rows(workloads: list[WorkloadResult]) -> list[dict[str, Any]]:
    """Per workload: speed-up, f two ways, n* (sleeping) and the verdict."""
    rows = []
    for w in workloads:
        top = w.cluster[-1] if w.cluster else {}
        fit = w.fit
        rows.append({
            "workload": w.name,
            # Over the fewest devices measured, which need not be one.
            "speed-up": (f"{top.get('speedup', 0):.2f} from n={w.cluster[0]['nodes']} to n={top['nodes']}"
                         if top else "-"),
            "f (fit)": (f"{fit.f:.3f} ± {fit.f_stderr:.3f}" if fit and fit.f is not None
                        and fit.f_stderr is not None else "-"),
            "f (serial)": _num(w.f_serial, ".3f"),
            "R² perf": _num(fit.r2_perf if fit else None, ".3f"),
            "R² medians": _num(fit.r2_medians if fit else None, ".3f"),
            "n*": _interval_text(w.conditions["sleeping"].n_star) if "sleeping" in w.conditions else "-",
            "n* (f ± SE)": _n_star_text(w),
            "best measured": str(w.n_best_measured or "-"),
            "n* by switch W": _sensitivity(w),
            "verdict": w.verdict if w.status is None else w.status,
        })
    return rows


def section(findings: dict[str, Findings]) -> Section | None:
    """The workloads section of the report (None when no run measured workloads)."""
    if not any(f.workloads for f in findings.values()):
        return None
    out = Section("Optimal cluster size from real workloads")
    out.paragraphs.append(EXPLAIN)
    for name, f in findings.items():
        if not f.workloads:
            continue
        for c in f.combined.values():
            out.paragraphs.append(f"<b>{html.escape(name)}</b>, over the workloads whose fits hold: "
                                  f"{html.escape(_combined_text(c))}")
        out.tables.append(f"<h3>{html.escape(name)}</h3>" + table_html(
            summary_rows(f.workloads), ["workload", "speed-up", "f (fit)", "f (serial)", "R² perf", "R² medians", "n*",
                                           "n* (f ± SE)", "best measured", "n* by switch W", "verdict"]))
        out.tables.append(table_html(condition_rows(f.workloads), [
            "workload", "best measured, sleeping", "n* sleeping (95 %)", "best measured, spinning",
            "n* spinning (95 %)", "energy saved by sleeping"]))
        missed = f.precision.not_converged if f.precision else []
        if missed:
            out.paragraphs.append(
                f"{len(missed)} workload point(s) did not reach the CI target (their repetitions or time "
                "ran out first, or this host's noise put the target out of reach); their medians are "
                "shown, with the CI they reached and why:")
            out.tables.append(table_html([{"workload": m["workload"], "configuration": m["config"],
                                           "nodes": m["nodes"], "repetitions": m["reps"],
                                           "CI reached": render.percent(m["ci_rel"]) if m["ci_rel"] else "-",
                                           "why": m["why"]} for m in missed],
                                         ["workload", "configuration", "nodes", "repetitions", "CI reached", "why"]))
        for w in f.workloads:
            if w.cluster:
                fig = figure(w)
                out.figures.append((figure_svg(fig), f"{w.name}: medians per node count "
                                    "(error bars: min..max over repetitions); lines: the fitted models."))
                plt.close(fig)
                out.tables.append(_points_table(w))
    return out


def _points_table(w: WorkloadResult) -> str:
    unit = w.unit
    entries = list(w.cluster) + ([dict(w.reference, nodes="reference")] if w.reference else [])
    rows = [{"nodes": p["nodes"], "ranks": p["ranks"], "time": render.seconds(p["time_median_s"]),
             "reps": p["reps"], "CI": render.percent(p["ci_rel"]) if p.get("ci_rel") is not None else "-",
             "spread": render.percent(p["time_spread"]) if p["time_spread"] is not None else "-",
             "speed-up": _num(p.get("speedup")), "serial": render.percent(p["serial_share"]),
             "comm": render.percent(p["comm_share"]),
             "power": render.watts(p["power_W"]) if p["power_W"] else "-",
             "switch": render.watts(p["shared_power_W"]) if p["shared_power_W"] else "-",
             f"{unit}/J": _num(p["perf_per_W"], ".4g"), f"{unit}/J net": _num(p["perf_per_W_net"], ".4g"),
             "power spinning": render.watts(p["power_spin_W"]) if p.get("power_spin_W") else "-",
             f"{unit}/J spinning": _num(p.get("perf_per_W_spin"), ".4g"),
             "check": p["checks"], "launch": p.get("launch") or "-",
             "rows": " ".join(p["point_ids"])} for p in entries]
    return table_html(rows, ["nodes", "ranks", "launch", "time", "reps", "CI", "spread", "speed-up", "serial", "comm",
                             "power", "switch", f"{unit}/J", f"{unit}/J net", "power spinning",
                             f"{unit}/J spinning", "check", "rows"],
                      modelled={"power", "switch", f"{unit}/J", f"{unit}/J net", "power spinning",
                                f"{unit}/J spinning"})


def figure(w: WorkloadResult) -> plt.Figure:
    """Speed-up and perf/W (gross and net) over node counts, with the fitted curves and n*."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.8))
    points = w.cluster
    n = np.array([p["nodes"] for p in points], dtype=float)
    base = points[0]["time_median_s"]
    speed = np.array([p["speedup"] for p in points])
    fit = w.model_fit
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
    spin = np.array([p.get("perf_per_W_spin") or np.nan for p in points])
    if np.isfinite(spin).any() and np.isfinite(spin[0]):
        right.plot(n, spin / ppw[0], "^", label="measured, spinning")
    if fit is not None and fit.has_efficiency:
        curve = fit.predict(grid).perf_per_watt
        right.plot(grid, curve / curve[0], "-", label=f"Woo-Lee sleeping, k = {w.k:.2f}, c = {w.c:.2f}")
        from shoal.model import woo_lee_perf_per_watt

        spun = woo_lee_perf_per_watt(grid, fit.f, 1.0, w.c)
        if np.isfinite(spin[0]):
            right.plot(grid, spun * spin[0] / ppw[0], "--", label="Woo-Lee spinning, k = 1")
    if w.n_star and w.n_star <= grid.max():
        right.axvline(w.n_star, linestyle=":", color="C3", label=f"n* = {w.n_star:.2f}")
    ref = w.reference
    if ref and ref.get("perf_per_W") and points[0]["perf_per_W"]:
        right.axhline(ref["perf_per_W"] / points[0]["perf_per_W"], label="reference", **REFERENCE_STYLE)
    right.set_xlabel("devices")
    right.set_ylabel("perf/W relative to 1 device")
    right.grid(True, alpha=0.3)
    right.legend(fontsize=7)
    fig.suptitle(w.name)
    fig.tight_layout()
    return fig


def markdown(f: Findings) -> list[str]:
    if not f.workloads:
        return []
    lines = ["| workload | speed-up | f (fit) | n* sleeping | best measured | verdict |", "|---|---|---|---|---|---|"]
    for row in summary_rows(f.workloads):
        lines.append(f"| {row['workload']} | {row['speed-up']} | {row['f (fit)']} | {row['n*']} | "
                     f"{row['best measured']} | {row['verdict']} |")
    lines += ["", "| workload | best sleeping | n* sleeping | best spinning | n* spinning | energy saved |",
              "|---|---|---|---|---|---|"]
    for row in condition_rows(f.workloads):
        lines.append(f"| {row['workload']} | {row['best measured, sleeping']} | {row['n* sleeping (95 %)']} | "
                     f"{row['best measured, spinning']} | {row['n* spinning (95 %)']} | "
                     f"{row['energy saved by sleeping']} |")
    for c in f.combined.values():
        lines += ["", f"- {_combined_text(c)}"]
    return lines + [""]
