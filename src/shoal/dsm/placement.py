"""Table 1's placements (seed 003) and the modelled power of a run on them.

A preset names, in rank order, the device each rank of a program runs on.
Runs on this machine keep the placement for the energy model. In Table 1
every rank has a core of its own, where a rank is busy unless it sleeps: a
spinning wait keeps its core at 100 % however long it lasts. This machine
has fewer cores than ranks, so a rank's CPU time here says how much of a
shared core it got, not how busy its own core would be. The model therefore
counts a rank's core busy for its whole run except the time it slept in
libshoalwait (measured by the library's telemetry; a run without the
library sleeps never), and a device draws its idle power plus (busy - idle)
times the share of its cores so kept busy. Such numbers are labelled
"modelled"; only ratios between wait modes are compared with the seed,
never absolute watts. For the same reason a run with a placement tells the
MPI there is a slot per rank (``apps.run(own_cores=True)``): an MPI that
knows it is oversubscribed may yield the core in every progress call, which
no rank with a core of its own does (``launch.Job.own_cores``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal import profiles
from shoal.errors import ShoalError


@dataclass(frozen=True)
class Preset:
    name: str
    app: str
    description: str
    # (device name, profile) per rank, in rank order
    ranks: tuple[tuple[str, str], ...]

    @property
    def devices(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for dev, prof in self.ranks:
            out.setdefault(dev, prof)
        return out


PRESETS = {
    "exp-e": Preset("exp-e", "full", "Experiment E: server on a Core i7, writers on a "
                    "Raspberry Pi 3B+ and an Odroid XU4 (seed 003 §4)",
                    (("i7", "core-i7"), ("rpi", "rpi3bplus"), ("xu4", "odroid-xu4"))),
    "hough-hetero": Preset("hough-hetero", "hough", "Table 1 Hough, heterogeneous: servers on "
                           "the Core i7 and the Parallella, I/O on a Pi 3B+, tasks on a Pi 3B+, "
                           "the XU4 and twice the Core i7",
                           (("i7", "core-i7"), ("parallella", "parallella"), ("rpi-a", "rpi3bplus"),
                            ("rpi-b", "rpi3bplus"), ("xu4", "odroid-xu4"), ("i7", "core-i7"),
                            ("i7", "core-i7"))),
    "video-hetero": Preset("video-hetero", "video", "Table 1 Videostream, heterogeneous: server, "
                           "input and output on the Core i7; tasks on the Parallella, two Pi 3B+ "
                           "and the XU4",
                           (("i7", "core-i7"), ("i7", "core-i7"), ("i7", "core-i7"),
                            ("parallella", "parallella"), ("rpi-a", "rpi3bplus"),
                            ("rpi-b", "rpi3bplus"), ("xu4", "odroid-xu4"))),
    "video-recs": Preset("video-recs", "video", "Table 1 Videostream, RECS: server on Core i7 B, "
                         "input and output on Core i7 A, tasks on four Cortex-A15 nodes",
                         (("i7-b", "core-i7"), ("i7-a", "core-i7"), ("i7-a", "core-i7"),
                          ("a15-1", "cortex-a15"), ("a15-2", "cortex-a15"),
                          ("a15-3", "cortex-a15"), ("a15-4", "cortex-a15"))),
}


def preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ShoalError(f"unknown placement preset '{name}'; use one of {', '.join(PRESETS)}")
    return PRESETS[name]


def check_fits(p: Preset, ranks: int, devices_available: int | None = None) -> None:
    """A preset places exactly its ranks, on at most the devices there are."""
    if ranks != len(p.ranks):
        raise ShoalError(f"preset {p.name} places {len(p.ranks)} ranks, not {ranks}; "
                         f"use -n {len(p.ranks)}")
    if devices_available is not None and devices_available < len(p.devices):
        raise ShoalError(f"preset {p.name} needs {len(p.devices)} devices but the cluster has "
                         f"{devices_available}; use a larger cluster or another preset")


def for_program(name: str, app: str, ranks: int) -> Preset:
    """The preset ``name`` checked against the program it is to place and its ranks: the three
    patterns (full, burst, lock) share their presets, the other programs have their own."""
    chosen = preset(name)
    patterns = ("full", "burst", "lock")

    def places(p: Preset) -> bool:
        return p.app == app or (p.app in patterns and app in patterns)

    if not places(chosen):
        fitting = [n for n, q in PRESETS.items() if places(q)]
        raise ShoalError(f"preset {chosen.name} places {chosen.app}, not {app}; use "
                         f"{' or '.join(fitting) or 'no preset'}")
    check_fits(chosen, ranks)
    return chosen


def on_nodes(p: Preset | None, ranks: int, nodes: list[str]) -> list[tuple[str, int]]:
    """(node, ranks on it) in rank order, for a run on a cluster's ``nodes``.

    With a preset, its devices take the first nodes in the order they first
    appear (the preset's rank order is kept: MPI launchers fill hosts in the
    order given). Without one, the ranks fill the nodes in equal blocks.
    """
    if p is None:
        per = -(-ranks // len(nodes))
        return [(n, min(per, ranks - i * per)) for i, n in enumerate(nodes) if ranks > i * per]
    check_fits(p, ranks, len(nodes))
    devices = list(p.devices)
    blocks: list[tuple[str, int]] = []
    for dev, _ in p.ranks:
        if blocks and blocks[-1][0] == dev:
            blocks[-1] = (dev, blocks[-1][1] + 1)
        elif any(b[0] == dev for b in blocks):
            raise ShoalError(f"preset {p.name} puts ranks of {dev} apart (MPI launchers place "
                             "each host's ranks together); run it on this machine, without "
                             "--emulate or --cluster")
        else:
            blocks.append((dev, 1))
    return [(nodes[devices.index(dev)], count) for dev, count in blocks]


def modelled_power(p: Preset, split: list[dict[str, Any]], wall_s: float) -> list[dict[str, Any]]:
    """Per device: mean W and J over wall_s; ``split`` is apps.Result.time_split()."""
    known = profiles.load()
    rows = []
    for dev, prof_name in p.devices.items():
        prof = known[prof_name]
        mine = [r for r, (d, _) in zip(split, p.ranks) if d == dev]
        awake = sum(min(max(r["wall_s"] - r["sleep_s"], 0.0), wall_s) for r in mine)
        share = min(awake / (wall_s * prof.cores), 1.0) if wall_s > 0 else 0.0
        watts = prof.idle_W + (prof.busy_W - prof.idle_W) * share
        rows.append({"device": dev, "profile": prof_name, "ranks": len(mine), "awake_s": awake,
                     "cpu_here_s": sum(r["cpu_s"] for r in mine), "busy_share": share,
                     "power_W": watts, "energy_J": watts * wall_s, "kind": "modelled"})
    return rows
