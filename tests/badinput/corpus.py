"""The bad-input corpus's cases (``cases/*.toml``, described in test_corpus.py): reading one,
writing its files into its directory, and whether its command emulates devices here."""

from __future__ import annotations

from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

CASES = sorted((Path(__file__).parent / "cases").glob("*.toml"))


def load(path: Path) -> dict:
    return tomllib.loads(path.read_text())


def write_files(case: dict, work: Path) -> None:
    """The case's files (text with ``{dir}`` filled in, and binary ones) into ``work``."""
    for name, text in case.get("files", {}).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text.replace("{dir}", str(work)))
    for name, data in case.get("hex", {}).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(bytes.fromhex(data))


def argv(case: dict, work: Path) -> list[str]:
    return [a.replace("{dir}", str(work)) for a in case["argv"]]


def emulates_here(case: dict, work: Path) -> bool:
    """Whether the case's command, once its options parse, emulates devices on this machine:
    as an ordinary user such a command re-runs itself in a user namespace, so it must refuse
    bad input before it does (shoal.cli decides the same way)."""
    from shoal import cli

    parser = cli.build_parser()
    cli._one_line_parser_errors(parser)
    try:
        args = parser.parse_args(argv(case, work))
    except cli.ShoalError:
        return False  # refused while parsing, before any namespace
    if not getattr(args, "func", None):
        return False
    try:
        return cli._emulates(args)
    except cli.ShoalError:
        return True  # the user's path decides it, and refuses there: keep the case

