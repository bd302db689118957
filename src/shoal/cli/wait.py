"""`shoal wait calibrate`: each node's wait parameters from its own sleep accuracy.

Sweeps clock_nanosleep from 0 to 1 ms (Experiment C of "Adaptive message passing
polling for energy efficiency", at the kernel's timer slack and at 1 ns) on this host
and, with --emulate SPEC or --cluster FILE (an emulated inventory), inside one device
of each profile at its CPU quota, and derives from it the parameters every wait mode
then uses unless you set them: the timer slack, linear's d_min, d_max and d_step, and
the sleep floor backoff and auto plan with. They are stored per host (CPU model,
kernel) and per device profile and quota in shoal's cache; `shoal run`, `bench --wait`,
`work --wait` and waitlab take them from there (SHOAL_WAIT_CALIBRATION=off keeps the
library's fixed defaults). A place that cannot sleep below its floor keeps the defaults.
"""

from __future__ import annotations

import argparse

from shoal.inputs import options as typed
from shoal.runs import jsonout

ORDER = 31


def register(subparsers) -> None:
    parser = subparsers.add_parser("wait", help="libshoalwait's parameters: calibrate them per host and device")
    sub = parser.add_subparsers(dest="wait_command", metavar="ACTION")
    parser.set_defaults(func=lambda args: parser.print_help() or 0)
    cal = sub.add_parser("calibrate", help="measure how this host (and emulated devices) sleep, and "
                                           "store the wait parameters that follow",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cal.add_argument("--emulate", type=typed.text, default=None, metavar="SPEC",
                     help="also one emulated device of each profile, at its CPU quota (e.g. 2xodroid-xu4)")
    cal.add_argument("--cluster", type=typed.text, default=None, metavar="FILE",
                     help="also one device of each profile of this emulated inventory")
    cal.add_argument("--load", default="idle", choices=("idle", "loaded"),
                     help="sweep idle, or beside one spinning thread per core (ranks computing beside "
                          "the waiting one); default idle")
    cal.add_argument("--json", action="store_true", help="print the calibrations as JSON")
    cal.set_defaults(func=_calibrate, precheck=_precheck)


def _precheck(args) -> None:
    """What is refused before any device comes up (also before a user namespace is entered)."""
    from shoal.cluster import inventory, rules

    rules.one_cluster(args.emulate, args.cluster, None)
    if args.emulate:
        inventory.from_emulate(args.emulate)
    elif args.cluster:
        inventory.load(args.cluster)


def _calibrate(args) -> int:
    import sys

    from shoal.wait import calibrate

    _precheck(args)

    def say(line: str) -> None:
        print(f"shoal: {line}", file=sys.stderr)

    outcomes = calibrate.run(args.emulate, args.cluster, args.load, say)
    rows = [o.row() for o in outcomes]
    if args.json:
        print(jsonout.dumps({"calibrations": rows}))
        return 0
    _table(rows)
    return 0


def _table(rows: list[dict]) -> None:
    from rich.console import Console

    from shoal.render import narrow_table

    table = narrow_table(["place", "quota", "slack", "floor\nµs", "linear ns\n(dmin,dmax,dstep)", "status"],
                         left=("place", "status"), title="wait calibration (stored)")
    for r in rows:
        if r["status"] != "calibrated":
            table.add_row(r["device"], "", "", "", "", r["status"])
            continue
        table.add_row(r["device"], f"{r['quota']:.3f}" if r.get("quota") is not None else "",
                      "1 ns" if r["slack_ns"] else "kernel's", f"{r['floor_ns'] / 1e3:.1f}",
                      r["linear"].split(":", 1)[1], r["status"])
    Console().print(table)
