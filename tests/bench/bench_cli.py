"""Run the shoal CLI as a user would: a subprocess, its exit code and output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def shoal(*args: str, timeout: float = 600, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd)
