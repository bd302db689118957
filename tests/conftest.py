"""Shared fixtures: the MPIs every integration test runs under."""

from __future__ import annotations

import pytest

from shoal.mpi import build, discover


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


#: Native builds persist across test sessions in the user's own shoal cache. A build's
#: key holds the MPI's identity and a hash of its sources and flags, and each build
#: renames a finished file into place, so sessions running at once share it safely.
NATIVE_CACHE = str(build.cache_root())


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Runs go to a temporary directory; native builds go to the persistent cache."""
    monkeypatch.setenv("SHOAL_CACHE", NATIVE_CACHE)
    monkeypatch.setenv("SHOAL_RUNS", str(tmp_path_factory.getbasetemp() / "runs"))
