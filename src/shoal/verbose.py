"""`--verbose`: echo every external command shoal runs, ready to paste."""

from __future__ import annotations

import shlex
import sys

_enabled = False


def enable() -> None:
    global _enabled
    _enabled = True


def enabled() -> bool:
    return _enabled


def show(argv: list[str], env: dict[str, str] | None = None) -> None:
    """Print a command line (with the environment it adds) to stderr."""
    if not _enabled:
        return
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items()))
    line = shlex.join([str(a) for a in argv])
    print(f"+ {prefix + ' ' if prefix else ''}{line}", file=sys.stderr, flush=True)
