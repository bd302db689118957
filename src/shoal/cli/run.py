"""`shoal run`: run an unmodified MPI program with adaptive waiting.

Two forms::

    shoal run --wait backoff [--mpi MPI] -n 4 -- ./app args...
        shoal builds libshoalwait for the MPI and launches the ranks itself
        (through shoal.mpi.launch, LD_PRELOAD and SHOAL_WAIT* per rank)
    shoal run --wait backoff -- mpiexec -n 4 ./app args...
        your own launcher line, run as given; shoal only adds the environment,
        in the form that MPI's launcher forwards to the ranks. The MPI is the
        one that mpiexec belongs to unless --mpi says otherwise.

Afterwards the per-rank telemetry is summarised (tables on stderr: per rank
and call class, and per call site how its predicted arrivals fared, then the
wait parameters and the calibration they came from (shoal wait calibrate); or
one JSON object on stdout with --json). With --telemetry DIR the bytes and messages
between every pair of ranks are kept there too (traffic.csv, a heatmap in
traffic.png; see docs/wait.md). The exit code is the program's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from shoal import proc
from shoal.cli._where import WAIT_MODE
from shoal.errors import Interrupted, ShoalError
from shoal.inputs import options as typed
from shoal.inputs import ranklimit
from shoal.inputs.grammar import Bounds
from shoal.mpi import kinds
from shoal.runs import jsonout
from shoal.wait.modes import MODES_HELP, parse_classes, parse_mode

ORDER = 30


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="run an MPI program whose idle ranks sleep instead of spinning",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wait", default="backoff", type=WAIT_MODE, metavar="MODE",
                   help=f"wait mode: {MODES_HELP} (default backoff)")
    p.add_argument("--mpi", type=typed.text, default=None, help=kinds.choices_help())
    p.add_argument("-n", "--ranks", type=typed.whole(1), default=None, help="number of ranks")
    p.add_argument("--oversubscribe", type=typed.number(Bounds(1, 1024)), default=None, metavar="FACTOR",
                   help=f"ranks per CPU at most (default {ranklimit.DEFAULT_OVERSUBSCRIBE})")
    p.add_argument("--classes", type=typed.text, default=None,
                   help="call classes to rewrite: comma list of p2p, send, coll (default all)")
    p.add_argument("--telemetry", default=None, type=typed.out_dir, metavar="DIR",
                   help="keep the per-rank telemetry JSON files in DIR, with who talked to "
                        "whom (traffic.csv, traffic.json, traffic.png)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    p.set_defaults(func=run)


def _program(argv: list[str]) -> list[str]:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise ShoalError("no program given; use shoal run --wait MODE -n N -- PROGRAM ARGS")
    return argv


def _executable(name: str) -> str:
    found = proc.find(name)
    if not found:
        raise ShoalError(f"program {name} not found or not executable; give its path")
    return str(Path(found).resolve())


def run(args) -> int:
    from shoal.mpi import discover
    from shoal.mpi.launch import Job
    from shoal.wait import library, telemetry, traffic, tuning

    mode = parse_mode(args.wait)
    if args.classes is not None:
        parse_classes(args.classes)
    program = _program(args.program)
    injected = Path(program[0]).name in kinds.launcher_names()
    if injected and args.ranks is not None:
        raise ShoalError("-n goes to your own mpiexec in the 'shoal run -- mpiexec ...' form; "
                         "drop shoal's -n")
    if not injected and args.ranks is None:
        raise ShoalError("say how many ranks with -n N (or give a whole mpiexec line after --)")
    if args.ranks is not None:
        ranklimit.check(args.ranks, option="-n",
                        oversubscribe=args.oversubscribe or ranklimit.DEFAULT_OVERSUBSCRIBE)
    if injected:
        launcher = _executable(program[0])
        mpi = discover.resolve(args.mpi or launcher)
    else:
        mpi = discover.resolve(args.mpi)

    keep = args.telemetry is not None
    tel_dir = Path(args.telemetry) if keep else Path(tempfile.mkdtemp(prefix="shoal-wait-"))
    try:
        tel_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ShoalError(f"cannot create telemetry directory {tel_dir}: {exc.strerror}") from exc
    for old in tel_dir.glob("rank-*.json"):
        old.unlink()
    tuned = tuning.for_launch(mode)   # what wait_env sets from this host's calibration
    try:
        if injected:
            env = library.forwarding_env(
                library.wait_env(mode.text, mpi, tel_dir, args.classes), mpi)
            process = proc.start([launcher, *program[1:]], env={**os.environ, **mpi.env(), **env},
                                 show_env=env, also=mpi.impl.strays)
        else:
            job = library.apply(Job(mpi, args.ranks, [_executable(program[0]), *program[1:]]),
                                mode.text, tel_dir, args.classes)
            process = job.start()
        try:
            code = process.wait()
        except KeyboardInterrupt:
            process.stop()
            raise Interrupted("interrupted; the program was stopped") from None
        records = telemetry.read_dir(tel_dir)
        rows = telemetry.summarize(records)
        site_rows = telemetry.sites(records)
        talk = traffic.rows(records)
        if keep and records:
            traffic.write(tel_dir, talk, traffic.ranks(records),
                          f"{program[0]} under {mode.text} ({mpi.name})")
        if args.json:
            print(jsonout.dumps({"mode": mode.text, "mpi": mpi.name, "exit_code": code,
                                 "wait_parameters": tuned.describe(),
                              "ranks_reported": len(records), "summary": rows,
                              "sites": site_rows, "traffic": talk,
                              "telemetry_dir": str(tel_dir) if keep else None}))
        elif records:
            telemetry.render(rows, f"shoal run --wait {mode.text} ({mpi.name})", site_rows)
            for line in tuned.lines():
                print(line, file=sys.stderr)
            if keep:
                print(f"who talked to whom: {tel_dir / 'traffic.csv'} (heatmap: traffic.png)",
                      file=sys.stderr)
        if not records:
            print("shoal: no telemetry: the program did not reach MPI_Finalize "
                  f"(exit code {code})", file=sys.stderr)
        return code
    finally:
        if not keep:
            shutil.rmtree(tel_dir, ignore_errors=True)
