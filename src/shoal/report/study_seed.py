"""The study report beside a seed's printed numbers, and the points a study planned not to run
(computed by shoal.study.seed_compare, carried in each run's findings)."""

from __future__ import annotations

import html

from shoal.report.html import Section, table_html
from shoal.study.findings import Findings

COLUMNS = ["quantity", "configuration", "launch", "shoal", "seed", "shoal / seed", "seed's source"]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" + ("" if unit == "1" else f" {unit}")


def section(findings: dict[str, Findings]) -> Section | None:
    """'Beside the seed' and 'Points not run', for the runs that have either."""
    out = Section("Beside the seed, and the points not run")
    for name, f in findings.items():
        rows = f.beside_seed
        if rows:
            out.tables.append(f"<h3>{html.escape(name)}</h3>" + table_html(
                [{"quantity": r["quantity"], "configuration": r["configuration"],
                  "launch": r.get("launch") or "-",
                  "shoal": _fmt(r["shoal"], r["unit"]),
                  "seed": _fmt(r["seed"], r["unit"]) + (f"..{_fmt(r['seed_high'], r['unit'])}"
                                                         if r["seed_high"] else ""),
                  "shoal / seed": "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
                  "seed's source": r["source"]} for r in rows], COLUMNS))
        skipped = f.not_run
        if skipped:
            out.tables.append(f"<h3>{html.escape(name)}: {len(skipped)} "
                              f"{'point' if len(skipped) == 1 else 'points'} not run</h3>"
                              + table_html(skipped, ["test", "size_B", "nodes", "reason"]))
    if not out.tables:
        return None
    out.paragraphs.append(
        "Seed 000 (preset seed000): each of the thesis's readings of its six boards and each "
        "Table 5.6 figure beside the same quantity measured here (a '-' seed: the thesis says it in "
        "words only); one board's watts are the profile's model driven by the ranks' CPU use, "
        "against the WT300 readings of the real board. ")
    out.paragraphs.append(
        "Seed 002 (preset seed002): each measured number beside the one seed 002 prints for the same experiment "
        "(shoal/data/seed002.csv names the table, figure or paragraph): shoal's is the median of "
        "the counted repetitions of a workload, or a benchmark point's median, in device time. "
        "Sequence alignment ran on Table I's sets scaled down; the seed's times stand divided by "
        "the same factor of work. Where shoal's mean runs over other sizes or node counts than the "
        "seed's (a quick study), both stand with no ratio and the source says over what. Points not run were planned so before the study started: "
        "each would cost more, by its calls on the link model and a fixed cost by node count, "
        "than the study's time for IMB on the shared plant left.")
    return out
