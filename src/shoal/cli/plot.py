"""`shoal plot RUN...`: per-test figures of one or several runs."""

from __future__ import annotations

import argparse

from shoal.errors import ShoalError
from shoal.inputs import grammar
from shoal.inputs import options as typed
from shoal.runs.store import Run

ORDER = 20
FORMATS = ("png", "svg", "pdf")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="plot benchmark results against message size",
                       description="One figure per test (log-log), one line per run and "
                                   "configuration, error bars = 95%% CI of the median.")
    typed.add_runs_in_out(p, "run directories", "figures")
    p.add_argument("--format", default=("png", "svg"),
                   type=typed.typed(grammar.choices, FORMATS, "figure format"),
                   help="comma-separated formats (default png,svg)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    runs = [Run.open(path) for path in args.runs]
    formats = args.format
    out = args.out or runs[0].path / "figures"
    from shoal.report.figures import plot_runs   # matplotlib and pandas: only when plotting

    written = plot_runs(runs, out, formats)
    if not written:
        raise ShoalError("nothing to plot: the runs hold no test measured at two or more sizes; "
                         "give shoal bench two or more --sizes")
    print(f"{len(written)} figure(s) in {out}")
    return 0
