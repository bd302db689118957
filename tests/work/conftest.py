"""The workload program, built once per MPI (see work_helpers)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def work_programs():
    """Built programs (and their serial results) per MPI, shared by the session."""
    return {}
