"""How a placement's ranks wait for messages: the mode, and what loading it takes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.execute.placement import Placement
from shoal.execute.where import Where

if TYPE_CHECKING:
    from shoal.cluster.session import Cluster
    from shoal.mpi.base import MPIInstall


def wait_mode(request: Where, where: "Cluster", placement: Placement,
              otherwise: str | None = None) -> str | None:
    """How the placement's ranks wait: --wait, else the cluster's own mode for them
    (emulated devices whose quota polling would use up), else ``otherwise``."""
    names = list(placement.node_names) if placement.node_names else None
    cluster_mode = where.default_wait(placement.most_per_node, names) if request.on_cluster else None
    return request.wait or cluster_mode or otherwise


def wait_setup(mode: str | None, mpi: "MPIInstall") -> tuple[dict[str, str], str]:
    """The ranks' environment and the results' label for libshoalwait ``mode`` (None: not loaded)."""
    if not mode:
        return {}, ""
    from shoal.wait import parse_mode, wait_env

    return wait_env(mode, mpi), parse_mode(mode).text
