"""`shoal power`: energy of a command, like `perf stat` for joules; `shoal power sources`.

    shoal power [--source SPEC] [--rate HZ] [--idle S] [--json] [--out DIR] -- COMMAND...
    shoal power sources [--json]

The command runs with its own stdin/stdout/stderr; the summary goes to
stderr like `perf stat` (with --json: one JSON line on stdout, after the
command's own output). The exit code is the command's.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from dataclasses import asdict

from shoal import render as pretty
from shoal.errors import ShoalError
from shoal.inputs import options as typed
from shoal.inputs.grammar import Bounds
from shoal.runs import jsonout

ORDER = 40
FLUSH_S = 2.0


class CommandNotRunnable(ShoalError):
    exit_code = 127


def register(subparsers) -> None:
    from shoal.power import kinds as power_kinds

    p = subparsers.add_parser(
        "power", help="measure the energy of a command; 'power sources' lists sensors",
        description="Run COMMAND and report its duration, energy, average and peak power per source. "
                    "'shoal power sources' lists the power sources found on this machine.",
        usage="shoal power [--source SPEC] [--rate HZ] [--idle S] [--json] [--out DIR] -- COMMAND...\n"
              "       shoal power sources [--json]")
    p.add_argument("--source", default="auto", type=typed.POWER_SPEC, metavar="SPEC",
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
    from shoal import hostfacts, proc
    from shoal.power import COLUMNS, open_session
    from shoal.runs.store import Run

    if proc.find(command[0]) is None:
        raise CommandNotRunnable(f"cannot run {command[0]!r}: not found or not executable; "
                                 "check the command name and PATH")
    session = open_session(args.source, args.rate)
    run = Run.create("power", ["shoal", "power", *sys.argv[2:]] if sys.argv[1:2] == ["power"]
                     else ["shoal", "power", "--", *command], args.out,
                     measured_command=command, power_source=args.source, rate_hz=args.rate,
                     host=hostfacts.collect(), wall_minus_mono_s=session.wall_minus_mono,
                     power_channels=[asdict(ch) for ch in session.channels], power_notes=session.notes)
    if not args.json:
        for note in session.notes:
            print(f"shoal: note: {note}", file=sys.stderr)
    status, code = "complete", None
    t0 = t1 = time.monotonic()
    try:
        known = len(session.notes)
        session.start()
        if not args.json:
            for note in session.notes[known:]:
                print(f"shoal: note: {note}", file=sys.stderr)
        if args.idle > 0:
            session.measure_idle(args.idle)
        t0 = time.monotonic()
        try:
            process = proc.start(command)
        except proc.CannotStart as exc:
            raise CommandNotRunnable(f"cannot run {command[0]!r}: {exc.reason}; "
                                     "check the command name and PATH") from None
        try:
            while True:
                try:
                    code = process.wait(timeout=FLUSH_S)
                    if code is not None:
                        break
                    run.append("power", session.new_samples(), columns=COLUMNS)
                except proc.Terminated:
                    raise
                except KeyboardInterrupt:
                    # Ctrl-C was meant for the command as much as for shoal: pass it on
                    # and measure until the command ends.
                    status = "interrupted"
                    process.send_signal(signal.SIGINT)
        finally:
            process.stop()
        t1 = time.monotonic()
    except BaseException as exc:
        session.stop()
        run.append("power", session.new_samples(), columns=COLUMNS)  # keep what was measured
        run.finish("interrupted" if isinstance(exc, KeyboardInterrupt) else "failed")
        raise
    session.stop()
    run.append("power", session.new_samples(), columns=COLUMNS)
    duration = t1 - t0
    results = session.energy_between(t0, t1, wait=False) if duration > 0 else []
    faults = session.faults()
    exit_code = code if code >= 0 else 128 - code
    run.finish(status, exit_code=exit_code, duration_s=duration, t_start_mono_s=t0, t_end_mono_s=t1,
               energy=results, idle_W=session.idle_W, power_faults=faults)
    summary = {"command": command, "exit_code": exit_code, "duration_s": duration, "run": str(run.path),
               "notes": session.notes, "faults": faults, "sources": results}
    if args.json:
        print(jsonout.dumps(summary), flush=True)
    else:
        render(summary)
    return exit_code


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
