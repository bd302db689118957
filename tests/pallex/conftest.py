"""Helpers for the Pallex tests: run the CLI as a user would."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_shoal(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def shoal():
    return run_shoal
