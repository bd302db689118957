"""Links between the hosts of a cluster spread over several: who is where, and whether the
underlay is fast enough.

One address plan for the whole cluster: every member (each device, and each host's head)
has one index in the whole cluster, which gives its address and MAC, so no two hosts reuse
one. The first host with devices holds the cluster's head (``shoal-head``, index 0); the
heads of the others are ``shoal-head-K``. Each host's forwarder binds the cluster's UDP port
on its host and knows, per other host, its underlay address and the MACs of the members
behind it (``linkemu.Peers``); linkemu.c says how frames cross and are delivered at the
emulated time.

The forwarders measure the underlay as they start (probes, NTP's four stamps): its round-trip
time and each pair of hosts' clock offset. ``check`` refuses a cluster in which some link
between hosts has an emulated latency below the underlay's one-way delay over D: its frames
would arrive after the time the link model delivers them.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import socket
from dataclasses import dataclass

from shoal.cluster import linkemu
from shoal.errors import ShoalError

HEAD = "shoal-head"
# UDP ports the forwarders choose from, one per cluster (from its id): above the registered
# ports' usual range and below Linux's ephemeral ports (32768-60999).
PORT_BASE, PORT_COUNT = 20000, 10000


def port_of(cluster_id: str) -> int:
    """The UDP port of a cluster's forwarders, the same on every host (from its id)."""
    digest = hashlib.sha256(cluster_id.encode()).digest()
    return PORT_BASE + int.from_bytes(digest[:4], "big") % PORT_COUNT


def head_name(position: int) -> str:
    """The head of the share at ``position`` (0: the cluster's head)."""
    return HEAD if position == 0 else f"{HEAD}-{position + 1}"


def underlay_address(host: str, given: str | None = None) -> str:
    """The IPv4 address the other hosts reach ``host`` at: its inventory address, else its
    name as this machine resolves it (Slurm's node names)."""
    name = given or host
    try:
        return socket.gethostbyname(name.rsplit("@", 1)[-1])
    except OSError as exc:
        raise ShoalError(f"host {host}: cannot resolve {name} to an IPv4 address ({exc.strerror or exc}); "
                         "give its address in the hosts file") from None


def plan(cluster_id: str, shares: dict[str, list[str]], addresses: dict[str, str]) -> dict:
    """The links part of the agents' plan: per host with devices (``shares``: host -> its
    devices, in the inventory's order) its underlay address and its members' indices; the
    port and the key. Devices are numbered in the inventory's order from 1, the heads after."""
    indices: dict[str, dict[str, int]] = {}
    number = 1
    for host, devices in shares.items():
        indices[host] = {}
        for name in devices:
            indices[host][name] = number
            number += 1
    for position, host in enumerate(shares):
        indices[host]["head"] = 0 if position == 0 else number
        number += position > 0
    return {"port": port_of(cluster_id), "key": secrets.token_hex(8),
            "hosts": {h: {"address": addresses[h], "indices": indices[h]} for h in shares}}


@dataclass(frozen=True)
class ShareLinks:
    """What one host's share needs from the plan: its members' indices in the whole cluster,
    every member's name (for /etc/hosts) and its forwarder's peers."""

    host: str
    index: dict[str, int]   # this share's members ("head" and its devices) -> index
    names: dict[int, str]   # every member of the cluster: index -> host name
    peers: linkemu.Peers

    @classmethod
    def from_plan(cls, links: dict, host: str, mac_of) -> "ShareLinks":
        """``mac_of``: index -> MAC (the emulated cluster's)."""
        names = {}
        for position, (other, entry) in enumerate(links["hosts"].items()):
            for name, index in entry["indices"].items():
                names[index] = head_name(position) if name == "head" else name
        others = tuple(linkemu.Peer(entry["address"], int(links["port"]),
                                    tuple(mac_of(i) for i in entry["indices"].values()))
                       for other, entry in links["hosts"].items() if other != host)
        return cls(host, dict(links["hosts"][host]["indices"]), names,
                   linkemu.Peers(int(links["port"]), links["key"], others))

    def describe(self) -> dict:
        return {"udp_port": self.peers.port, "peers": [f"{p.address}:{p.port}" for p in self.peers.others]}


# -- the underlay, as the forwarders measured it -----------------------------------------
@dataclass(frozen=True)
class Underlay:
    """One host's view of another over the underlay, from its forwarder's probes."""

    rtt_min_s: float
    rtt_median_s: float
    rtt_max_s: float
    clock_offset_s: float      # the other host's real-time clock less this one's
    monotonic_offset_s: float  # the same for the monotonic clocks (used to deliver frames)
    probes: int

    @property
    def one_way_s(self) -> float:
        """The underlay's one-way delay: half the median round trip (of the last probes)."""
        return self.rtt_median_s / 2

    @classmethod
    def from_stats(cls, peer: dict) -> "Underlay":
        return cls(peer["rtt_min_ns"] / 1e9, peer["rtt_median_ns"] / 1e9, peer["rtt_max_ns"] / 1e9,
                   peer["clock_offset_ns"] / 1e9, peer["offset_ns"] / 1e9, int(peer["replies"]))

    def describe(self) -> dict:
        return {"rtt_min_s": self.rtt_min_s, "rtt_median_s": self.rtt_median_s, "rtt_max_s": self.rtt_max_s,
                "one_way_s": self.one_way_s, "clock_offset_s": self.clock_offset_s,
                "monotonic_offset_s": self.monotonic_offset_s, "probes": self.probes}


def underlay_views(stats: dict, links: dict, host: str) -> dict[str, Underlay]:
    """Per other host, what this host's forwarder (its statistics) measured of it."""
    by_address = {f"{e['address']}:{links['port']}": h for h, e in links["hosts"].items() if h != host}
    return {by_address[p["address"]]: Underlay.from_stats(p) for p in stats.get("peers", [])
            if p["address"] in by_address and p["replies"] > 0}


def dilation_fitting(latency_s: float, one_way_s: float) -> float:
    """The smallest whole D at which a link's latency (in device time) covers the underlay's."""
    return float(max(1, math.ceil(one_way_s / latency_s - 1e-9))) if latency_s > 0 else math.inf


def check(pairs: list[tuple[str, str, str, str, float]], delays: dict[tuple[str, str], float],
          d: float) -> None:
    """Refuse the first link between hosts whose emulated latency is below the underlay's
    one-way delay over D. ``pairs``: (device, its host, device, its host, the path's latency
    in device time), one per link type pair and host pair; ``delays``: (host, host) -> the
    underlay's one-way delay in host time."""
    worst = None
    for a, host_a, b, host_b, latency_s in pairs:
        seen = [delays[k] for k in ((host_a, host_b), (host_b, host_a)) if k in delays]
        one_way = max(seen, default=None)  # the slower of the two hosts' views
        if one_way is None or latency_s * d >= one_way:
            continue
        short = one_way / d - latency_s
        if worst is None or short > worst[0]:
            worst = (short, a, host_a, b, host_b, latency_s, one_way)
    if worst is None:
        return
    _, a, host_a, b, host_b, latency_s, one_way = worst
    fits = dilation_fitting(latency_s, one_way)
    raise ShoalError(
        f"the link between {a} on {host_a} and {b} on {host_b} has an emulated latency of "
        f"{_us(latency_s)}, below the underlay's one-way delay over D ({_us(one_way)} / {d:g} = "
        f"{_us(one_way / d)}): its frames would arrive late; D = {fits:g} fits (--dilation {fits:g}), "
        "or keep those devices on one host")


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} us"


# -- frames between hosts, as the forwarders counted them --------------------------------
def counted(stats: dict) -> dict:
    """What one forwarder counted of the frames from other hosts, per sending device (by
    MAC): frames, late (arrived after the time the model delivers them), lost (gaps in its
    sequence) and the largest lateness; per other host, the frames each way."""
    devices = {r["mac"]: {"frames": r["frames"], "late": r["late"], "lost": r["lost"],
                          "reordered": r["reordered"], "late_max_s": r["late_max_ns"] / 1e9}
               for r in stats.get("remotes", [])}
    peers = {p["address"]: {"frames_out": p["frames_out"], "frames_in": p["frames_in"],
                            "send_errors": p["send_errors"]} for p in stats.get("peers", [])}
    return {"devices": devices, "peers": peers, "foreign_datagrams": stats.get("foreign_datagrams", 0)}


def by_device(reports: dict[str, dict | None], links: dict, mac_of) -> dict[str, dict]:
    """Every host's counts (``counted``) as one table: per sending member (its name, its
    host), frames, late and lost summed over the hosts that received them."""
    names = {mac_of(i): (head_name(position) if name == "head" else name, host)
             for position, (host, entry) in enumerate(links["hosts"].items())
             for name, i in entry["indices"].items()}
    table: dict[str, dict] = {}
    for counts in reports.values():
        for mac, c in ((counts or {}).get("devices") or {}).items():
            name, host = names.get(mac, (mac, "?"))
            row = table.setdefault(name, {"host": host, "frames": 0, "late": 0, "lost": 0, "late_max_s": 0.0})
            row["frames"] += c["frames"]
            row["late"] += c["late"]
            row["lost"] += c["lost"]
            row["late_max_s"] = max(row["late_max_s"], c["late_max_s"])
    return table


def judge(before: dict[str, dict], after: dict[str, dict]) -> dict:
    """Frames between hosts in a stretch of a run (two ``by_device`` tables): how many, how
    many late or lost, and a flag with one line when any were, as host slack flags a run
    whose devices did not get their CPU."""
    rows = {}
    for name, a in after.items():
        b = before.get(name, {"frames": 0, "late": 0, "lost": 0})
        rows[name] = {k: a[k] - b[k] for k in ("frames", "late", "lost")} | {"host": a["host"]}
    frames = sum(r["frames"] for r in rows.values())
    late = sum(r["late"] for r in rows.values())
    lost = sum(r["lost"] for r in rows.values())
    worst = max(rows, key=lambda n: rows[n]["late"] + rows[n]["lost"], default=None)
    flagged = bool(late or lost)
    why = None
    if flagged and worst is not None:
        w = rows[worst]
        why = (f"{late} of {frames} frames between hosts arrived after their emulated delivery time and "
               f"{lost} were lost (most from {worst} on {w['host']}: {w['late']} late, {w['lost']} lost); "
               "a larger --dilation leaves the underlay more time")
    return {"frames": frames, "late": late, "lost": lost, "flagged": flagged, "why": why, "by_device": rows}
