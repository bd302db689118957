"""Option types for argparse, built on the grammars: checked while parsing.

An option given as ``type=options.POSITIVE_SECONDS`` is refused by argparse
itself ("argument --budget: must be above 0, got 0"), before any command
code runs, so nothing is started on a value that means nothing. Options
whose text is kept (``--sizes``, ``--nodes``: they go into the manifest as
typed) are checked and returned unchanged. A grammar an upper layer owns
(power sources, wait modes) is passed in by the command that uses it
(``typed(check, keep_text=True)``); this layer names none of them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Callable

from shoal.errors import ShoalError
from shoal.inputs import grammar
from shoal.inputs.grammar import (FRACTION, NON_NEGATIVE, POSITIVE, SECONDS, SECONDS_OR_ZERO,
                                  Bounds, GrammarError)


def typed(parse: Callable[..., Any], *args: Any, keep_text: bool = False,
          name: str | None = None, **kwargs: Any) -> Callable[[str], Any]:
    """An argparse ``type`` that parses with ``parse`` and reports its message."""

    def convert(text: str) -> Any:
        try:
            value = parse(text, *args, **kwargs)
        except (GrammarError, ShoalError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text if keep_text else value

    convert.__name__ = name or parse.__name__  # argparse names the type in some messages
    return convert


def number(bounds: Bounds) -> Callable[[str], float]:
    return typed(grammar.number, bounds, name="number")


def whole(lo: int = 1, hi: int | None = None) -> Callable[[str], int]:
    return typed(grammar.integer, Bounds(lo, hi), name="whole number")


POSITIVE_NUMBER = number(POSITIVE)
NON_NEGATIVE_NUMBER = number(NON_NEGATIVE)
FRACTION_NUMBER = number(FRACTION)
SECONDS_NUMBER = number(SECONDS)
SECONDS_OR_ZERO_NUMBER = number(SECONDS_OR_ZERO)
SIZE = typed(grammar.size, name="size")
SIZES = typed(grammar.sizes, keep_text=True, name="sizes")
COUNTS = typed(grammar.counts, name="counts")
COUNTS_TEXT = typed(grammar.counts, keep_text=True, name="counts")
RATE = typed(grammar.rate, name="rate")
FREQUENCY = typed(grammar.frequency, name="frequency")
FREQUENCIES = typed(grammar.frequencies, name="frequencies")


def text(value: str) -> str:
    """A name or spec that must not be empty ('' would silently mean "not given")."""
    if not value.strip():
        raise argparse.ArgumentTypeError("is empty; give a value or leave the option out")
    return value


# Longest name of one path component on Linux file systems (NAME_MAX).
NAME_MAX_B = 255


def out_dir(text: str) -> Path:
    """A directory to write into: not '' (that would be the current directory), names that fit."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give the name of a directory to write into")
    too_long = [p for p in Path(text).parts if len(os.fsencode(p)) > NAME_MAX_B]
    if too_long:
        raise argparse.ArgumentTypeError(
            f"has a name of {len(os.fsencode(too_long[0]))} bytes; file systems allow at most "
            f"{NAME_MAX_B}: give a shorter name")
    return Path(text)


def run_dir(text: str) -> Path:
    """An existing run directory (for --resume and the commands that read runs)."""
    path = out_dir(text)
    if not (path / "manifest.json").is_file():
        raise argparse.ArgumentTypeError(f"{text} is not a shoal run directory (no manifest.json); "
                                         "give a directory made by a shoal command")
    return path


def add_runs_in_out(p: argparse.ArgumentParser, runs_help: str, what: str) -> None:
    """RUN... (existing run directories) and --out (default: RUN/WHAT of the first run)."""
    p.add_argument("runs", nargs="+", type=run_dir, metavar="RUN", help=runs_help)
    p.add_argument("--out", type=out_dir, default=None,
                   help=f"where to write the {what} (default: RUN/{what} of the first run)")
