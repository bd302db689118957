"""The values of the SHOAL_* environment variables, checked when a command starts.

libshoalwait reads ``SHOAL_WAIT*`` in every rank and stops the program at
MPI_Init on a malformed value; shoal checks the same grammar first, so the
user hears it once, in one line, before any rank starts. shoal's own
variables (directories, switches) are checked here too: a typo in one is
never taken as "unset".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from shoal import environment as variables
from shoal.errors import ShoalError
from shoal.inputs import grammar
from shoal.inputs.grammar import Bounds, GrammarError

# libshoalwait keeps the telemetry directory in a 4096-byte buffer, with room for file names.
TELEMETRY_PATH_MAX = 4096 - 64


def _integer(lo: int, hi: int) -> Callable[[str], None]:
    def check(value: str) -> None:
        if not value.isdigit() or len(value) > 15:
            raise GrammarError(f"expected a whole number from {lo} to {hi}")
        grammar.integer(value, Bounds(lo, hi))

    return check


def _wait_mode(value: str) -> None:
    from shoal.wait.modes import parse_mode

    parse_mode(value)


def _wait_classes(value: str) -> None:
    from shoal.wait.modes import parse_classes

    parse_classes(value)


def _telemetry(value: str) -> None:
    if len(os.fsencode(value)) >= TELEMETRY_PATH_MAX:
        raise GrammarError(f"a path of at most {TELEMETRY_PATH_MAX - 1} bytes")


def _one_of(*allowed: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in allowed:
            raise GrammarError(f"use {' or '.join(repr(a) for a in allowed)}")

    return check


def _directory_name(value: str) -> None:
    too_long = [p for p in Path(value).parts if len(os.fsencode(p)) > 255]
    if too_long:
        raise GrammarError("has a name longer than 255 bytes")


def _existing_directory(value: str) -> None:
    if not Path(value).is_dir():
        raise GrammarError("is not a directory")


# The variables themselves (names, meanings, defaults) are listed in shoal.environment.
CHECKS: dict[str, Callable[[str], None]] = {
    variables.WAIT.name: _wait_mode,
    variables.WAIT_CLASSES.name: _wait_classes,
    variables.WAIT_SLACK_NS.name: _integer(0, 10**9),
    variables.WAIT_SEND_EAGER_B.name: _integer(0, 2**40),
    variables.WAIT_TELEMETRY.name: _telemetry,
    variables.USERNS.name: _one_of("always"),
    variables.POWER_FASTPOLL.name: _one_of("0", "1"),
    variables.RUNS.name: _directory_name,
    variables.CACHE.name: _directory_name,
    variables.STATE_DIR.name: _directory_name,
    variables.SYSFS_ROOT.name: _existing_directory,
    variables.PROC_ROOT.name: _existing_directory,
    variables.CGROUP_ROOT.name: _existing_directory,
}


def check(environ: dict[str, str] | None = None) -> None:
    """Refuse the first set SHOAL_* variable whose value does not follow its grammar."""
    environ = os.environ if environ is None else environ
    for name, check_value in CHECKS.items():
        value = environ.get(name)
        if value is None or value == "":
            continue  # unset and empty both mean "the default"
        try:
            check_value(value)
        except (GrammarError, ShoalError) as exc:
            raise ShoalError(f"environment variable {name}={value[:80]}: {exc}; "
                             f"fix it or unset {name}") from None
