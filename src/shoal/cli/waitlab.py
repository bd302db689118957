"""`shoal waitlab`: the waiting experiments of "Adaptive message passing polling
for energy efficiency" under every wait mode, plotted.

Runs experiment C (how long clock_nanosleep really sleeps, 0 to 1 ms, idle
and loaded, default timer slack and 1 ns, cyclictest beside it; with --emulate
inside one emulated device of each profile too, and A and the other two-rank
experiments also across two devices: sender on one, receiver on the other,
the receiver's CPU also as a share of its device's core), A (CPU load of a receiver
between bursts), D (reaction time as gaps grow from 1 ns to ~130 ms), regular
gaps of 10 ms, 100 ms and 1 s and Poisson arrivals (mean 100 ms), and the S-DSM
patterns Full, Burst and Lock under each libshoalwait mode and each MPI's own
options, and writes one run directory (results.csv, load.csv, reaction.csv,
sleep.csv, sleep_summary.csv, PNG/SVG figures).
``--quick`` is a first look: every wait mode a user can choose (busy, yield,
sleep:100, seed003, backoff, auto, event) beside each MPI's
first own option, every experiment but P10ms and P1s, fewer messages and
shorter pauses (D: x1.25 steps from 1 us to 20 ms; C: 10 us steps, 5 measures
each, 2 s of cyclictest); about 1.5 minutes for both MPIs on a 2-core host. The
full lab (every mode and option, every experiment at the paper's lengths,
about 80 s of experiments per contender) takes about 25 minutes for both.
"""

from __future__ import annotations

import argparse

from shoal.cli._where import POWER_SPEC
from shoal.inputs import options as typed
from shoal.mpi import kinds
from shoal.runs import jsonout
from shoal.runs.store import Run
from shoal.wait import lab

ORDER = 35


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "waitlab", help="compare wait modes (CPU load, reaction time) on the experiments of "
             "'Adaptive message passing polling for energy efficiency'",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="a first look: every wait mode once, fewer messages, no P10ms or P1s (about 1.5 min for both MPIs; "
                        "the full lab about 25 min)")
    p.add_argument("--mpi", type=typed.text, default=",".join(kinds.names()),
                   help=f"comma list of MPIs ({', '.join(kinds.names())}, system or paths); "
                        "default every one shoal knows")
    p.add_argument("--modes", type=typed.text, default=None,
                   help="semicolon or comma list of wait modes, and seed003 (the adaptive receive of *Adaptive "
                        "message passing polling for energy efficiency* as its authors ran it: "
                        "linear:0,1000,1 under the kernel's default timer slack) (default: "
                        f"{','.join(lab.DEFAULT_MODES)}; --quick: {','.join(lab.QUICK_MODES)})")
    p.add_argument("--experiments", type=typed.text, default=None,
                   help="comma list of C, A, D, P10ms, P100ms, P1s, poisson, full, burst, lock "
                        "(default all; --quick: all but P10ms and P1s; --emulate, --cluster: C,A)")
    p.add_argument("--emulate", type=typed.text, default=None, metavar="SPEC",
                   help="Experiment C also inside emulated devices, one of each profile, at their "
                        "CPU quota, and the two-rank experiments also across the first two devices, "
                        "sender on the first, receiver on the second (e.g. 2xodroid-xu4 or "
                        "1xrpi3bplus+1xodroid-xu4; default experiments C,A)")
    p.add_argument("--cluster", type=typed.text, default=None, metavar="FILE",
                   help="the same with an inventory's devices (C inside them only if emulated)")
    p.add_argument("--no-native", action="store_true",
                   help="leave out the MPIs' own options (yield_when_idle, HEAVY_YIELD, ...)")
    p.add_argument("--power", default=None, type=POWER_SPEC, metavar="SPEC",
                   help="measure energy of each run with shoal.power (e.g. auto, rapl)")
    p.add_argument("--out", default=None, type=typed.out_dir, help="run directory (default runs/waitlab-...)")
    p.add_argument("--resume", default=None, type=typed.run_dir, metavar="RUN", help="continue an interrupted run")
    p.add_argument("--json", action="store_true", help="print the results rows as JSON")
    # The lab's own plan refuses bad input before the re-run in a user namespace (--emulate).
    p.set_defaults(func=run, precheck=lambda args: lab.plan(_request(args)))


def _request(args) -> lab.LabRequest:
    return lab.LabRequest(modes=args.modes, experiments=args.experiments, mpis=tuple(args.mpi.split(",")),
                          native=not args.no_native, quick=args.quick, power=args.power, out=args.out,
                          resume=args.resume, emulate=args.emulate, cluster=args.cluster)


def run(args) -> int:
    planned = lab.plan(_request(args))
    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task = progress.add_task("waitlab", total=planned.total)
        result = lab.run(planned, ["shoal", "waitlab", *_argv(args)], on_done=lambda row: progress.advance(task))
    if args.json:
        print(jsonout.dumps({"run": str(result.run.path), "results": jsonout.typed_rows(result.results),
                             "sleep_summary": jsonout.typed_rows(result.sleep)}))
    else:
        _sleep_table(result.run)
        _table(result.run)
        print(f"run: {result.run.path}")
    return 0 if not result.failed else 1


def _argv(args) -> list[str]:
    out = []
    for key in ("quick", "no_native", "json"):
        if getattr(args, key):
            out.append("--" + key.replace("_", "-"))
    for key in ("mpi", "modes", "experiments", "emulate", "cluster", "power", "out"):
        if getattr(args, key):
            out += ["--" + key, str(getattr(args, key))]
    return out


# Each experiment measures something else: one narrow table per kind and
# MPI, with the columns that kind fills, fits an 80-column terminal.
_KINDS = (
    ("A: CPU load between bursts", ("A",),
     (("CPU %", "cpu_load", 100, "{:.1f}"), ("device\ncore %", "device_core_load", 100, "{:.1f}"),
      ("run s", "wall_s", 1, "{:.3f}"))),
    ("D: reaction, growing gaps", ("D",),
     (("CPU %", "cpu_load", 100, "{:.1f}"), ("burst\np50 µs", "reaction_burst_p50_s", 1e6, "{:.1f}"),
      ("gaps ≥1 ms\np50 µs", "reaction_sparse_p50_s", 1e6, "{:.1f}"),
      ("gaps ≥1 ms\np99 µs", "reaction_sparse_p99_s", 1e6, "{:.1f}"))),
    ("Rhythms: regular gaps, Poisson arrivals", ("P10ms", "P100ms", "P1s", "poisson"),
     (("CPU %", "cpu_load", 100, "{:.2f}"), ("reaction\np50 µs", "reaction_p50_s", 1e6, "{:.1f}"),
      ("reaction\np99 µs", "reaction_p99_s", 1e6, "{:.1f}"))),
    ("S-DSM patterns", ("full", "burst", "lock"),
     (("run s", "wall_s", 1, "{:.3f}"), ("msg/s", "throughput_msg_per_s", 1, "{:.0f}"),
      ("CPU %", "cpu_load", 100, "{:.1f}"))),
)


def _table(record: Run) -> None:
    from rich.console import Console

    rows = record.rows("results")
    energy = any(r["energy_J"] not in ("", None) for r in rows)
    console = Console()
    for title, experiments, columns in _KINDS:
        for mpi in dict.fromkeys(r["mpi"] for r in rows):
            mine = [r for r in rows if r["mpi"] == mpi and r["experiment"] in experiments]
            if mine:
                mine.sort(key=lambda r: experiments.index(r["experiment"]))   # stable sort
                console.print(f"[bold]{title}, {mpi}[/]", soft_wrap=True)
                _kind_table(console, mine, columns, patterns=len(experiments) > 1, energy=energy)
                if "A" in experiments and any(r["contender"] in lab.NAMED for r in mine):
                    console.print(f"seed 003 Experiment B measured: {lab.SEED003_EXPERIMENT_B}", soft_wrap=True)


def _sleep_table(record: Run) -> None:
    """Experiment C: per place and condition the sweep's numbers; cyclictest's beside the
    sweep's lateness at 1 ms (cyclictest's interval) under the same load and slack."""
    from rich.console import Console

    from shoal.render import narrow_table

    rows = record.rows("sleep_summary")
    if not rows:
        return
    console = Console()
    console.print("[bold]C: clock_nanosleep, requested 0..1 ms (late = measured - requested)[/]",
                  soft_wrap=True)
    table = narrow_table(["place", "load", "slack", "at 0\np50 µs", "slope", "late\np50 µs", "late\np99 µs",
                          "CPU per\nsleep µs"], left=("place", "load", "slack"))
    notes = []
    sweeps = {(r["device"], r["load"], r["slack"]): r for r in rows if r["source"] == "sweep"}
    for r in rows:
        place = r["device"]   # a device's name holds its profile's (rpi3bplus1)
        if r["source"] == "cyclictest":
            notes.append(_beside_cyclictest(place, r, sweeps.get((r["device"], r["load"], r["slack"]))))
            continue
        cells = [place, r["load"], r["slack"]]
        if r["status"] != "ok":
            notes.append(f"{place} {r['load']} slack {r['slack']}: {r['status']}")
            table.add_row(*cells, "[red]failed[/]")
            continue
        table.add_row(*cells, _num(r["offset_zero_s"], 1e6, "{:.1f}"), _num(r["slope"], 1, "{:.3f}"),
                      _num(r["lateness_p50_s"], 1e6, "{:.1f}"), _num(r["lateness_p99_s"], 1e6, "{:.1f}"),
                      _num(r.get("wake_cpu_s"), 1e6, "{:.1f}"))
    console.print(table)
    dilated = sorted({(r["device"], r["dilation"]) for r in rows if float(r["dilation"] or 1) > 1})
    if dilated:
        notes.append(f"devices ran at dilation {dilated[0][1]}: each core at 1/{dilated[0][1]} of its "
                     "profile's real-time share of a host core; times are host seconds")
    for line in notes:
        console.print(line, soft_wrap=True, markup=False)


def _beside_cyclictest(place: str, row: dict, sweep: dict | None) -> str:
    """One line: cyclictest's median and p99 at 1 ms, the sweep's beside them."""
    head = f"cyclictest on {place}, {row['load']}"
    if row["status"] != "ok":
        return f"{head}: {row['status']}"
    line = (f"{head}: p50 {_num(row['lateness_longest_p50_s'], 1e6, '{:.1f}')} µs, "
            f"p99 {_num(row['lateness_longest_p99_s'], 1e6, '{:.1f}')} µs")
    if sweep and sweep["status"] == "ok":
        line += (f" (sweep at 0: p50 {_num(sweep['offset_zero_s'], 1e6, '{:.1f}')} µs, "
                 f"p99 {_num(sweep['offset_zero_p99_s'], 1e6, '{:.1f}')} µs; at 1 ms: p50 {_num(sweep['lateness_longest_p50_s'], 1e6, '{:.1f}')} µs, "
                 f"p99 {_num(sweep['lateness_longest_p99_s'], 1e6, '{:.1f}')} µs)")
    return line


def _kind_table(console, rows: list[dict], columns, patterns: bool, energy: bool) -> None:
    """One experiment kind on one MPI: a row per contender (and pattern)."""
    from shoal.render import narrow_table

    # A column no row fills (a device's core share on this host alone) is left out.
    columns = [c for c in columns if any(r.get(c[1]) not in ("", None) for r in rows)]
    heads = ["pattern"] * patterns + ["contender"] + [c[0] for c in columns] + ["energy J"] * energy
    table = narrow_table(heads, left=("pattern", "contender"))
    failed = []
    for r in rows:
        place = r.get("place") or "host"   # across devices: sender->receiver
        cells = [r["experiment"]] * patterns + [r["contender"] if place == "host" else f"{r['contender']} @ {place}"]
        if r["status"] != "ok":   # numbers left empty; why, below the table
            failed.append(f"{' '.join(cells)}: {r['status']}")
            table.add_row(*cells, "[red]failed[/]")
            continue
        cells += [_num(r.get(key), scale, fmt) for _, key, scale, fmt in columns]
        table.add_row(*cells, *[_num(r["energy_J"], 1, "{:.2f}")] * energy)
    console.print(table)
    for line in failed:
        console.print(f"[red]{line}[/]", soft_wrap=True)


def _num(value: str | None, scale: float, fmt: str) -> str:
    return fmt.format(float(value) * scale) if value not in ("", None) else ""
