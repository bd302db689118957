"""Links between the hosts of a cluster spread over several: who is where, and whether the
underlay is fast enough.

One address plan for the whole cluster: every member (each device, and each host's head)
has one index in the whole cluster, which gives its address and MAC, so no two hosts reuse
one. The first host with devices holds the cluster's head (``shoal-head``, index 0); the
heads of the others are ``shoal-head-K``. Each host's forwarder binds the cluster's UDP port
on its host and knows, per other host, its underlay address and the MACs of the members
behind it (``linkemu.Peers``); linkemu.c says how frames cross and are delivered at the
emulated time.

A shared medium (a cable plant) whose devices land on several hosts stays one channel
(``split_media``): the host holding most of its devices owns it, and its forwarder runs the
links of the medium's devices on the other hosts too (proxies), whose forwarders relay their
frames to it and deliver what it sends back. So every frame of such a device crosses the
underlay twice, and the owner handles the channel a lookahead after the model's time (half
the medium's downstream delay) so that relayed frames take their turns in the model's order.

The forwarders measure the underlay as they start (probes, NTP's four stamps): its round-trip
time and each pair of hosts' clock offset. ``check`` refuses a cluster in which some link
between hosts has an emulated latency below the underlay's one-way delay over D: its frames
would arrive after the time the link model delivers them; ``check_split`` one whose split
medium's lookahead is below it.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import socket
from dataclasses import dataclass, field

from shoal.cluster import capacity, linkemu
from shoal.errors import ShoalError
from shoal.profiles import LinkType

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


def plan(cluster_id: str, shares: dict[str, list[str]], addresses: dict[str, str],
         split: dict[str, dict] | None = None) -> dict:
    """The links part of the agents' plan: per host with devices (``shares``: host -> its
    devices, in the inventory's order) its underlay address and its members' indices; the
    port and the key; the shared media split over hosts (``split_media``). Devices are
    numbered in the inventory's order from 1, the heads after."""
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
            "hosts": {h: {"address": addresses[h], "indices": indices[h]} for h in shares},
            "split": split or {}}


def lookahead_s(link: LinkType, d: float) -> float:
    """How long after the model's time a split medium's owner handles its channel, in host
    time: half the medium's downstream delay. A frame relayed to the owner then has that long
    to arrive, and the owner's answer the other half to arrive back before its delivery."""
    return linkemu.channel_delay_s(link) / 2 * d


def split_media(placed: dict[str, list], d: float) -> dict[str, dict]:
    """The shared media whose devices landed on several hosts (``placed``: host -> its
    inventory nodes), each kept one channel on the host holding most of its devices (the first
    of equals): per medium its owner, the lookahead and the devices relayed to it."""
    media: dict[str, dict[str, list]] = {}
    for host, nodes in placed.items():
        for node in nodes:
            if node.link.shared:
                media.setdefault(node.link.name, {}).setdefault(host, []).append(node)
    split = {}
    for name, by_host in media.items():
        if len(by_host) < 2:
            continue
        count = sum(len(nodes) for nodes in by_host.values())
        if count > capacity.FORWARDER_PORTS - 1:
            raise ShoalError(f"the shared medium {name} has {count} devices: it is run whole by one host's "
                             f"link forwarder, which has {capacity.FORWARDER_PORTS} ports (the head's among "
                             "them); split it into smaller media (a link type of its own for each part)")
        owner = max(by_host, key=lambda h: len(by_host[h]))  # the first of equals
        split[name] = {"owner": owner, "lookahead_ns": round(lookahead_s(by_host[owner][0].link, d) * 1e9),
                       "hosts": list(by_host),
                       "devices": [n.name for h, nodes in by_host.items() if h != owner for n in nodes]}
    return split


@dataclass(frozen=True)
class ShareLinks:
    """What one host's share needs from the plan: its members' indices in the whole cluster,
    every member's name (for /etc/hosts) and its forwarder's peers."""

    host: str
    index: dict[str, int]   # this share's members ("head" and its devices) -> index
    names: dict[int, str]   # every member of the cluster: index -> host name
    peers: linkemu.Peers
    # A split shared medium: the devices of other hosts whose links run here (proxies, as
    # forwarder ports with their link types undilated), and this share's devices whose
    # links run on their medium's owner (device -> the owner's "ADDR:PORT").
    proxies: tuple[linkemu.Port, ...] = ()
    relayed: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_plan(cls, links: dict, host: str, mac_of, link_of=None, udp_fd: int | None = None) -> "ShareLinks":
        """``mac_of``: index -> MAC (the emulated cluster's); ``link_of``: a device's name ->
        its link type (needed where this host owns a split medium); ``udp_fd``: the
        forwarder's socket, bound on the host's network already (an ordinary user's)."""
        port = int(links["port"])
        names = {}
        for position, (other, entry) in enumerate(links["hosts"].items()):
            for name, index in entry["indices"].items():
                names[index] = head_name(position) if name == "head" else name
        split = links.get("split") or {}
        owner_of = {name: medium["owner"] for medium in split.values() for name in medium["devices"]}
        members = [(other, name, index) for other, entry in links["hosts"].items()
                   for name, index in entry["indices"].items()]

        def home(other: str, name: str) -> str:  # the host whose forwarder runs its links
            return owner_of.get(name, other) if name != "head" else other

        address = {other: f"{entry['address']}:{port}" for other, entry in links["hosts"].items()}
        others = tuple(linkemu.Peer(entry["address"], port,
                                    tuple(mac_of(i) for h, n, i in members if home(h, n) == other))
                       for other, entry in links["hosts"].items() if other != host)
        proxies = tuple(linkemu.Port("", "", link_of(name), mac=mac_of(index), proxy=address[other], id=index)
                        for other, name, index in members if other != host and home(other, name) == host)
        relayed = {name: address[home(host, name)] for h, name, _ in members
                   if h == host and home(host, name) != host}
        lookahead = min((m["lookahead_ns"] for m in split.values() if m["owner"] == host), default=0)
        return cls(host, dict(links["hosts"][host]["indices"]), names,
                   linkemu.Peers(port, links["key"], others, lookahead, udp_fd), proxies, relayed)

    def describe(self) -> dict:
        return {"udp_port": self.peers.port, "peers": [f"{p.address}:{p.port}" for p in self.peers.others],
                "proxies": [p.id for p in self.proxies], "relayed": sorted(self.relayed),
                "lookahead_s": self.peers.lookahead_ns / 1e9}


# -- the underlay, as the forwarders measured it -----------------------------------------
# A window is quiet when its median round trip is within twice its fastest plus this.
QUIET_SLACK_S = 100e-6


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

    @property
    def quiet(self) -> bool:
        """Whether the window's typical round trip is near its fastest: probes neither host
        was too busy to answer at once (a forwarder without real-time priority, an ordinary
        user's, waits behind whatever else runs, such as another share being built)."""
        return self.rtt_median_s <= 2 * self.rtt_min_s + QUIET_SLACK_S

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


def check_split(split: dict[str, dict], delays: dict[tuple[str, str], float], d: float) -> None:
    """Refuse a split medium whose lookahead (half its downstream delay, in host time) is below
    the underlay's one-way delay between its owner and another of its hosts: frames relayed to
    the owner would miss their turns, and its answers their delivery times."""
    for name, medium in split.items():
        owner = medium["owner"]
        lookahead = medium["lookahead_ns"] / 1e9
        for other in medium["hosts"]:
            seen = [delays[k] for k in ((owner, other), (other, owner)) if k in delays]
            one_way = max(seen, default=None)
            if other == owner or one_way is None or lookahead >= one_way:
                continue
            fits = math.ceil(one_way / (lookahead / d) - 1e-9) if lookahead > 0 else math.inf
            raise ShoalError(
                f"the shared medium {name} is split over hosts and kept one channel on {owner}: a frame "
                f"of a device on {other} has half the medium's downstream delay ({_us(lookahead / d)} of "
                f"device time, {_us(lookahead)} at D = {d:g}) to reach {owner} and as long to come back, "
                f"below the underlay's one-way delay ({_us(one_way)}); D = {fits:g} fits "
                f"(--dilation {fits:g}), or keep the medium's devices on one host")


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
    # A split medium's devices, by their index: frames relayed to the owner (counted there)
    # and back to the device's host (counted there), late when past their turn or delivery.
    relayed = {}
    for port in stats.get("ports", []):
        way = port.get("proxy") or port.get("relay")
        if way:
            relayed[str(way["id"])] = {"frames": way["frames_in"], "late": way["late"], "lost": way["lost"],
                                       "late_max_s": way["late_max_ns"] / 1e9}
    return {"devices": devices, "peers": peers, "foreign_datagrams": stats.get("foreign_datagrams", 0),
            "relayed": relayed, "split_late": stats.get("split_late", 0)}


def by_device(reports: dict[str, dict | None], links: dict, mac_of) -> dict[str, dict]:
    """Every host's counts (``counted``) as one table: per sending member (its name, its
    host), frames, late and lost summed over the hosts that received them."""
    names = {mac_of(i): (head_name(position) if name == "head" else name, host)
             for position, (host, entry) in enumerate(links["hosts"].items())
             for name, i in entry["indices"].items()}
    by_index = {str(i): names[mac_of(i)] for entry in links["hosts"].values() for i in entry["indices"].values()}
    table: dict[str, dict] = {}

    def add(name: str, host: str, c: dict) -> None:
        row = table.setdefault(name, {"host": host, "frames": 0, "late": 0, "lost": 0, "late_max_s": 0.0})
        row["frames"] += c["frames"]
        row["late"] += c["late"]
        row["lost"] += c["lost"]
        row["late_max_s"] = max(row["late_max_s"], c["late_max_s"])

    for where, counts in reports.items():
        counts = counts or {}
        for mac, c in (counts.get("devices") or {}).items():
            add(*names.get(mac, (mac, "?")), c)
        for index, c in (counts.get("relayed") or {}).items():
            add(*by_index.get(index, (index, "?")), c)
        if counts.get("split_late"):  # frames that reached a split medium's switch after their turn
            add(f"split medium on {where}", where, {"frames": 0, "late": counts["split_late"], "lost": 0,
                                                    "late_max_s": 0.0})
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
