"""Command-line entry point: parse arguments, call the library, render.

Each command group lives in its own module under shoal.cli and exposes
``register(subparsers)``; it adds its parser(s) and sets ``func`` to a
callable taking the parsed namespace and returning an exit code. Modules are
found automatically; ``ORDER`` (a number, default 100) sets where a module's
commands appear in ``shoal --help``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from shoal import __version__, proc
from shoal.errors import ShoalError



def _command_modules() -> list:
    modules = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "register"):
            modules.append(module)
    return sorted(modules, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shoal",
        description="Energy-aware parallel computing on small Linux devices.",
    )
    parser.add_argument("--version", action="version", version=f"shoal {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="print every external command shoal runs (mpiexec, tc, ip)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        module.register(sub)
    return parser


class _ArgumentParserError(ShoalError):
    pass


def _one_line_parser_errors(parser: argparse.ArgumentParser) -> None:
    """argparse prints usage plus an error and exits 2; keep it one line."""

    def error(message: str) -> None:  # noqa: ANN001
        raise _ArgumentParserError(f"{message} (see 'shoal --help')")

    parser.error = error  # type: ignore[method-assign]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _one_line_parser_errors(sub)


def _emulates(args: argparse.Namespace) -> bool:
    """Whether the command builds emulated devices here (a command may set ``emulates``)."""
    from shoal.cluster import userns

    decide = getattr(args, "emulates", None)
    if decide is not None:
        return decide(args)
    return userns.builds_emulation(getattr(args, "emulate", None), getattr(args, "cluster", None),
                                   getattr(args, "resume", None))


def _into_user_namespace(args: argparse.Namespace, argv: list[str]) -> None:
    """Emulation without root runs in a user namespace: re-run the command there, or set it up."""
    from shoal.cluster import userns

    if userns.inside():
        userns.prepare()
        return
    if not userns.needed():
        return
    attaches = getattr(args, "attaches", None)  # a command whose options are parsed late says
    attach = attaches(args) if attaches is not None else getattr(args, "attach", None)
    if attach:
        from shoal.cluster import state

        record = state.read(attach)
        if record and record.get("in_user_namespace"):
            userns.enter(record, argv)
    elif _emulates(args):
        _check_before_namespace(args)
        userns.reexec(argv, detach=bool(getattr(args, "keeps_cluster", False)))


def _check_before_namespace(args: argparse.Namespace) -> None:
    """Refuse here what the command would refuse: the re-run inside the user namespace replaces
    this process, so bad input must be answered before (a caller of main() keeps its process).
    A command may set ``precheck`` (its own planning, without side effects); else the
    ``--emulate`` spec and ``--link`` are checked."""
    check = getattr(args, "precheck", None)
    if check is not None:
        check(args)
    elif getattr(args, "emulate", None):
        from shoal.cluster import inventory

        inventory.from_emulate(args.emulate, getattr(args, "link", None))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    _one_line_parser_errors(parser)
    debug = "--debug" in argv
    proc.install_signal_handlers()
    proc.received = None
    try:
        args = parser.parse_args(argv)
        if args.verbose:
            from shoal import verbose

            verbose.enable()
        if not getattr(args, "func", None):
            parser.print_help()
            return 0
        from shoal.cli import _environment as environment

        environment.check()
        _into_user_namespace(args, argv)
        return int(args.func(args) or 0)
    except ShoalError as exc:
        _end_runs("interrupted" if proc.received else "failed", str(exc))
        if debug:
            raise
        print(f"shoal: {exc}", file=sys.stderr)
        return _signal_status() or exc.exit_code
    except KeyboardInterrupt:
        _end_runs("interrupted", proc.stop_reason())
        if debug:
            raise
        print("shoal: interrupted; finished results are kept on disk", file=sys.stderr)
        return _signal_status() or 130
    except Exception as exc:
        _end_runs("failed", f"internal error: {type(exc).__name__}: {exc}")
        raise
    finally:
        proc.stop_all()   # nothing shoal started outlives it


def entry() -> int:
    """The ``shoal`` program: main(), then no signal may turn its exit status into a
    death by signal while the interpreter exits (see proc.settle_signals)."""
    try:
        return main()
    finally:
        proc.settle_signals()


def _end_runs(status: str, reason: str) -> None:
    """No run of this command stays "running": stop what it started first, then mark it."""
    from shoal.runs import store

    with proc.signals_ignored():  # a second Ctrl-C must not cut the marking short
        proc.stop_all()
        store.end_active(status, reason)


def _signal_status() -> int | None:
    """128 + the signal number when SIGTERM/SIGHUP stopped shoal (as a shell reports it)."""
    return 128 + proc.received if proc.received else None


if __name__ == "__main__":
    sys.exit(main())
