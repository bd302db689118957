"""`shoal work`: real workloads (seeds 002-004, NPB EP and IS) timed at any rank
or node count, checked against a serial reference, with energy per run."""

from __future__ import annotations

import argparse
import json
import sys

from shoal import render
from shoal.cli._where import add_energy, add_where
from shoal.errors import ShoalError
from shoal.inputs import options as typed
from shoal.inputs import ranklimit
from shoal.mpi import kinds

ORDER = 12


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("work", help="run a real workload (shoal work --list names them)",
                       description="Run one workload at one or more rank (node) counts, each repeated "
                                   "--reps times; per-phase times, throughput, optional check against "
                                   "the serial reference and energy per run.")
    p.add_argument("workload", nargs="?", help="the workload to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the workloads and their default sizes")
    p.add_argument("--size", type=typed.text, default=None,
                   help="the workload's size (see --list), or 'small' / 'default'")
    p.add_argument("--reps", type=typed.whole(1, 100000), default=3, help="repetitions per rank count (default 3)")
    p.add_argument("--check", action="store_true",
                   help="compare every parallel result with the serial reference (untimed)")
    p.add_argument("-n", "--ranks", type=typed.COUNTS_TEXT, default="1", help="ranks on this machine: 4, 1..4 or 1,2,4 (default 1)")
    p.add_argument("--mpi", type=typed.text, default=None, help=kinds.choices_help())
    p.add_argument("--aes", default="auto", choices=("auto", "openssl", "software"),
                   help="edge: AES implementation (default auto: OpenSSL's libcrypto if it loads)")
    p.add_argument("--timeout", type=typed.SECONDS_NUMBER, default=None, metavar="SECONDS",
                   help="a run taking longer counts as hung (default 900)")
    add_where(p, nodes_default="1..all")
    add_energy(p, per="run")
    p.add_argument("--out", type=typed.out_dir, default=None, help="run directory (default runs/work-<time>)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    p.set_defaults(func=run, precheck=_precheck)


def _ranks(text: str) -> list[int]:
    from shoal import cluster

    try:
        return cluster.parse_nodes(text)
    except ShoalError as exc:
        raise ShoalError(str(exc).replace("--nodes", "--ranks", 1)) from None


def _list(mpi: str | None) -> int:
    from shoal.work import runner

    for w in runner.workloads(mpi):
        print(f"{w.name:12} --size {w.default_size} (small: {w.small_size})")
        print(f"{'':12} {w.description}")
    return 0


def _request(args: argparse.Namespace):
    from shoal.work import catalog, runner

    if not args.workload:
        raise ShoalError(f"name a workload; {catalog.known(runner.workloads(args.mpi))}")
    if args.idle and not args.power:
        raise ShoalError("--idle measures a power baseline: add --power SOURCE")
    if args.idle < 0:
        raise ShoalError(f"--idle must not be negative, got {args.idle}")
    return runner.WorkRequest(
        workload=args.workload, size=args.size, reps=args.reps, check=args.check,
        ranks=_ranks(args.ranks), mpi=args.mpi, emulate=args.emulate, link=args.link,
        cluster=args.cluster, attach=args.attach, nodes=args.nodes,
        ranks_per_node=args.ranks_per_node, ranks_per_device=args.ranks_per_device,
        dilation=args.dilation, host_speed=args.host_speed, recalibrate=args.recalibrate,
        launch=args.launch, freq=args.freq, governor=args.governor, background=args.background, qos=args.qos, storage=args.storage, bcast=args.bcast,
        oversubscribe=args.oversubscribe or ranklimit.DEFAULT_OVERSUBSCRIBE,
        power=args.power, idle_s=args.idle, wait=args.wait, aes=args.aes,
        timeout_s=args.timeout if args.timeout is not None else runner.DEFAULT_TIMEOUT_S)


def _precheck(args: argparse.Namespace) -> None:
    """Plan the runs (no side effects) before re-running inside a user namespace."""
    if not args.list:
        from shoal.work import runner

        runner.plan(_request(args))


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args.mpi)
    from shoal.work import runner, summary

    request = _request(args)
    run_dir, plan = runner.start(request, ["shoal", *sys.argv[1:]], args.out)
    quiet = args.json
    if not quiet:
        print(f"shoal work: {plan.workload.name} {plan.size}, {plan.total_runs} runs with "
              f"{plan.mpi.name} -> {run_dir.path}", file=sys.stderr)

    def done(row):
        if not quiet:
            check = "" if row["check"] == "off" else f", check {row['check']}"
            print(f"  {row['ranks']} ranks, rep {int(row['rep']) + 1}: {render.seconds(row['time_s'])}, "
                  f"{plan.workload.metric(row['throughput_per_s'])}{check}", file=sys.stderr)
            if row["check"] == "fail":
                print(f"    check failed: {row['check_detail']}", file=sys.stderr)

    def failed(placement, rep, reason):
        print(f"  {placement.ranks} ranks, rep {rep + 1}: failed: {reason}", file=sys.stderr)

    runner.execute(run_dir, plan, runner.Events(run_done=done, run_failed=failed))
    rows = summary.write(run_dir)
    failures = run_dir.rows("failures")
    bad_checks = [r for r in run_dir.rows("results") if r["check"] == "fail"]
    if args.json:
        print(json.dumps({"run": str(run_dir.path), "summary": rows, "failures": failures},
                         indent=1, default=str))
    else:
        _table(plan, rows)
        print(f"results: {run_dir.path}")
    if bad_checks:
        print(f"shoal: {len(bad_checks)} run(s) failed the check against the serial reference "
              f"(first: {bad_checks[0]['check_detail']}); see {run_dir.table_path('results')}",
              file=sys.stderr)
    return 0 if not failures and not bad_checks else 1


def _table(plan, rows) -> None:
    from rich.console import Console

    table = render.narrow_table(["nodes", "ranks", "time\nmedian", "spread", "speed-\nup", "comm\nshare",
                                 "serial\nshare", "throughput", "energy"],
                                title=f"shoal work {plan.workload.name} {plan.size}")
    for r in rows:
        time = r["time_median_s"]
        table.add_row(str(r["nodes"]), str(r["ranks"]), render.seconds(time),
                      render.percent(r["time_spread"]) if r["time_spread"] is not None else "-",
                      f"{r['speedup']:.2f}", render.percent(r["comm_median_s"] / time),
                      render.percent(r["serial_median_s"] / time),
                      plan.workload.metric(r["throughput_median_per_s"]),
                      render.joules(r["energy_median_J"]) if r["energy_median_J"] is not None else "-")
    Console().print(table)
