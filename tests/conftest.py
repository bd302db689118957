"""Shared fixtures: the MPIs every integration test runs under."""

from __future__ import annotations

import pytest

from shoal.mpi import discover


def _find(kind: str):
    try:
        return discover.resolve(kind)
    except Exception as exc:  # surfaced as a test error, never a skip
        pytest.fail(f"{kind} is not installed in this environment ({exc}); run 'make setup'")


@pytest.fixture(scope="session")
def mpich():
    return _find("mpich")


@pytest.fixture(scope="session")
def openmpi():
    return _find("openmpi")


@pytest.fixture(scope="session", params=["mpich", "openmpi"])
def any_mpi(request):
    return _find(request.param)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Runs go to a temporary directory; native builds share one cache per session."""
    cache = tmp_path_factory.getbasetemp() / "shoal-cache"
    monkeypatch.setenv("SHOAL_CACHE", str(cache))
    monkeypatch.setenv("SHOAL_RUNS", str(tmp_path_factory.getbasetemp() / "runs"))
