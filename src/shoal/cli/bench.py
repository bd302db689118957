"""`shoal bench`: MPI communication benchmarks over message sizes and ranks."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from shoal import render
from shoal.bench.sizes import DEFAULT_SIZES, QUICK_SIZES
from shoal.cli._where import add_energy, add_where
from shoal.errors import ShoalError
from shoal.inputs import options as typed
from shoal.inputs import ranklimit
from shoal.inputs.grammar import Bounds
from shoal.runs import jsonout
from shoal.mpi import kinds

if TYPE_CHECKING:
    from shoal.bench.sweep import Options

ORDER = 10
# Repetitions per point at most: the native program keeps every sample in memory.
MAX_REPS = 10**7


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run MPI communication benchmarks (MPBench, IMB-MPI1)",
                       description="Sweep MPBench's eight and IMB-MPI1's twelve tests over message "
                                   "sizes; every point repeated until its median is known to --ci.")
    p.add_argument("--tests", type=typed.text, default=None,
                   help="suites and tests, comma-separated: mpbench, imb, all, or names such as "
                        "imb.PingPong, bandwidth (default: mpbench,imb)")
    p.add_argument("--sizes", default=None, type=typed.SIZES,
                   help=f"message sizes: list '8,1K,4M' or range '1..4M[:factor]' (default {DEFAULT_SIZES})")
    p.add_argument("-n", "--ranks", default=[2], type=typed.COUNTS, help="MPI ranks, or a list to sweep: 2,4 (default 2)")
    p.add_argument("--mpi", type=typed.text, default=None, help=kinds.choices_help())
    p.add_argument("--ci", type=typed.number(Bounds(0, 1, hi_open=True)), default=None,
                   help="stop a point when the 95%% CI half-width of the median is within this "
                        "fraction of it (default 0.02)")
    p.add_argument("--budget", type=typed.SECONDS_NUMBER, default=None, help="seconds per point at most (default 1)")
    p.add_argument("--min-reps", type=typed.whole(1), default=None, help="repetitions before the CI is judged (default 10)")
    p.add_argument("--max-reps", type=typed.whole(1, MAX_REPS), default=None, help="repetitions per point at most (default 100000)")
    p.add_argument("--rep-time", type=typed.SECONDS_NUMBER, default=None,
                   help="target seconds per repetition; sets inner iterations (default 2e-4)")
    p.add_argument("--inner", type=typed.whole(1, MAX_REPS), default=None,
                   help="operations per repetition, with no calibration (1 for a call that takes "
                        "minutes, as a large Alltoall on a shared plant)")
    p.add_argument("--warmup", type=typed.whole(0, MAX_REPS), default=None,
                   help="untimed warm-up repetitions (default 2); the calibration's trials at the "
                        "inner count measured are among them")
    p.add_argument("--flush", default=0, type=typed.SIZE, help="flush caches between repetitions with a buffer this big (e.g. 16M)")
    p.add_argument("--check", action="store_true", help="verify every received byte")
    p.add_argument("--timeout", type=typed.SECONDS_NUMBER, default=None,
                   help="seconds after which a point counts as hung (default 4*budget+20)")
    p.add_argument("--quick", action="store_true",
                   help=f"fast sweep: sizes {QUICK_SIZES}, CI 5%%, budget 0.2 s")
    add_where(p, nodes_default="all nodes")
    add_energy(p, per="point")
    p.add_argument("--out", type=typed.out_dir, default=None, help="run directory (default runs/bench-<time>)")
    p.add_argument("--resume", type=typed.run_dir, default=None, metavar="RUN",
                   help="continue an interrupted run, measuring only missing points")
    p.add_argument("--json", action="store_true", help="print results as JSON instead of a table")
    p.set_defaults(func=run, precheck=_precheck)


def _options(args: argparse.Namespace) -> Options:
    from shoal.bench.sweep import Options

    quick = args.quick
    opts = Options(
        ci=args.ci if args.ci is not None else (0.05 if quick else 0.02),
        budget_s=args.budget if args.budget is not None else (0.2 if quick else 1.0),
        min_reps=args.min_reps if args.min_reps is not None else (8 if quick else 10),
        max_reps=args.max_reps if args.max_reps is not None else 100000,
        rep_time_s=args.rep_time,
        inner=args.inner,
        warmup=args.warmup,
        flush_B=args.flush,
        check=args.check,
        point_timeout_s=args.timeout,
    )
    if args.inner is not None and args.rep_time is not None:
        raise ShoalError("--inner fixes the operations per repetition and --rep-time calibrates them: "
                         "give one of the two")
    if opts.min_reps > opts.max_reps:
        raise ShoalError(f"--min-reps {opts.min_reps} exceeds --max-reps {opts.max_reps}; "
                         "lower --min-reps or raise --max-reps")
    return opts


def _request(args: argparse.Namespace):
    from shoal.bench import runner

    if args.idle and not args.power:
        raise ShoalError("--idle measures a power baseline: add --power SOURCE")
    return runner.BenchRequest(
        tests=args.tests or "mpbench,imb",
        sizes=args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES),
        ranks=args.ranks,
        mpi=args.mpi,
        options=_options(args),
        emulate=args.emulate,
        link=args.link,
        cluster=args.cluster,
        attach=args.attach,
        nodes=args.nodes,
        ranks_per_node=args.ranks_per_node, ranks_per_device=args.ranks_per_device,
        power=args.power,
        idle_s=args.idle,
        wait=args.wait,
        oversubscribe=args.oversubscribe or ranklimit.DEFAULT_OVERSUBSCRIBE,
        dilation=args.dilation,
        host_speed=args.host_speed,
        recalibrate=args.recalibrate,
        launch=args.launch,
        background=args.background, qos=args.qos, storage=args.storage, bcast=args.bcast,
        freq=args.freq,
        governor=args.governor,
    )


def _precheck(args: argparse.Namespace) -> None:
    """Plan the sweep (no side effects) before re-running inside a user namespace."""
    if not args.resume:
        from shoal.bench import runner

        runner.plan(_request(args))


def run(args: argparse.Namespace) -> int:
    # The sweep's machinery (numpy, pandas) loads only when a benchmark runs.
    from shoal.bench import heterogeneity, runner
    from shoal.cli._progress import Progress

    if args.resume:
        run_dir, request, plan = runner.resume(args.resume)
    else:
        request = _request(args)
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
        print(jsonout.dumps({"run": str(run_dir.path), "results": jsonout.typed_rows(rows),
                             "failures": jsonout.typed_rows(failures),
                             "collective_share": jsonout.typed_rows(shares)}, indent=1))
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

