"""`shoal doctor`: check this machine and say what to do about each gap."""

from __future__ import annotations

import argparse
import dataclasses
import json

from shoal.inputs import options as typed
from shoal.mpi import kinds

ORDER = 90


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check MPI, compilers, namespaces, cgroups and power sources")
    p.add_argument("--mpi", type=typed.text, default=None, help=kinds.choices_help())
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--fix", action="store_true",
                   help="remove what crashed shoal processes left behind (emulated clusters, runs "
                        "left 'running', the MPIs' shared memory and launcher files that no running "
                        "process holds) and say what; never touches anything else")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from shoal import doctor

    findings = doctor.run_all(args.mpi, fix=args.fix)
    if args.json:
        print(json.dumps([dataclasses.asdict(f) for f in findings], indent=1))
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        # A checklist, not a grid: what to do goes under what was found, so a
        # narrow terminal wraps one long column instead of cutting three.
        table = Table.grid(padding=(0, 1))
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(overflow="fold")
        for f in findings:
            found = escape(f.found) + (f"\n[yellow]→ {escape(f.fix)}[/]" if f.fix else "")
            table.add_row("[green]ok[/]" if f.ok else "[red]!![/]", escape(f.area), found)
        console = Console()
        console.print("[bold]shoal doctor[/]")
        console.print(table)
    # Only a missing MPI stops shoal from working at all.
    return 0 if all(f.ok for f in findings if f.area == "MPI in use") else 1
