"""`shoal bench`: MPI communication benchmarks over message sizes and ranks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from shoal import render
from shoal.bench import heterogeneity, runner
from shoal.bench.sizes import DEFAULT_SIZES, QUICK_SIZES, parse_size
from shoal.bench.sweep import Options
from shoal.cli._progress import Progress
from shoal.errors import ShoalError
from shoal.mpi import kinds

ORDER = 10


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run MPI communication benchmarks (MPBench, IMB-MPI1)",
                       description="Sweep MPBench's eight and IMB-MPI1's twelve tests over message "
                                   "sizes; every point repeated until its median is known to --ci.")
    p.add_argument("--tests", default=None,
                   help="suites and tests, comma-separated: mpbench, imb, all, or names such as "
                        "imb.PingPong, bandwidth (default: mpbench,imb)")
    p.add_argument("--sizes", default=None,
                   help=f"message sizes: list '8,1K,4M' or range '1..4M[:factor]' (default {DEFAULT_SIZES})")
    p.add_argument("-n", "--ranks", default="2", help="MPI ranks, or a list to sweep: 2,4 (default 2)")
    p.add_argument("--mpi", default=None, help=kinds.choices_help())
    p.add_argument("--ci", type=float, default=None,
                   help="stop a point when the 95%% CI half-width of the median is within this "
                        "fraction of it (default 0.02)")
    p.add_argument("--budget", type=float, default=None, help="seconds per point at most (default 1)")
    p.add_argument("--min-reps", type=int, default=None, help="repetitions before the CI is judged (default 10)")
    p.add_argument("--max-reps", type=int, default=None, help="repetitions per point at most (default 100000)")
    p.add_argument("--rep-time", type=float, default=None,
                   help="target seconds per repetition; sets inner iterations (default 2e-4)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up repetitions (default 2)")
    p.add_argument("--flush", default="0", help="flush caches between repetitions with a buffer this big (e.g. 16M)")
    p.add_argument("--check", action="store_true", help="verify every received byte")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds after which a point counts as hung (default 4*budget+20)")
    p.add_argument("--quick", action="store_true",
                   help=f"fast sweep: sizes {QUICK_SIZES}, CI 5%%, budget 0.2 s")
    where = p.add_argument_group("where ranks run (default: this machine)")
    where.add_argument("--emulate", default=None, metavar="SPEC",
                       help="emulated cluster of devices, e.g. 4xminnowboard or 4xminnowboard+1xnuc")
    where.add_argument("--link", default=None,
                       help="link of every emulated device: ethernet-100m, gigabit, wifi-n, docsis-27m")
    where.add_argument("--cluster", default=None, metavar="FILE", help="inventory file (TOML)")
    where.add_argument("--nodes", default=None,
                       help="node counts to sweep on the cluster: 1..4, 1,2,4,6 (default: all nodes)")
    where.add_argument("--ranks-per-node", type=int, default=1, help="ranks on each node (default 1)")
    energy = p.add_argument_group("energy and waiting")
    energy.add_argument("--power", default=None, metavar="SOURCE",
                        help="record joules per point: auto, rapl, hwmon, battery, http:URL#path, "
                             "log:FILE, model[:IDLE_W,BUSY_W] (emulated devices: their profile model)")
    energy.add_argument("--idle", type=float, default=0.0, metavar="SECONDS",
                        help="measure the idle baseline this long before the sweep and report "
                             "energy above it")
    energy.add_argument("--wait", default=None, metavar="MODE",
                        help="run ranks under libshoalwait: busy, yield, sleep:US, linear, backoff, auto")
    p.add_argument("--out", type=Path, default=None, help="run directory (default runs/bench-<time>)")
    p.add_argument("--resume", type=Path, default=None, metavar="RUN",
                   help="continue an interrupted run, measuring only missing points")
    p.add_argument("--json", action="store_true", help="print results as JSON instead of a table")
    p.set_defaults(func=run)


def _options(args: argparse.Namespace) -> Options:
    quick = args.quick
    for name in ("ci", "budget", "rep_time", "timeout"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise ShoalError(f"--{name.replace('_', '-')} must not be negative, got {value}")
    for name in ("min_reps", "max_reps", "warmup"):
        value = getattr(args, name)
        if value is not None and value < (0 if name == "warmup" else 1):
            raise ShoalError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    opts = Options(
        ci=args.ci if args.ci is not None else (0.05 if quick else 0.02),
        budget_s=args.budget if args.budget is not None else (0.2 if quick else 1.0),
        min_reps=args.min_reps if args.min_reps is not None else (8 if quick else 10),
        max_reps=args.max_reps if args.max_reps is not None else 100000,
        rep_time_s=args.rep_time,
        warmup=args.warmup,
        flush_B=parse_size(args.flush),
        check=args.check,
        point_timeout_s=args.timeout,
    )
    if opts.min_reps > opts.max_reps:
        raise ShoalError(f"--min-reps {opts.min_reps} exceeds --max-reps {opts.max_reps}")
    return opts


def _ranks(text: str) -> list[int]:
    try:
        ranks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ShoalError(f"malformed --ranks '{text}': give a number or a list like 2,4") from None
    if not ranks or min(ranks) < 1:
        raise ShoalError(f"--ranks must list positive numbers, got '{text}'")
    return ranks


def run(args: argparse.Namespace) -> int:
    if args.resume:
        run_dir, request, plan = runner.resume(args.resume)
    else:
        request = runner.BenchRequest(
            tests=args.tests or "mpbench,imb",
            sizes=args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES),
            ranks=_ranks(args.ranks),
            mpi=args.mpi,
            options=_options(args),
            emulate=args.emulate,
            link=args.link,
            cluster=args.cluster,
            nodes=args.nodes,
            ranks_per_node=args.ranks_per_node,
            power=args.power,
            idle_s=args.idle,
            wait=args.wait,
        )
        if args.idle and not args.power:
            raise ShoalError("--idle measures a power baseline: add --power SOURCE")
        if args.idle < 0:
            raise ShoalError(f"--idle must not be negative, got {args.idle}")
        run_dir, plan = runner.start(request, ["shoal", *sys.argv[1:]], args.out)
    done_before = len(run_dir.rows("results")) + len(run_dir.rows("skipped"))
    if not args.json:
        print(f"shoal bench: {plan.total_points} points with {plan.mpi.name} -> {run_dir.path}",
              file=sys.stderr)
    with Progress(plan.total_points, done_before, quiet=args.json) as events:
        runner.execute(run_dir, plan, events)
    rows = run_dir.rows("results")
    failures = run_dir.rows("failures")
    shares = heterogeneity.write(run_dir) if request.on_cluster else []
    if args.json:
        print(json.dumps({"run": str(run_dir.path), "results": rows, "failures": failures,
                          "collective_share": shares}, indent=1, default=str))
    else:
        _summary(rows, failures)
        if shares:
            print("per-node share of the collective time: heterogeneity.csv "
                  "(slow links and devices: shoal cluster matrix)")
        print(f"results: {run_dir.path}")
    return 0 if not failures else 1


def _summary(rows: list[dict[str, str]], failures: list[dict[str, str]]) -> None:
    """One line per test and rank count: smallest-size time, best bandwidth, convergence."""
    from rich.console import Console

    table = render.narrow_table(["test", "nodes", "ranks", "sizes", "time at\nsmallest",
                                 "peak\nbandwidth", "not\nconverged"],
                                left=("test",), title="shoal bench summary")
    groups: dict[tuple[str, str, str, str], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault((row["config"], row["test"], row["nodes"], row["ranks"]), []).append(row)
    for (config, test, nodes, ranks), group in groups.items():
        group.sort(key=lambda r: int(r["size_B"]))
        bandwidths = [float(r["bandwidth_median_Bps"]) for r in group if r["bandwidth_median_Bps"]]
        unconverged = sum(r["converged"] != "true" for r in group)
        table.add_row(
            test, nodes, ranks,
            f"{render.byte_size(int(group[0]['size_B']))}..{render.byte_size(int(group[-1]['size_B']))}",
            render.seconds(float(group[0]["time_median_s"])),
            render.bandwidth(max(bandwidths)) if bandwidths else "-",
            f"[yellow]{unconverged}[/]" if unconverged else "0",
        )
    console = Console(stderr=False)
    console.print(table)
    if failures:
        console.print(f"[red]{len(failures)} point(s) failed[/] (see failures.csv): " +
                      ", ".join(f"{f['test']}:{f['size_B']} ({f['reason']})" for f in failures[:5]))
