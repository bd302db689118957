"""`shoal power`: energy of a command, like `perf stat` for joules; `shoal power sources`.

    shoal power [--source SPEC] [--rate HZ] [--idle S] [--json] [--out DIR] -- COMMAND...
    shoal power sources [--json]

The command runs with its own stdin/stdout/stderr; the summary goes to
stderr like `perf stat` (with --json: one JSON line on stdout, after the
command's own output). The exit code is the command's.
"""

from __future__ import annotations

import argparse
import sys

from shoal import render as pretty
from shoal.cli._where import POWER_SPEC
from shoal.errors import ShoalError
from shoal.inputs import options as typed
from shoal.inputs.grammar import Bounds
from shoal.runs import jsonout

ORDER = 40


def register(subparsers) -> None:
    from shoal.power import kinds as power_kinds

    p = subparsers.add_parser(
        "power", help="measure the energy of a command; 'power sources' lists sensors",
        description="Run COMMAND and report its duration, energy, average and peak power per source. "
                    "'shoal power sources' lists the power sources found on this machine.",
        usage="shoal power [--source SPEC] [--rate HZ] [--idle S] [--json] [--out DIR] -- COMMAND...\n"
              "       shoal power sources [--json]")
    p.add_argument("--source", default="auto", type=POWER_SPEC, metavar="SPEC",
                   help=power_kinds.help_text("auto"))
    p.add_argument("--rate", type=typed.number(Bounds(0, 1000, lo_open=True)), default=10.0, metavar="HZ",
                   help="samples per second for sensors (default 10, at most 1000)")
    p.add_argument("--idle", type=typed.SECONDS_OR_ZERO_NUMBER, default=0.0, metavar="S",
                   help="measure idle power for S seconds first and report energy above idle")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line on stdout")
    p.add_argument("--out", default=None, type=typed.out_dir, metavar="DIR", help="run directory (default runs/power-...)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to measure, after --")
    p.set_defaults(func=run)


def run(args) -> int:
    command = list(args.command)
    if command and command[0] == "sources":
        extra = set(command[1:]) - {"--json"}
        if extra:
            raise ShoalError(f"'shoal power sources' takes only --json, got {' '.join(sorted(extra))}; "
                             "use 'shoal power sources --json'")
        return sources(args.json or "--json" in command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ShoalError("no command to measure; use 'shoal power -- COMMAND...' "
                         "or 'shoal power sources'")
    return measure(command, args)


# -- shoal power sources -----------------------------------------------------------
def sources(as_json: bool) -> int:
    from shoal.power import kinds, registry

    found = registry.survey()
    entries = []
    for source in found.found:
        for ch in source.channels:
            entries.append({"kind": source.kind, "status": "found", "channel": ch["name"],
                            "domain": ch["domain"], "label": ch["kind"], "quantity": ch["quantity"],
                            "detail": "; ".join(source.notes)})
    for kind, (reason, _) in found.missing.items():
        entries.append({"kind": kind, "status": "missing", "channel": "", "domain": "",
                        "label": "", "quantity": "", "detail": reason})
    entries.append({"kind": "model", "status": "available", "channel": "cpu", "domain": "board",
                    "label": "modelled", "quantity": "energy",
                    "detail": found.model if found.model is not None
                    else f"unavailable: {found.model_error}"})
    for kind in kinds.kinds():   # the rest are named, not found: a meter's URL, a log file
        if kind.detect is None and kind.name != "model":
            entries.append({"kind": kind.name, "status": "on request", "channel": "",
                            "domain": kind.domain, "label": kind.label, "quantity": kind.quantity,
                            "detail": f"not detectable: give --source {kind.syntax}"})
    choice = found.auto
    if as_json:
        print(jsonout.dumps({"sources": entries, "auto": choice}))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="power sources on this machine")
    for name in ("source", "status", "channel", "domain", "label", "detail"):
        table.add_column(name, overflow="fold")
    for e in entries:
        style = {"found": "green", "missing": "red", "available": "yellow"}.get(e["status"], "")
        table.add_row(e["kind"], f"[{style}]{e['status']}[/]" if style else e["status"], e["channel"],
                      e["domain"], e["label"], e["detail"])
    console = Console()
    console.print(table)
    console.print(choice, highlight=False)
    return 0


# -- shoal power -- COMMAND ---------------------------------------------------------
def measure(command: list[str], args) -> int:
    from shoal.power import run as power_run

    request = power_run.PowerRequest(command=command, source=args.source, rate_hz=args.rate,
                                     idle_s=args.idle, out=args.out)
    on_note = None if args.json else (lambda note: print(f"shoal: note: {note}", file=sys.stderr))
    argv = (["shoal", "power", *sys.argv[2:]] if sys.argv[1:2] == ["power"]
            else ["shoal", "power", "--", *command])
    summary = power_run.run(request, argv, on_note)
    if args.json:
        print(jsonout.dumps(summary), flush=True)
    else:
        render(summary)
    return summary["exit_code"]


def render(summary: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True)
    for fault in summary["faults"]:
        console.print(f"shoal: warning: {fault}", style="yellow", highlight=False)
    table = Table(title=f"energy of: {' '.join(summary['command'])}")
    with_idle = any(r["idle_W"] is not None for r in summary["sources"])
    columns = ["node", "source/channel", "domain", "kind", "energy", "avg power", "peak power"]
    columns += ["above idle"] if with_idle else []
    for name in columns + ["coverage"]:
        table.add_column(name, justify="left" if name in columns[:4] else "right", overflow="fold")
    for r in summary["sources"]:
        coverage = f"{r['coverage'] * 100:.1f}%" + (" partial" if r["partial"] else "")
        kind = r["kind"] if r["kind"] == "measured" else f"[yellow]{r['kind']}[/]"
        channel = f"{r['source']}/{r['channel']}" + (f" (in {r['part_of']})" if r["part_of"] else "")
        cells = [r["node"], channel, r["domain"], kind, pretty.joules(r["energy_J"]),
                 pretty.watts(r["mean_power_W"]), pretty.watts(r["peak_power_W"])]
        cells += [pretty.joules(r["energy_above_idle_J"])] if with_idle else []
        table.add_row(*cells, coverage)
    if summary["sources"]:
        console.print(table)
    console.print(f"duration {summary['duration_s']:.3f} s, exit code {summary['exit_code']}, "
                  f"samples in {summary['run']}", highlight=False)
