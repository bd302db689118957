"""How the benchmark scripts end: a ShoalError is one line on stderr and exit 2."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from shoal.errors import ShoalError


def run_main(main: Callable[[], int]) -> None:
    try:
        sys.exit(main())
    except ShoalError as exc:
        print(f"{Path(sys.argv[0]).stem}: {exc}", file=sys.stderr)
        sys.exit(2)


def root_run_dir(out: "Path | None", prefix: str) -> "Path":
    """Where a script that emulates devices in the host's namespaces keeps its runs (``out``,
    else a new temporary directory); it must run as root."""
    import os
    import tempfile

    if os.geteuid() != 0:
        raise SystemExit("run as root (emulated devices in the host's namespaces)")
    return out or Path(tempfile.mkdtemp(prefix=prefix))
