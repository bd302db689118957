"""`shoal doctor`: check this machine and say what to do about each gap."""

from __future__ import annotations

import argparse
import dataclasses
import json

from shoal import doctor

ORDER = 90


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check MPI, compilers, namespaces, cgroups and power sources")
    p.add_argument("--mpi", default=None, help="MPI to check (default: mpich)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    findings = doctor.run_all(args.mpi)
    if args.json:
        print(json.dumps([dataclasses.asdict(f) for f in findings], indent=1))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="shoal doctor")
        for col in ("", "area", "found", "what to do"):
            table.add_column(col)
        for f in findings:
            table.add_row("[green]ok[/]" if f.ok else "[red]!![/]", f.area, f.found, f.fix)
        Console().print(table)
    # Only a missing MPI stops shoal from working at all.
    return 0 if all(f.ok for f in findings if f.area == "MPI in use") else 1
