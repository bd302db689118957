"""`shoal dsm`: the S-DSM programs of "Adaptive message passing polling for energy
efficiency" on libshoalsdsm.

    shoal dsm run APP [--wait MODE] [--mpi M] [--impl sdsm|mpi|seq] [-n N]
                      [--preset NAME] [--out DIR] [--json] [-- PROGRAM OPTIONS]
        one program (full, burst, lock, hough, video) under a wait mode; prints
        each rank's time split (user code, S-DSM code, MPI wait, sleep) and,
        with a Table 1 preset, each device's modelled power; --out DIR keeps
        the report and the bytes between every pair of ranks (a heatmap)
    shoal dsm lab [--experiments E,F,G] [--modes ...] [--mpi MPI,MPI]
                  [--rounds R] [--quick] [--emulate SPEC | --cluster FILE]
        Experiments E, F and G side by side for every contender, interleaved
        rounds; Table 2 in the paper's columns plus J/frame; Fig. 10's power
        per node (on an emulated RECS: --emulate 2xcore-i7+4xcortex-a15)

Program options after -- go to shoal-sdsm as they are (e.g. -- --writes 500,
-- --frames 20 --thetas 180); see docs/dsm.md.
"""

from __future__ import annotations

import argparse
import json
import sys

from shoal.errors import ShoalError
from shoal.inputs import options as typed
from shoal.inputs import ranklimit
from shoal.inputs.grammar import Bounds
from shoal.mpi import kinds
from shoal.wait.modes import MODES_HELP

ORDER = 37


def register(subparsers) -> None:
    p = subparsers.add_parser("dsm", help="the S-DSM of 'Adaptive message passing polling for energy efficiency': "
                                   "run its programs, reproduce its lab",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="dsm_command", metavar="COMMAND")
    r = sub.add_parser("run", help="run one S-DSM program under a wait mode")
    r.add_argument("--wait", default="backoff", metavar="MODE", help=f"wait mode: {MODES_HELP}")
    r.add_argument("--mpi", default=None, help=kinds.choices_help())
    r.add_argument("--impl", default="sdsm", help="sdsm, mpi (plain MPI) or seq (sequential)")
    r.add_argument("-n", "--ranks", type=typed.whole(1), default=None,
                   help="ranks (default: the program's)")
    r.add_argument("--oversubscribe", type=typed.number(Bounds(1, 1024)), default=None,
                   metavar="FACTOR",
                   help=f"ranks per CPU at most (default {ranklimit.DEFAULT_OVERSUBSCRIBE})")
    r.add_argument("--preset", default=None,
                   help="Table 1 placement for the power model: exp-e, hough-hetero, "
                        "video-hetero or video-recs")
    r.add_argument("--out", default=None, type=typed.out_dir, metavar="DIR",
                   help="also keep the run in DIR: manifest, report.json and who talked to whom "
                        "(traffic.csv, traffic.json, traffic.png)")
    r.add_argument("--json", action="store_true", help="print the whole report as JSON")
    from shoal.cli._where import add_cluster_choice

    add_cluster_choice(r.add_argument_group(
        "where ranks run (default: this machine); with --preset its devices take the first "
        "nodes, else the ranks fill every node in equal blocks"))
    # APP, shoal's options, then "--" and the program's own options: one
    # remainder parsed in run() (argparse mishandles "--" right after a positional)
    r.add_argument("program", nargs=argparse.REMAINDER, metavar="APP [OPTIONS] [-- PROGRAM OPTIONS]",
                   help="full, burst, lock, hough or video")
    r.set_defaults(func=run, run_parser=r, emulates=_emulates, attaches=_attaches,
                   precheck=lambda args: _plan(argparse.Namespace(**vars(args))))
    lab = sub.add_parser("lab", help="Experiments E, F, G and Table 2 for every wait mode")
    lab.add_argument("--experiments", default="E,F,G", help="comma list of E, F, G")
    lab.add_argument("--modes", default=None,
                     help="semicolon list of contenders (default: busy;degraded;linear:0,1000,1;"
                          "degraded+linear:0,1000,1;sleep:0;sleep:100;backoff;auto; --quick: busy;degraded;"
                          "seed003;degraded+seed003;backoff; degraded+X is X with the MPI's Degraded knob "
                          "set (Adaptive Degraded); seed003 is "
                          "linear:0,1000,1 under the kernel's default timer slack)")
    lab.add_argument("--mpi", default=",".join(kinds.names()), help="comma list of MPIs")
    lab.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3; --quick 1)")
    lab.add_argument("--quick", action="store_true",
                     help="a first look: five contenders, one round, short runs (about 2 min for both MPIs; "
                          "the full lab, 8 contenders in 3 rounds, about an hour or more)")
    lab.add_argument("--out", default=None, help="run directory (default runs/dsm-lab-...)")
    lab.add_argument("--json", action="store_true", help="print rows and Table 2 as JSON")
    add_cluster_choice(lab.add_argument_group(
        "where ranks run (default: this machine); G's placement takes its devices' first six "
        "nodes (e.g. --emulate 2xcore-i7+4xcortex-a15, the RECS), E and F fill every node in "
        "equal blocks"))
    lab.set_defaults(func=run_lab, precheck=lambda args: _lab_plan(args))
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])


def _split_rest(args) -> list[str]:
    """APP, then shoal's options up to "--", then the program's."""
    rest = list(args.program)
    if not rest or rest[0].startswith("-"):
        raise ShoalError("name the program: shoal dsm run full|burst|lock|hough|video "
                         "[OPTIONS] [-- PROGRAM OPTIONS]")
    args.app = rest.pop(0)
    cut = rest.index("--") if "--" in rest else len(rest)
    own, program = rest[:cut], rest[cut + 1:]
    if own:
        args.program = []
        args.run_parser.parse_args(own, namespace=args)
        if args.program:
            raise ShoalError(f"unexpected argument '{args.program[0]}'; program options go "
                             "after --")
    return program


def _request(args):
    """The `dsm run` request (its options follow APP, so they are parsed here first)."""
    from shoal.dsm import run as dsm_run
    from shoal.execute.where import Where

    program = _split_rest(args)
    return dsm_run.RunRequest(app=args.app, program_args=program, wait=args.wait, impl=args.impl,
                              ranks=args.ranks, oversubscribe=args.oversubscribe, preset=args.preset,
                              out=args.out, command=["shoal", *sys.argv[1:]],
                              where=Where(mpi=args.mpi, emulate=args.emulate, link=args.link,
                                          cluster=args.cluster, attach=args.attach, dilation=args.dilation,
                                          host_speed=args.host_speed, recalibrate=args.recalibrate))


def _plan(args):
    from shoal.dsm import run as dsm_run

    return dsm_run.plan(_request(args))


def _emulates(args) -> bool:
    """Whether `dsm run` builds emulated devices here (so, without root, runs in a user
    namespace); its options follow APP and are read from a copy."""
    from shoal.cluster import userns

    probe = argparse.Namespace(**vars(args))
    _split_rest(probe)
    return userns.builds_emulation(probe.emulate, probe.cluster, None)


def _attaches(args) -> str | None:
    """The cluster `dsm run` attaches to (--attach follows APP: read from a copy)."""
    probe = argparse.Namespace(**vars(args))
    _split_rest(probe)
    return probe.attach


def run(args) -> int:
    from shoal.dsm import run as dsm_run

    done = dsm_run.run(_plan(args))
    if args.json:
        print(json.dumps(done.to_json()))
        return 0
    _render_run(done.result, done.time_split, done.devices, done.mode, done.mpi)
    if args.out:
        print(f"run kept in {args.out} (who talked to whom: traffic.csv, traffic.png)", file=sys.stderr)
    return 0


def _render_run(result, split, devices, mode: str, mpi: str) -> None:
    from rich.console import Console

    from shoal.render import narrow_table

    console = Console()
    table = narrow_table(["rank", "role", "wall\ns", "CPU\n%", "user\ns", "S-DSM\ns",
                          "MPI wait\ns", "sleep\ns", "msgs"], left=("role",),
                         title=f"{result.app} ({result.impl}) under {mode}, {mpi}")
    for s, r in zip(split, result.ranks):
        load = 100 * r["cpu_s"] / r["wall_s"] if r["wall_s"] > 0 else 0.0
        table.add_row(str(s["rank"]), s["role"], f"{s['wall_s']:.3f}", f"{load:.0f}",
                      f"{s['user_s']:.3f}", f"{s['sdsm_s']:.4f}", f"{s['mpi_wait_s']:.3f}",
                      f"{s['sleep_s']:.3f}", str(r["msgs_sent"]))
    console.print(table)
    rep = result.report
    if "messages" in rep:
        console.print(f"messages: {rep['messages']} (seed 003's run of this pattern: "
                      f"{rep['seed_messages']})")
    if result.output_hash():
        console.print(f"output hash: {result.output_hash()}")
    if devices:
        dt = narrow_table(["device", "profile", "busy\n%", "W", "J"], left=("device", "profile"),
                          title="power per device (modelled: cores busy unless asleep)")
        for d in devices:
            dt.add_row(d["device"], d["profile"], f"{100 * d['busy_share']:.0f}",
                       f"{d['power_W']:.2f}", f"{d['energy_J']:.1f}")
        console.print(dt)


def _lab_plan(args):
    from shoal.dsm import lab
    from shoal.execute.where import Where

    where = Where(emulate=args.emulate, link=args.link, cluster=args.cluster, attach=args.attach,
                  dilation=args.dilation, host_speed=args.host_speed, recalibrate=args.recalibrate)
    return lab.plan(lab.LabRequest(experiments=tuple(e for e in args.experiments.split(",") if e),
                                   modes=args.modes, mpis=tuple(args.mpi.split(",")),
                                   rounds=args.rounds, quick=args.quick, out=args.out, where=where))


def run_lab(args) -> int:
    from shoal.dsm import lab

    planned = _lab_plan(args)
    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task = progress.add_task("dsm lab", total=planned.total)
        result = lab.run(planned, ["shoal", "dsm", "lab"], on_done=lambda row: progress.advance(task))
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        _render_lab(result.results, result.table2)
        _render_fig10(result.fig10)
        print(f"run: {result.run}")
    return 0 if not result.failed else 1


_COLUMNS = {
    "E": (("run s", "wall_s", 1, "{:.3f}"), ("server\nCPU %", "server_cpu_load", 100, "{:.1f}"),
          ("quiet\nCPU %", "server_quiet_load", 100, "{:.1f}"), ("msgs", "messages", 1, "{:.0f}")),
    "F": (("run s", "wall_s", 1, "{:.3f}"), ("FPS", "fps", 1, "{:.2f}"),
          ("S-DSM\ns", "sdsm_s", 1, "{:.3f}"), ("sleep\ns", "sleep_s", 1, "{:.3f}")),
}


def _render_lab(rows, tables) -> None:
    from rich.console import Console

    from shoal.dsm import lab
    from shoal.render import narrow_table

    console = Console()
    for exp, cols in _COLUMNS.items():
        for mpi in dict.fromkeys(r["mpi"] for r in rows):
            mine = [r for r in rows if r["experiment"] == exp and r["mpi"] == mpi]
            if not mine:
                continue
            table = narrow_table(["app", "contender", *(c[0] for c in cols)],
                                 left=("app", "contender"),
                                 title=f"Experiment {exp}, {mpi} (median of rounds)")
            for (_, app, _, contender) in dict.fromkeys((r["experiment"], r["app"], r["mpi"],
                                                         r["contender"]) for r in mine):
                cells = []
                for _, key, scale, fmt in cols:
                    med = lab.summarize(mine, key).get((exp, app, mpi, contender))
                    cells.append(fmt.format(med[0] * scale) if med else "")
                table.add_row(app, contender, *cells)
            console.print(table)
            for r in mine:
                if r["status"] != "ok":
                    console.print(f"[red]{r['app']} {r['contender']} round {r['round']}: "
                                  f"{r['status']}[/]", soft_wrap=True)
    for mpi, t2 in tables.items():
        table = narrow_table(["contender", "time\ns", "FPS", "W", "kJ", "FPS/W", "J/frame"],
                             left=("contender",),
                             title=f"Table 2 form, {mpi}: time and FPS measured, W modelled")
        for r in t2:
            table.add_row(r["contender"], *(f"{r[k] * s:{f}}" if k in r else "" for k, s, f in (
                ("time_s", 1, ".2f"), ("fps", 1, ".3f"), ("power_W", 1, ".2f"),
                ("energy_J", 1e-3, ".4f"), ("fps_per_W", 1, ".4f"), ("J_per_frame", 1, ".2f"))))
        console.print(table)
        _render_beside_seed(console, mpi, lab.beside_seed(t2))


def _render_fig10(per_mpi) -> None:
    """Fig. 10's readings: per node and contender, the modelled power's spread and peak, and
    the energy."""
    from rich.console import Console

    from shoal.render import narrow_table

    console = Console()
    for mpi, rows in per_mpi.items():
        if not rows:
            continue
        table = narrow_table(["node", "contender", "std W", "peak W", "mean W", "kJ"],
                             left=("node", "contender"),
                             title=f"Fig. 10 form, {mpi}: power per node every 180 ms (modelled)")
        for r in sorted(rows, key=lambda r: (r["device"], r["contender"])):
            table.add_row(r["device"], r["contender"], f"{r['std_W']:.2f}", f"{r['peak_W']:.2f}",
                          f"{r['mean_W']:.2f}", f"{r['energy_J'] / 1e3:.4f}")
        console.print(table)


def _render_beside_seed(console, mpi: str, rows) -> None:
    """Table 2's four modes: each column relative to Aggressive, ours and the seed's."""
    from shoal.render import narrow_table

    table = narrow_table(["seed 003 mode", "measured by", "time", "FPS", "W", "kJ", "FPS/W"],
                         left=("seed 003 mode", "measured by"),
                         title=f"Table 2 beside seed 003, {mpi}: change vs Aggressive")
    metrics = ("time_s", "fps", "power_W", "energy_J", "fps_per_W")
    for r in rows:
        ours = [r.get(f"{m}_vs_aggressive") for m in metrics]
        table.add_row(r["mode"], r["contender"] if r["ran"] else f"{r['contender']} (not run)",
                      *("-" if x is None else f"{100 * x:+.0f}%" for x in ours))
        table.add_row("", "seed 003", *(f"{100 * r[f'seed_{m}_vs_aggressive']:+.0f}%" for m in metrics))
    console.print(table)
