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


def calibration_place(request: Where, where: "Cluster", placement: Placement) -> dict | None:
    """Whose stored wait calibration the placement's ranks use: this host's (None) for local
    ranks, the devices' profile at its quota on an emulated cluster whose placed devices share
    one profile, else none (``{}``: real hosts keep their own, mixed profiles the defaults)."""
    if not request.on_cluster:
        return None
    names = list(placement.node_names) if placement.node_names else [n.name for n in where.nodes[:placement.nodes]]
    return devices_place(where, names)


def devices_place(where: "Cluster", names: list[str]) -> dict:
    """The calibration key of the cluster's devices ``names``: their profile at its quota on an
    emulated cluster when they share one profile, else ``{}`` (none: the defaults)."""
    if where.emulated is None:
        return {}
    from shoal.wait import calibrate

    profiles = {node.profile.name for node in where.select(names)}
    if len(profiles) != 1:
        return {}
    profile = profiles.pop()
    return calibrate.device_key(where.emulated, profile)


def wait_setup(mode: str | None, mpi: "MPIInstall", place: dict | None = None) -> tuple[dict[str, str], str]:
    """The ranks' environment and the results' label for libshoalwait ``mode`` (None: not loaded),
    calibrated for ``place`` (``calibration_place``)."""
    if not mode:
        return {}, ""
    from shoal.wait import parse_mode, wait_env

    return wait_env(mode, mpi, place=place), parse_mode(mode).text
