"""The study report: one self-contained HTML page, a markdown summary and a
JSON of the key figures, for one run or several side by side."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from shoal import render
from shoal.report import answer
from shoal.report import study_figures as figs
from shoal.report import study_workloads
from shoal.report import study_seed
from shoal.report.answer import HOST_SPEED, headline_lines
from shoal.report.html import Section, figure_svg, page, table_html
from shoal.runs import jsonout
from shoal.runs.store import Run
from shoal.study.analysis import analyse
from shoal.study.findings import BenchmarkResult, Findings


def _fmt_perf(value: float, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return render.bandwidth(value) if unit == "B/s" else f"{render.rate(value)}"


def _fmt_ppw(value: float, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.4g} {unit}/W"


def _svg(fig) -> str:
    svg = figure_svg(fig)
    plt.close(fig)
    return svg


def _verdict_html(name: str, f: Findings) -> str:
    modelled = "<span class='modelled'>power</span>" if f.modelled_power else "power measured"
    lines = "<br>".join(html.escape(line) for line in headline_lines(f))
    return (f"<div class='verdict'><b>{html.escape(name)}</b>:<br>{lines}<br><small>"
            f"{html.escape(_measured_text(f))}; {modelled}{html.escape(launch_text(f))}.</small></div>")


LAYOUT_WORDS = {"box": "the MPI's own launch, a daemon in every device",
                "head": "from the head, its daemons starting each rank into its device",
                "local": "on this machine"}


def launch_text(f: Findings) -> str:
    """"; ranks launched: 4xstb from the head (...), reference ..." ("" for old runs)."""
    if not f.launch:
        return ""
    return "; ranks launched: " + ", ".join(f"{config} {LAYOUT_WORDS.get(how, how)}"
                                            for config, how in f.launch.items())


def _measured_text(f: Findings) -> str:
    precision = answer.precision_text(f)
    return ((f"{precision}; " if precision else "") + f"{f.measured_points} measured points, "
            f"{f.unconverged_points} benchmark points did not reach their CI target")


def _points_table(t: BenchmarkResult) -> str:
    unit = t.perf_unit
    rows, flags = [], []
    ref = t.reference
    entries = [(p.nodes, p) for p in t.cluster] + ([("reference", ref)] if ref else [])
    for nodes, p in entries:
        vs = (p.perf_per_W / ref.perf_per_W if ref and math.isfinite(p.perf_per_W)
              and math.isfinite(ref.perf_per_W) else math.nan)
        rows.append({"nodes": nodes, "ranks": p.ranks, "performance": _fmt_perf(p.perf, unit),
                     "converged": "yes" if p.converged else "no",
                     "power": render.watts(p.power_W) if math.isfinite(p.power_W) else "-",
                     "perf/W": _fmt_ppw(p.perf_per_W, unit),
                     "vs reference": "-" if not math.isfinite(vs) else f"{vs:.2f}x",
                     "perf/W spinning": _fmt_ppw(p.perf_per_W_spin or math.nan, unit),
                     "vs reference spinning": _ratio(p.perf_per_W_spin, ref.perf_per_W_spin if ref else None),
                     "results row": p.point_id})
        flags.append(p.power_kind != "measured")
    return table_html(rows, ["nodes", "ranks", "performance", "converged", "power", "perf/W",
                             "vs reference", "perf/W spinning", "vs reference spinning", "results row"],
                      modelled={"power", "perf/W", "vs reference", "perf/W spinning", "vs reference spinning"},
                      modelled_rows=flags)


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or b <= 0:
        return "-"
    return f"{a / b:.2f}x"


def _fit_rows(f: Findings) -> list[dict[str, Any]]:
    rows = []
    for t in f.tests:
        fit = t.fit
        params, se = (fit.params, fit.stderr) if fit else ({}, {})

        def pm(name: str) -> str:
            if params.get(name) is None:
                return "-"
            err = se.get(name)
            return f"{params[name]:.3g} ± {err:.2g}" if err else f"{params[name]:.3g} (fixed)"

        rows.append({"test": t.test, "size": render.byte_size(t.size_B) if t.size_B else "-",
                     "fit": fit.status if fit else (t.status or "-"), "f": pm("f"), "k": pm("k"),
                     "R² perf": f"{fit.r2_perf:.3f}" if fit and fit.r2_perf is not None else "-",
                     "optimum": answer.optimum_text(t.optimum.to_dict() if t.optimum else None)})
    return rows


def _offload_inputs(verdict: dict[str, Any]) -> str:
    inputs = verdict["inputs"]
    rows = []
    sources = inputs.get("sources", {})
    for key in ("rate_Bps", "nodes", "parallel_fraction", "chunk_B", "devices_on_anyway"):
        rows.append({"input": key, "value": inputs.get(key), "source": sources.get(key, "")})
    for part in ("device", "server", "uplink"):
        for key, value in (inputs.get(part) or {}).items():
            if key in ("sources", "name"):
                continue
            rows.append({"input": f"{part}.{key}", "value": value,
                         "source": (inputs[part].get("sources") or {}).get(key, sources.get(part, ""))})
    return table_html(rows, ["input", "value", "source"])


def _options_table(verdict: dict[str, Any]) -> str:
    rows = []
    for option in ("local", "offload"):
        o = verdict[option]
        rows.append({"option": option, "keeps up": "yes" if o["feasible"] else f"no ({o['limit']})",
                     "max rate": render.bandwidth(o["max_rate_Bps"]),
                     "power": render.watts(o["power_W"]),
                     "energy per byte": render.joules(o["energy_J_per_B"]) if o["energy_J_per_B"] else "-",
                     "latency per chunk": render.seconds(o["chunk_latency_s"])})
    return table_html(rows, ["option", "keeps up", "max rate", "power", "energy per byte",
                             "latency per chunk"], modelled={"power", "energy per byte"})


def _emulation_html(run: Run, frame: Any) -> str:
    """How faithful an emulated run was: its time dilation and the points the host ran short."""
    emulated = [c.get("emulation") for c in (run.manifest.get("clusters") or {}).values()
                if c.get("emulation")]
    if not emulated:
        return ""
    parts = []
    for e in emulated:
        parts.append(f"time dilation {e.get('dilation', 1):g} (device CPUs and link rates / D, "
                     f"latencies x D, measured times / D), links by {e.get('link_emulator', 'tc')}")
    # The cluster and the cluster beside its reference are usually emulated alike: say it once.
    text = f"<p><b>{html.escape(run.path.name)}</b>: emulated at " + "; ".join(dict.fromkeys(parts))
    if frame is not None and "host_slack" in getattr(frame, "columns", []):
        short = int((frame["host_slack"] == "short").sum())
        text += (f". The host ran short of CPU during {short} of {len(frame)} points "
                 "(<code>host_slack</code> in results.csv says which, and why)")
    return text + ".</p>"


def build(runs: list[Run], findings: dict[str, Findings] | None = None) -> tuple[str, str, dict[str, Any]]:
    """(HTML, markdown, key figures) for one or several study runs (``findings``: each run's,
    by its directory's name, when the caller has them already)."""
    findings = findings or {run.path.name: analyse(run) for run in runs}
    frames = {run.path.name: run.read("results") for run in runs}
    labels = {name: f.cluster_label for name, f in findings.items()}
    names = list(findings)
    title = "shoal study: " + " vs ".join(f"{labels[n]} ({n})" for n in names)
    intro = (f"<div class='banner'>{html.escape(HOST_SPEED)}</div>"
             if any(f.device_speed == "host" for f in findings.values()) else "")
    intro += "".join(_verdict_html(n, findings[n]) for n in names)
    intro += ("<p>Performance is each test's own metric (bandwidth in B/s, or operations per second "
              "for latency and roundtrip tests). Numbers shown <span class='modelled'>like this</span> "
              "rest on modelled power: a device profile's idle/busy watts driven by measured CPU use, "
              "not a meter. Every row names the results row it comes from.</p>")
    for run in runs:
        intro += _emulation_html(run, frames[run.path.name])
    sections: list[Section] = []
    work = study_workloads.section(findings)
    if work is not None:
        sections.append(work)
    seed = study_seed.section(findings)
    if seed is not None:
        sections.append(seed)
    if not any(f.tests for f in findings.values()):
        return _finish(runs, findings, title, intro, sections)

    summary = Section("Optimal cluster size per test")
    for n in names:
        summary.tables.append(f"<h3>{html.escape(n)}</h3>" + table_html(
            _fit_rows(findings[n]), ["test", "size", "fit", "f", "k", "R² perf", "optimum"]))
    summary.paragraphs.append(
        "Amdahl's speed-up Perf = 1/((1-f)+f/n) and Woo-Lee's Perf/W = 1/(1+(n-1)k(1-f)) are fitted to "
        "the measured performance and performance per watt over node counts (k fixed to the devices' "
        "idle/busy power ratio). A flat or declining curve, or too few node counts, is reported as such "
        "and no optimum is inferred. The recommended count is the largest n whose perf/W stays within "
        "10% of the best.")
    sections.append(summary)

    power = Section("Average power per node count")
    power.figures.append((_svg(figs.power_by_nodes(findings)),
                          "Mean power over all points of each configuration; bars span min..max over tests."))
    for n in names:
        rows = [{"configuration": p["config"], "nodes": p["nodes"], "mean power": render.watts(p["power_mean_W"]),
                 "min": render.watts(p["power_min_W"]), "max": render.watts(p["power_max_W"]),
                 "spinning": render.watts(p["power_spin_W"]) if p.get("power_spin_W") else "-",
                 "kind": p["power_kind"], "points": p["points"]} for p in findings[n].power]
        power.paragraphs.append(
            "Mean power as measured or modelled (waiting ranks asleep under libshoalwait), and "
            "<i>spinning</i>: every core holding a rank at busy watts for the whole point, as under "
            "the MPI libraries' default busy polling, the condition of the thesis's Tables 5.6/5.7.")
        power.tables.append(table_html(rows, ["configuration", "nodes", "mean power", "min", "max", "spinning",
                                              "kind", "points"],
                                       modelled={"mean power", "min", "max", "spinning"},
                                       modelled_rows=[p["power_kind"] != "measured"
                                                      for p in findings[n].power]))
    sections.append(power)

    tests = sorted({t.test for f in findings.values() for t in f.tests})
    for test in tests:
        per_run = {n: next(t for t in findings[n].tests if t.test == test)
                   for n in names if any(t.test == test for t in findings[n].tests)}
        section = Section(test)
        # A test of no size (Barrier) has nothing to draw against message size.
        if any(((f["test"] == test) & (f["size_B"] > 0)).any() for f in frames.values()):
            section.figures.append((_svg(figs.perf_vs_size(frames, test, labels)),
                                    "Median of each point; one line per node count, the reference dashed."))
        section.figures.append((_svg(figs.ppw_vs_nodes(per_run, test)),
                                "Measured performance over power at the representative size; the fitted "
                                "Woo-Lee curve and its prediction beyond the measured node counts."))
        for n, t in per_run.items():
            if t.status is None:
                section.tables.append(f"<h3>{html.escape(n)}</h3>" + _points_table(t))
        sections.append(section)

    return _finish(runs, findings, title, intro, sections)


def _finish(runs: list[Run], findings: dict[str, Findings], title: str, intro: str,
            sections: list[Section]) -> tuple[str, str, dict[str, Any]]:
    """The offload and provenance sections, then the page, markdown and key figures."""
    for n in findings:
        verdict = findings[n].offload.verdict
        off = Section(f"Process locally or offload ({n})")
        off.paragraphs.append(html.escape(f"At {findings[n].offload.nodes_used} device(s): "
                                          f"{findings[n].offload.nodes_from}."))
        off.paragraphs.append(html.escape(verdict["reason"]))
        if verdict.get("crossover_rate_Bps"):
            off.paragraphs.append(f"Energy crossover at {render.bandwidth(verdict['crossover_rate_Bps'])}: "
                                  f"below it, {verdict['cheaper_below_crossover']} is cheaper.")
        off.tables.append(_options_table(verdict))
        off.tables.append(_offload_inputs(verdict))
        off.figures.append((_svg(figs.offload_map(findings[n].offload.map)),
                            "The decision over data rates and device counts, other inputs as in the table."))
        sections.append(off)

    prov = Section("Where these numbers come from")
    for run in runs:
        m = run.manifest
        prov.paragraphs.append(
            f"<b>{html.escape(run.path.name)}</b>: {html.escape(' '.join(m.get('command', [])))}; "
            f"{html.escape(m.get('mpi', {}).get('name', '?'))}; host {html.escape(str(m.get('host', {}).get('cpu_model')))}; "
            f"started {html.escape(str(m.get('started_utc')))}, status {html.escape(str(m.get('status')))}; "
            f"results in <code>{html.escape(str(run.table_path('results')))}</code>.")
        speed = answer.host_speed_text(findings[run.path.name].host_speed, detail=True)
        if speed:
            prov.paragraphs.append(html.escape(speed))
        for note in (m.get("power") or {}).get("notes", []):
            prov.paragraphs.append(f"power: {html.escape(note)}")
    sections.append(prov)

    key = {n: f.to_json() for n, f in findings.items()}
    return page(title, intro, sections), _markdown(findings), key


def _markdown(findings: dict[str, Findings]) -> str:
    lines = ["# shoal study summary", ""]
    if any(f.device_speed == "host" for f in findings.values()):
        lines = [f"**{HOST_SPEED}**", ""] + lines  # the first line a reader sees
    for name, f in findings.items():
        lines += [f"## {name} ({f.cluster_label}, reference: {f.reference})", "",
                  *(f"- {line}" for line in headline_lines(f)),
                  f"- {_measured_text(f)}; "
                  f"power {'modelled from device profiles' if f.modelled_power else 'measured'}", "",
                  *study_workloads.markdown(f)]
        if f.tests:
            lines += ["| test | size | fit | optimum |", "|---|---|---|---|"]
        for row in _fit_rows(f):
            lines.append(f"| {row['test']} | {row['size']} | {row['fit']} | {row['optimum']} |")
        lines.append("")
    return "\n".join(lines)


def write(runs: list[Run], out_dir: Path, findings: dict[str, Findings] | None = None) -> dict[str, Path]:
    """report.html, summary.md and findings.json in ``out_dir``; their paths by kind."""
    html_text, markdown, key = build(runs, findings)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"html": out_dir / "report.html", "markdown": out_dir / "summary.md",
             "json": out_dir / "findings.json"}
    paths["html"].write_text(html_text)
    paths["markdown"].write_text(markdown)
    paths["json"].write_text(jsonout.dumps(key, indent=1))
    return paths
