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
