"""What an emulated link should do: the time a message takes, with Ethernet/IP/TCP framing.

A link type (``profiles.LinkType``) is a rate per direction, a one-way
latency, jitter and a loss fraction. In a star, the latency of a link type is
the one-way time of a small message between two devices on such links through
the switch; each device's link carries half of it. A message of ``s`` bytes
between devices a and b on an idle network takes

    t(s) = (L_a + L_b)/2 + wire(s)/R_slow + edge/R_fast

where wire(s) counts every frame on the line, R_slow is the slower and R_fast
the faster of the two rates, and edge is the frame the switch must hold whole
before passing it on (store-and-forward: the last frame when the slower link
comes first, the first frame otherwise).

Framing, with a 1500-byte MTU and Linux's default TCP timestamps: 20 B IP +
32 B TCP headers leave 1448 B of payload per frame; 14 B Ethernet header,
4 B FCS, 8 B preamble/SFD and 12 B inter-frame gap make it 1538 line bytes,
so 90 B of overhead per frame (94.1 % efficiency); a frame is never shorter
than 84 line bytes (60 B + FCS + preamble + gap).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from shoal.profiles import LinkType

MTU_B = 1500
IP_HEADER_B = 20
TCP_HEADER_B = 32          # 20 B + 12 B timestamp option (Linux default)
ETHERNET_HEADER_B = 14
FCS_B = 4
PREAMBLE_B = 8
GAP_B = 12
LINE_OVERHEAD_B = FCS_B + PREAMBLE_B + GAP_B            # what the forwarder adds to a frame
MSS_B = MTU_B - IP_HEADER_B - TCP_HEADER_B              # 1448
FRAME_OVERHEAD_B = ETHERNET_HEADER_B + IP_HEADER_B + TCP_HEADER_B + LINE_OVERHEAD_B  # 90
MIN_LINE_FRAME_B = 60 + LINE_OVERHEAD_B                 # 84


def frames(payload_B: int) -> int:
    """TCP segments (Ethernet frames) a payload of this many bytes needs (at least one)."""
    return max(1, math.ceil(payload_B / MSS_B))


def frame_line_bytes(payload_B: int) -> int:
    """Line bytes of one frame carrying ``payload_B`` bytes of TCP payload."""
    return max(MIN_LINE_FRAME_B, payload_B + FRAME_OVERHEAD_B)


def wire_bytes(payload_B: int) -> int:
    """Line bytes of all frames carrying ``payload_B`` bytes of TCP payload."""
    full, rest = divmod(payload_B, MSS_B)
    total = full * frame_line_bytes(MSS_B)
    if rest or not full:
        total += frame_line_bytes(rest)
    return total


def goodput_fraction() -> float:
    """TCP payload per line byte of full frames (0.941 at MTU 1500)."""
    return MSS_B / frame_line_bytes(MSS_B)


@dataclass(frozen=True)
class Path:
    """The way from device a to device b through the switch."""

    uplink: LinkType
    downlink: LinkType

    @property
    def latency_s(self) -> float:
        return (self.uplink.latency_s + self.downlink.latency_s) / 2

    @property
    def rate_bps(self) -> float:
        return min(self.uplink.upstream_bps, self.downlink.rate_bps)

    @property
    def loss(self) -> float:
        """Chance a frame is lost on the way (each direction of each link draws once)."""
        return 1 - (1 - self.uplink.loss) * (1 - self.downlink.loss)

    def serialization_s(self, payload_B: int) -> float:
        """Line time of a message, store-and-forward at the switch included."""
        wire = wire_bytes(payload_B)
        up, down = self.uplink.upstream_bps, self.downlink.rate_bps
        full = frame_line_bytes(min(payload_B, MSS_B))
        last = frame_line_bytes(payload_B - (frames(payload_B) - 1) * MSS_B)
        if up <= down:
            return 8 * wire / up + 8 * last / down
        return 8 * full / up + 8 * wire / down

    def one_way_s(self, payload_B: int, rendezvous_above_B: int | None = None) -> float:
        """Expected time of one message of ``payload_B`` bytes on an idle path; an MPI that
        asks the receiver before sending more than ``rendezvous_above_B`` bytes adds one
        round trip (its request and the receiver's answer, small frames each way)."""
        handshake = 0.0
        if rendezvous_above_B is not None and payload_B > rendezvous_above_B:
            handshake = 2 * (self.latency_s + self.serialization_s(0))
        return self.latency_s + self.serialization_s(payload_B) + handshake

    def stream_Bps(self) -> float:
        """Payload bytes per second a long TCP stream can carry."""
        return self.rate_bps / 8 * goodput_fraction()


def path(a: LinkType, b: LinkType | None = None) -> Path:
    return Path(a, b if b is not None else a)



class Medium:
    """Message times between devices that all sit on one link type, in the order they are sent.

    A port per device: a device sends its messages one after another at the link's rate.
    A shared medium (``link.shared``): every device's messages also take turns on the one
    upstream channel, and a device with nothing queued first waits for its grant
    (``link.grant_wait_s``, inside the latency). A device capped below the channel
    (``link.device_rate_bps``) sends at most at its cap, in what the channel has left
    beside the messages already on it (``Channel``), so several capped devices send side
    by side until together they fill the channel. The downstream carries the same frames
    at the channel's rate right behind, so it adds the last frame's time only. Call
    ``send`` in the order of send times (``run_ranks`` does). Each message goes at its
    rate from its first byte: where TCP's window holds a sender back (a window restarted
    after idle, on a busy upstream), ``tcpmodel`` runs the same ranks frame by frame.
    """

    def __init__(self, link: LinkType, devices: int, seed: int | None = None) -> None:
        import random

        self.link = link
        self.grant_s = link.grant_wait_s if link.shared else 0.0
        # None: every grant wait is the mean; else each is drawn, 1 to 2 MAP intervals.
        self.draw = random.Random(seed) if seed is not None and self.grant_s else None
        self.rest_s = path(link).latency_s - self.grant_s  # the delay beyond the grant wait
        self.channel_free = 0.0
        self.channel = Channel(link.up_channel_bps) if link.capped else None
        self.device_free = [0.0] * devices

    def send(self, src: int, t: float, payload_B: int) -> float:
        """When a message that ``src`` hands over at ``t`` has arrived."""
        wire = 8 * wire_bytes(payload_B)
        edge_s = 8 * frame_line_bytes(payload_B - (frames(payload_B) - 1) * MSS_B) / self.link.rate_bps
        busy = self.device_free[src]
        grant = self.grant_s
        if self.draw is not None:
            grant = self.link.grant_interval_s * (1 + self.draw.random())
        start = t + grant if busy <= t else busy
        if self.channel is not None:
            end = self.channel.carry(start, wire, self.link.upstream_bps, prune_before=t)
        elif self.link.shared:
            end = self.channel_free = max(start, self.channel_free) + wire / self.link.up_channel_bps
        else:
            end = start + wire / self.link.rate_bps
        self.device_free[src] = end
        return end + self.rest_s + edge_s


class Channel:
    """The rate in use on one shared channel over time (piecewise constant), so that a
    message sent at a capped rate takes what the messages already on it leave."""

    def __init__(self, capacity_bps: float) -> None:
        self.capacity_bps = capacity_bps
        self.times = [0.0]  # the rate used[i] holds from times[i] to times[i + 1] (the last: on)
        self.used = [0.0]

    def _split(self, t: float) -> int:
        """The index of the piece that starts at ``t`` (made if needed)."""
        if t < self.times[0]:
            self.times.insert(0, t)
            self.used.insert(0, 0.0)
            return 0
        i = bisect_right(self.times, t) - 1
        if self.times[i] == t:
            return i
        self.times.insert(i + 1, t)
        self.used.insert(i + 1, self.used[i])
        return i + 1

    def carry(self, start: float, bits: float, rate_bps: float, prune_before: float = 0.0) -> float:
        """Carry ``bits`` from ``start`` at up to ``rate_bps`` in what is left; when the last is."""
        i = self._split(start)
        t, left = start, bits
        while True:
            free = min(rate_bps, self.capacity_bps - self.used[i])
            until = self.times[i + 1] if i + 1 < len(self.times) else math.inf
            if free > 1e-9 * self.capacity_bps:
                if free * (until - t) >= left:
                    end = t + left / free
                    if end < until:
                        self._split(end)
                    self.used[i] += free
                    break
                self.used[i] += free
                left -= free * (until - t)
            t, i = until, i + 1
        # Pieces wholly before the sends still to come are never read again.
        keep = max(0, bisect_left(self.times, prune_before) - 1)
        del self.times[:keep], self.used[:keep]
        return end



def _binomial_children(rank: int, ranks: int) -> list[int]:
    """A rank's children in a binomial tree rooted at 0, largest subtree first."""
    top = 1
    while top < ranks:
        top <<= 1
    mask = (rank & -rank if rank else top) >> 1
    children = []
    while mask:
        if rank + mask < ranks:
            children.append(rank + mask)
        mask >>= 1
    return children


def _barrier(rank: int, ranks: int):
    """Dissemination barrier: round k sends to rank + 2^k and waits for rank - 2^k."""
    k = 1
    while k < ranks:
        yield ("send", (rank + k) % ranks, 0)
        yield ("recv", (rank - k) % ranks)
        k <<= 1


def _bcast(rank: int, ranks: int, size_B: int):
    """Binomial broadcast from rank 0 (eager sends, largest subtree first)."""
    if rank:
        yield ("recv", rank - (rank & -rank))
    for child in _binomial_children(rank, ranks):
        yield ("send", child, size_B)


def _reduce(rank: int, ranks: int, size_B: int):
    """Binomial reduction to rank 0."""
    mask = 1
    while mask < ranks:
        if rank & mask:
            yield ("send", rank & ~mask, size_B)
            return
        if rank | mask < ranks:
            yield ("recv", rank | mask)
        mask <<= 1


def run_ranks(medium: "Medium", programs: list) -> list[float]:
    """Run one generator per rank that yields ("send", dst, bytes), ("recv", src) or ("mark",)
    over ``medium``; sends are eager (the sender goes on at once), a receive waits for the
    message. Returns every rank's times at its marks, in order, per rank."""
    import collections
    import heapq

    ranks = len(programs)
    now = [0.0] * ranks
    marks: list[list[float]] = [[] for _ in range(ranks)]
    boxes: dict = collections.defaultdict(collections.deque)  # (src, dst) -> arrival times
    waiting: dict = {}  # rank -> the source it waits for
    ready = [(0.0, r) for r in range(ranks)]
    step = [next(p, None) for p in programs]
    while ready:
        t, r = heapq.heappop(ready)
        op = step[r]
        while op is not None:
            if op[0] == "send":
                boxes[(r, op[1])].append(medium.send(r, now[r], op[2]))
                if waiting.get(op[1]) == r:
                    del waiting[op[1]]
                    heapq.heappush(ready, (now[op[1]], op[1]))
            elif op[0] == "recv":
                queue = boxes[(op[1], r)]
                if not queue:
                    waiting[r] = op[1]
                    break
                now[r] = max(now[r], queue.popleft())
            else:
                marks[r].append(now[r])
            op = step[r] = next(programs[r], None)
            if op is not None and op[0] == "send" and ready and ready[0][0] < now[r]:
                heapq.heappush(ready, (now[r], r))  # sends go in the order of their times
                break
    return marks


def bench_bcast_s(link: LinkType, ranks: int, size_B: int, reps: int = 41, seed: int = 1,
                  tcp: bool = False, restart_after_idle: bool = True, window: int | None = None) -> float:
    """What ``shoal bench`` reads for one Bcast per repetition (``--rep-time`` below one call)
    with each rank on its own device on ``link``: per repetition a barrier, the timed
    broadcast of ``size_B`` bytes from rank 0 (each rank from its own exit from the
    barrier), the slowest time reduced to rank 0, and rank 0's go-on decision broadcast.

    Ranks leave a barrier at different times, and that loop makes the difference
    systematic: the root leaves one message time after the others, who then wait for the
    broadcast that much longer. On a shared medium each grant wait is drawn (1 to 2 MAP
    intervals, ``seed``), and the slowest rank of a repetition is slower than the mean
    wait says: the median over ``reps`` repetitions (the first left out) is returned, as
    the benchmark reports it. The trees are the default MPI's for small messages
    (a binomial broadcast, a dissemination barrier).

    ``tcp``: the ranks' messages go frame by frame with each connection's TCP window
    (``tcpmodel``; ``restart_after_idle`` as the kernel's tcp_slow_start_after_idle;
    ``window``: the segments each connection may send at first, 10 unless given),
    instead of each at once at the link's rate (``Medium``).
    """
    return bench_bcast_run_s(link, ranks, [size_B], reps, seed, tcp, restart_after_idle, window)[size_B]


def bench_bcast_run_s(link: LinkType, ranks: int, sizes_B: list[int], reps: int = 41, seed: int = 1,
                      tcp: bool = False, restart_after_idle: bool = True,
                      window: int | None = None) -> dict[int, float]:
    """``bench_bcast_s`` for each size of one ``shoal bench`` run, in its order on the same
    ranks: with ``tcp``, each point starts with the windows the one before left."""
    import statistics

    if ranks < 2:
        return {size: 0.0 for size in sizes_B}

    def program(rank: int):
        for size_B in sizes_B:
            for _ in range(reps):
                yield from _barrier(rank, ranks)
                yield ("mark",)
                yield from _bcast(rank, ranks, size_B)
                yield ("mark",)
                yield from _reduce(rank, ranks, 8)
                yield from _bcast(rank, ranks, 16)

    programs = [program(r) for r in range(ranks)]
    if tcp:
        from shoal.cluster import tcpmodel

        marks = tcpmodel.run_ranks(link, programs, seed, restart_after_idle,
                                   window or tcpmodel.INITIAL_WINDOW)
    else:
        marks = run_ranks(Medium(link, ranks, seed), programs)
    medians = {}
    for k, size_B in enumerate(sizes_B):
        first = 2 * k * reps
        per_rep = [max(m[first + 2 * i + 1] - m[first + 2 * i] for m in marks) for i in range(1, reps)]
        medians[size_B] = statistics.median(per_rep)
    return medians
