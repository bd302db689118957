"""`shoal report RUN...`: the study report of one run, or several side by side."""

from __future__ import annotations

import argparse

from shoal.errors import ShoalError
from shoal.inputs import options as typed
from shoal.runs.store import Run

ORDER = 15


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write the HTML/markdown/JSON report of study runs",
                       description="A self-contained HTML page (opens offline), a markdown summary and "
                                   "a JSON of the key figures; several runs are compared side by side.")
    typed.add_runs_in_out(p, "study run directories", "report")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from shoal.report import study_report

    runs = [Run.open(path) for path in args.runs]
    for r in runs:
        if r.manifest.get("kind") != "study":
            raise ShoalError(f"{r.path} is a '{r.manifest.get('kind')}' run; shoal report takes study "
                             "runs (use shoal plot for benchmark runs)")
    paths = study_report.write(runs, args.out or runs[0].path / "report")
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0
