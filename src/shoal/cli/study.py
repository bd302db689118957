"""`shoal study`: perf/W over node counts, the optimal cluster size, process locally or offload."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from shoal.cli._where import POWER_SPEC
from shoal.inputs import options as typed
from shoal.inputs.grammar import Bounds
from shoal.mpi import kinds
from shoal.errors import ShoalError
from shoal.study import request as defaults
from shoal.study.request import StudyRequest, parse_mix

if TYPE_CHECKING:
    from shoal.study.findings import Findings

ORDER = 5


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "study", help="the main job: node-count sweep with power, optimum, offload decision, report",
        description="Run the MPBench suite (or IMB) at every node count of a cluster and on a "
                    "traditional reference system, with power on every node; fit Amdahl and Woo-Lee, "
                    "find the optimal cluster size, decide whether to process locally or offload, "
                    "and write one report. With no arguments: 4 emulated MinnowBoard MAX against an "
                    "emulated NUC, as in the thesis.")
    p.add_argument("--emulate", type=typed.text, default=None, metavar="SPEC",
                   help=f"emulated devices (default {defaults.DEFAULT_EMULATE})")
    p.add_argument("--cluster", type=typed.text, default=None, metavar="FILE", help="inventory of real devices instead")
    p.add_argument("--attach", type=typed.text, default=None, metavar="ID",
                   help="an emulated cluster already up ('shoal cluster up'); an emulated reference "
                        "(--reference PROFILE) is then its last device (default reference: host)")
    p.add_argument("--link", type=typed.text, default=None, help="link of emulated devices (default: the profile's)")
    p.add_argument("--reference", type=typed.text, default=None,
                   help=f"traditional system: a device profile to emulate (default {defaults.DEFAULT_REFERENCE}; "
                        "host with --cluster), host, or none")
    p.add_argument("--dilation", type=typed.typed(_dilation, name="dilation"), default=None,
                   metavar="D",
                   help="run the emulated devices (reference included) D times slower than real "
                        "time; default: the smallest whole D at which they fit this host")
    from shoal.cli._where import add_host_speed

    add_host_speed(p)
    from shoal.cli._where import add_clock

    add_clock(p)
    p.add_argument("--freqs", type=typed.FREQUENCIES, default=None, metavar="F1,F2,...",
                   help="run the study at each of these clocks of the emulated devices (their "
                        "P-states, e.g. 500M,750M,1G,1.333G) and name the energy-optimal pair of "
                        "node count and clock, its interval and the model's pair")
    p.add_argument("--nodes", default=None, type=typed.COUNTS_TEXT, help="node counts (default 1..N)")
    p.add_argument("--launch", default=None, choices=("box", "head"),
                   help="emulated devices: box, the MPI's own launch with a daemon in every device "
                        "(default), or head, daemons in the head that start each rank into its device "
                        "(as the OERTE of 'Embedded Processor Virtualization for Broadband Grid Computing'; "
                        "the seed002 preset's default)")
    from shoal.cli._where import add_background, add_bcast, add_qos, add_storage

    add_background(p)
    add_qos(p)
    add_storage(p)
    add_bcast(p)
    p.add_argument("--workloads", type=typed.text, default=None, metavar="NAMES",
                   help=f"workloads timed at every node count (default {defaults.DEFAULT_WORKLOADS}; "
                        "'none' for the benchmarks alone); see shoal work --list")
    p.add_argument("--work-size", action="append", default=[], type=typed.text, metavar="NAME=SIZES",
                   help="a workload's size, or several separated by commas to see the optimum move "
                        "with the problem (e.g. msa=S40-L150,S80-L150); repeatable")
    p.add_argument("--work-reps", type=typed.whole(1, 1000), default=None, metavar="N",
                   help="most repetitions of a workload at one node count (default "
                        f"{defaults.WORK_REPS}); it repeats until its median time is known to --ci")
    p.add_argument("--ci", type=typed.number(Bounds(0, 1, lo_open=True, hi_open=True)), default=None,
                   metavar="FRACTION",
                   help="stop repeating a workload point once the 95%% CI of its median time is within "
                        f"this fraction of the median (default {defaults.CI:g}); flagged when its "
                        "repetitions or time run out first")
    p.add_argument("--mix", type=typed.typed(parse_mix, name="mix"), default=None, metavar="NAME=W,...",
                   help="weights of the workloads in the combined answer (default: equal), "
                        "e.g. raytrace=2,msa=1")
    p.add_argument("--suite", type=typed.text, default=None,
                   help=f"benchmarks measured after the workloads: {defaults.DEFAULT_SUITE} (default), "
                        "imb, mpbench,imb or none")
    p.add_argument("--sizes", default=None, type=typed.SIZES, help="message sizes (default 8,128,2K,32K,512K)")
    p.add_argument("--preset", type=typed.text, default=None, metavar="NAME",
                   help="a seed's experiments as one study, its options filling those not given: "
                        "seed000 (six MinnowBoards against the NUC as the thesis's Table 5.5, MPBench to "
                        "32 MiB, the thesis's readings and Table 5.6 beside shoal's numbers; with --quick: "
                        "1, 3, 4 and 6 boards, ray tracing alone); "
                        "seed002 (128 set-top boxes on DOCSIS beside 8 Xeon blades, fewer where this host "
                        "cannot hold them: IMB's 12 tests at six sizes, ray tracing 512² and 2048², Table "
                        "I's seven alignments scaled, ranks launched from the head; with --quick: 8-32 "
                        "boxes, IMB at 64 B and 256 KiB, no blade)")
    p.add_argument("--quick", action="store_true", default=None,
                   help=f"three sizes and a {defaults.QUICK_TIME_BUDGET_S:g} s budget")
    p.add_argument("--time-budget", type=typed.SECONDS_NUMBER, default=None, metavar="SECONDS",
                   help=f"measuring time of the benchmarks (default {defaults.TIME_BUDGET_S:g}, quick "
                        f"{defaults.QUICK_TIME_BUDGET_S:g}; {defaults.BENCH_BUDGET_WITH_WORK_S:g} "
                        "after workloads); sets each point's budget")
    p.add_argument("--imb-budget", type=typed.SECONDS_NUMBER, default=None, metavar="SECONDS",
                   help="host seconds for the cluster's benchmark calls (IMB on a shared plant, "
                        "MPBench's 32 MiB on 100 Mbit/s; presets: what their 85 or 18 minutes leave "
                        "after the workloads): the costliest points (modelled calls and a fixed cost) "
                        "are planned as not run, each with its reason in the report")
    p.add_argument("--mpi", type=typed.text, default=None, help=kinds.choices_help())
    p.add_argument("--power", default=None, type=POWER_SPEC,
                   help=f"power source on real hosts and 'host' (default {defaults.DEFAULT_POWER})")
    p.add_argument("--data-rate", default=None, type=typed.RATE, metavar="BYTES_PER_S",
                   help="data stream produced at the devices, for the offload decision (e.g. 1M)")
    p.add_argument("--uplink", type=typed.text, default=None, help="uplink to the datacenter: docsis2, ethernet, wifi, lte")
    p.add_argument("--parallel-fraction", type=typed.FRACTION_NUMBER, default=None,
                   help="parallel fraction f of the devices' processing (default 0.95)")
    p.add_argument("--out", type=typed.out_dir, default=None, help="run directory (default runs/study-<time>)")
    p.add_argument("--resume", type=typed.run_dir, default=None, metavar="RUN", help="continue an interrupted study")
    p.set_defaults(func=run, emulates=_emulates, precheck=_precheck)


def _emulates(args: argparse.Namespace) -> bool:
    from shoal.cluster import userns

    if args.resume and not (args.emulate or args.cluster):
        # A resumed study emulates what its saved request emulated.
        from shoal.study import run as study_run

        saved = study_run.saved_request(args.resume)
        if saved is None:
            return False  # the command itself says what is wrong with the directory
        return userns.builds_emulation(saved.emulate, saved.cluster)
    request = _request(args)
    return userns.builds_emulation(request.emulate, request.cluster)


def _precheck(args: argparse.Namespace) -> None:
    """Plan the study (no side effects) before re-running inside a user namespace."""
    if not args.resume:
        from shoal.study import freqs
        from shoal.study import run as study_run

        request = _request(args)
        if request.freqs:
            freqs.validate(request)  # as the sweep itself would, naming --freqs
            for hz in request.freqs:
                study_run.plan(freqs.sub_request(request, hz))
        else:
            study_run.plan(request)


def _request(args: argparse.Namespace) -> StudyRequest:
    offload = {}
    if args.data_rate is not None:
        offload["rate_Bps"] = args.data_rate
    if args.uplink is not None:
        offload["uplink"] = args.uplink
    if args.parallel_fraction is not None:
        offload["parallel_fraction"] = args.parallel_fraction
    return StudyRequest.create(
        emulate=args.emulate, cluster=args.cluster, attach=args.attach, link=args.link,
        reference=args.reference,
        nodes=args.nodes, suite=args.suite, sizes=args.sizes, quick=args.quick,
        time_budget_s=args.time_budget, mpi=args.mpi, power=args.power, offload=offload,
        dilation=args.dilation, host_speed=args.host_speed, recalibrate=args.recalibrate or None,
        workloads=args.workloads, work_sizes=_work_sizes(args.work_size),
        work_reps=args.work_reps, ci=args.ci, mix=args.mix, preset=args.preset,
        imb_budget_s=args.imb_budget, freq=args.freq, governor=args.governor, freqs=args.freqs,
        launch=args.launch, background=args.background, qos=args.qos, storage=args.storage, bcast=args.bcast)


def _work_sizes(items: list[str]) -> dict[str, str]:
    sizes: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ShoalError(f"--work-size {item!r}: give NAME=SIZE or NAME=SIZE,SIZE (e.g. raytrace=512)")
        sizes[name.strip().lower()] = value.strip()
    return sizes


def run(args: argparse.Namespace) -> int:
    # The sweep, models and report (numpy, pandas, matplotlib) load only when a study runs.
    from shoal.study import freqs
    from shoal.study import run as study_run

    if args.resume and freqs.is_sweep(args.resume):
        return _sweep(freqs.resume(args.resume))
    if not args.resume:
        request = _request(args)
        if request.freqs:
            return _sweep(freqs.start(request, ["shoal", *sys.argv[1:]], args.out))
    if args.resume:
        run_dir, study = study_run.resume(args.resume)
    else:
        run_dir, study = study_run.start(request, ["shoal", *sys.argv[1:]], args.out)
    findings = _one(run_dir, study)
    _answer(findings)
    print(f"report: {run_dir.path / 'report' / 'report.html'}")
    return 0


def _one(run_dir, study) -> "Findings":
    """One study measured (with progress), analysed and its report written."""
    from shoal.cli._progress import Progress
    from shoal.report import study_report
    from shoal.study import analysis
    from shoal.study import run as study_run

    print(f"shoal study: at most {study.total_points} points -> {run_dir.path}", file=sys.stderr)
    if study.reference_note:
        print(f"shoal study: {study.reference_note}", file=sys.stderr)
    if study.timing is not None:
        print("\n".join(study.timing.lines()), file=sys.stderr)
    done = sum(len(run_dir.rows(t)) for t in ("results", "skipped", "work"))
    progress = Progress(study.total_points, done, quiet=False)
    with progress as events:
        study_run.measure(run_dir, study, events, progress.work_events())
    findings = analysis.analyse(run_dir)
    study_report.write([run_dir], run_dir.path / "report", {run_dir.path.name: findings})
    if findings.device_speed == "host":
        print(f"shoal: warning: {study_report.HOST_SPEED}", file=sys.stderr)
    return findings


def _sweep(sweep) -> int:
    """Every clock's study, then the energy-optimal (node count, clock) pair."""
    from shoal.study import freqs

    print(f"shoal study: {len(sweep.request.freqs)} clocks -> {sweep.run.path}", file=sys.stderr)
    found = freqs.measure(sweep, _one)
    result = freqs.answer(sweep, found)
    _pair_answer(result)
    print(f"sweep: {sweep.run.path / freqs.SWEEP_JSON}")
    return 0


def _pair_answer(result: dict) -> None:
    """The pairs as a table, the best measured and the model's named under it."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE, title="shoal study --freqs: perf/W of every (nodes, clock) pair, "
                  "relative to 1 device at the highest clock", title_justify="left")
    for column in ("nodes", "clock", "perf/W (95% interval)", "over the best's", "model"):
        table.add_column(column, justify="right")
    for row in result["pairs"]:
        def num(key: str) -> str:
            return "-" if row[key] is None else f"{row[key]:.3f}"
        table.add_row(str(row["nodes"]), f"{row['clock_Hz'] / 1e6:.0f} MHz",
                      f"{num('perf_per_W_rel')} ({num('perf_per_W_rel_lo')}-{num('perf_per_W_rel_hi')})",
                      f"{num('vs_best')} ({num('vs_best_lo')}-{num('vs_best_hi')})" + (" tied" if row["tied_with_best"] else ""),
                      num("model_perf_per_W_rel"))
    console = Console(soft_wrap=False)
    console.print(table)
    best, model = result["best"], result["model"]["best"]

    def name(pair: dict | None) -> str:
        return "none" if pair is None else f"{pair['nodes']} device(s) at {pair['clock_Hz'] / 1e6:.0f} MHz"
    tied = [name(p) for p in result["tied"] if p != best]
    console.print(f"energy-optimal pair, measured: {name(best)}"
                  + (f"; cannot be told apart from: {', '.join(tied)}" if tied else "; stands clear of the others"))
    console.print(f"the model's pair (Amdahl f per workload, the P-states' speed and watts): {name(model)}"
                  + (f" ({result['model']['reason']})" if result["model"].get("reason") else ""))

def _answer(findings: "Findings") -> None:
    """The study's answer, last before the report's path: sizes, offload, host speed, precision."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from shoal.report import answer

    table = Table(box=box.SIMPLE, show_header=False, pad_edge=False, title="shoal study: the answer",
                  title_justify="left")
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("answer", overflow="fold")
    for what, text in answer.terminal_rows(findings):
        table.add_row(what, text)
    Console(soft_wrap=False).print(table)


def _dilation(text: str) -> float:
    from shoal.cluster import dilation

    return dilation.check(text)
