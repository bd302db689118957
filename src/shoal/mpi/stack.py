"""The MPI layer's part of a run's stack: how the MPI was built and what compiled the
native programs (seed 000 §5.4 compares MPICH builds as well as operating systems)."""

from __future__ import annotations

import json
from pathlib import Path

from shoal import jsonfile
from shoal.mpi import build
from shoal.mpi.base import MPIInstall


def software(mpi: MPIInstall, programs: list[Path | str]) -> dict[str, object]:
    """``mpi_build`` (the MPI's own tools' account of its build, kept per installation)
    and ``native`` (per program: compiler, flags)."""
    return {"mpi_build": {"name": mpi.name, **_build_facts(mpi)},
            "native": {Path(p).name: build.record(p) for p in dict.fromkeys(map(str, programs))}}


def _build_facts(mpi: MPIInstall) -> dict[str, str]:
    """Asked once per installation (ompi_info takes a second), then read from the cache."""
    path = build.cache_root() / "mpi-build" / f"{mpi.identity}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    facts = mpi.impl.build_facts(mpi)
    if facts:
        jsonfile.replace(path, facts)
    return facts
