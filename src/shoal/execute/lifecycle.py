"""What every measuring run does around its jobs: record the transport settings
that change what is measured, and end a run whose hosts are gone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from shoal.errors import ShoalError
from shoal.runs.store import Run

if TYPE_CHECKING:
    from shoal.cluster.session import Cluster
    from shoal.mpi.base import MPIInstall


def still_ready(where: "Cluster", mpi: "MPIInstall", program: Path | str, run: Run) -> None:
    """After a failed launch: is every host still there? (ssh clusters ask each host again;
    a host that is gone ends the run at once instead of failing every point after it.)"""
    try:
        where.check_ready(mpi, str(program))
    except ShoalError as exc:
        keep = (f"continue with --resume {run.path} when every host answers"
                if run.manifest.get("kind") in ("bench", "study") else f"see {run.path}")
        raise ShoalError(f"{exc} (they were ready when the run began); finished points are "
                         f"kept: {keep}") from None


def transport_env() -> dict[str, str]:
    """MPI transport settings in the environment: they change what is measured."""
    from shoal import environment
    from shoal.mpi import kinds

    prefixes = (*kinds.setting_prefixes(), environment.WAIT.name)
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(prefixes)}
