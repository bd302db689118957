"""`shoal compare RUN_A RUN_B`: what differs between two runs' stacks, and which results moved."""

from __future__ import annotations

import argparse

from shoal import render
from shoal.inputs import options as typed
from shoal.runs import jsonout
from shoal.runs.store import Run

ORDER = 21
SHOWN = 20   # moved points listed in the table (all are in --json and compare.json)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare two runs: stack differences and results that moved",
                       description="Names what differs between two bench or study runs' stacks "
                                   "(kernel, its configuration, governor, MPI build, compiler, "
                                   "background activity) and each point whose 95% CI of the "
                                   "median does not overlap between the runs; writes the "
                                   "overlay figures and compare.json.")
    p.add_argument("run_a", type=typed.run_dir, metavar="RUN_A", help="the first run directory")
    p.add_argument("run_b", type=typed.run_dir, metavar="RUN_B", help="the second run directory")
    p.add_argument("--again-a", type=typed.run_dir, action="append", default=[], metavar="RUN",
                   help="RUN_A's stack measured again (repeatable): a point moved only where "
                        "every run of one side is slower than every run of the other")
    p.add_argument("--again-b", type=typed.run_dir, action="append", default=[], metavar="RUN",
                   help="RUN_B's stack measured again (repeatable)")
    p.add_argument("--out", type=typed.out_dir, default=None,
                   help="where to write figures and compare.json (default: RUN_A/compare-RUN_B)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from shoal.report import stack_compare

    a, b = Run.open(args.run_a), Run.open(args.run_b)
    found = stack_compare.compare(a, b, tuple(Run.open(r) for r in args.again_a),
                                  tuple(Run.open(r) for r in args.again_b))
    out = args.out or a.path / f"compare-{b.path.name}"
    out.mkdir(parents=True, exist_ok=True)
    figures = stack_compare.write_figures(a, b, out)
    (out / "compare.json").write_text(jsonout.dumps(found.to_json(), indent=1) + "\n")
    if args.json:
        print(jsonout.dumps({**found.to_json(), "figures": [str(p) for p in figures]}, indent=1))
        return 0
    _print(found, a.path.name, b.path.name)
    print(f"{len(figures)} figure(s) and compare.json in {out}")
    return 0


def _print(found, name_a: str, name_b: str) -> None:
    from rich.console import Console

    console = Console()
    if found.differences:
        table = render.narrow_table(["fact", "A", "B"], left=("fact", "A", "B"),
                                    title=f"stack: {len(found.differences)} difference(s)")
        for d in found.differences:
            table.add_row(d.fact, _text(d.a), _text(d.b))
        console.print(table)
    else:
        print("stack: no difference recorded")
    print(f"A = {name_a}, B = {name_b}")
    beyond = "their 95% CIs"
    if found.repeats:
        n_a, n_b = found.runs
        beyond = f"every run of the other side ({n_a} and {n_b} runs; by chance: {found.chance:.0%} of points)"
        if found.within_spread:
            print(f"{len(found.within_spread)} point(s) whose CIs part in A and B overlap in their runs: "
                  "not counted")
    if not found.moved:
        print(f"results: none of {found.points} point(s) moved beyond {beyond}")
        return
    table = render.narrow_table(["test", "config", "nodes", "ranks", "size", "time A", "time B", "B/A"],
                                left=("test", "config"),
                                title=f"results: {len(found.moved)} of {found.points} point(s) moved beyond {beyond}")
    for m in found.moved[:SHOWN]:
        table.add_row(m.test, m.config, str(m.nodes), str(m.ranks), render.byte_size(m.size_B),
                      render.seconds(m.time_a_s), render.seconds(m.time_b_s), f"{m.ratio:.2f}")
    console.print(table)
    if len(found.moved) > SHOWN:
        print(f"... and {len(found.moved) - SHOWN} more in compare.json")


def _text(value) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= 40 else text[:37] + "..."
