"""The emulated link frame by frame, with TCP's window on every connection.

``linkmodel.Medium`` gives each message one time on the link: it is right while a
message can go at the link's (or the device's) rate from its first byte. TCP does not
always let it: a connection that has sent nothing for longer than its retransmission
timeout starts again from a window of 10 segments (Linux's
``net.ipv4.tcp_slow_start_after_idle``, RFC 5681 §4.1), and the window then opens by
the segments each acknowledgement covers. On a port of its own an acknowledgement is
back long before ten segments are out, and nothing changes; on a shared upstream it
queues behind the other boxes' data, and a sender whose window is full waits for it.

This module runs the ranks' messages as the forwarder (``shoal-linkemu``) carries
frames, with each connection's sender and receiver as Linux's TCP keeps them:

- A device's upstream: a frame that finds the device idle waits for its grant (1 to
  2 MAP intervals, drawn); a capped device paces its frames at its own rate and each
  then takes the shared channel for its time at the channel's rate, in the order the
  frames of all devices are ready. Not shared: the device's own port at its rate.
- The downstream: one channel the head-end sends every frame on, in the order they
  reach it (a port per device when not shared).
- A sender sends while its segments in flight are fewer than its window; the window
  starts at 10 (or what the caller says the start-up left), grows by each acknowledged
  segment while the window limits the sender or is under twice the segments last in
  flight (Linux's tcp_is_cwnd_limited in slow start; no loss here, so it never leaves
  slow start), and restarts after idle: halved for each retransmission timeout gone by,
  never below 10 (tcp_cwnd_restart). The timeout is Linux's: the smoothed RTT plus a
  deviation of at least 200 ms.
- A receiver acknowledges every second segment at once and a lone one after 40 ms
  (its delayed-ACK timer), in both cases before its rank reads the message (the kernel
  answers in its receive path, ahead of what the rank then sends); a data segment going
  the other way carries the acknowledgement. An acknowledgement alone is a 66-byte
  frame on its own upstream.

Segments carry at most the MSS; MPI's own headers are left out, as in ``linkmodel``,
and so are losses and retransmissions.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import random

from shoal.cluster.linkmodel import MSS_B, frame_line_bytes, path
from shoal.profiles import LinkType

INITIAL_WINDOW = 10        # segments (Linux's TCP_INIT_CWND, RFC 6928)
RTO_MIN_S = 0.2            # Linux's TCP_RTO_MIN: the timeout is the smoothed RTT plus at least this
RTO_INITIAL_S = 1.0        # before any round trip was measured (RFC 6298)
DELAYED_ACK_S = 0.04       # Linux's TCP_DELACK_MIN: a lone segment's acknowledgement waits this
ACK_LINE_B = frame_line_bytes(0)  # an acknowledgement: headers only (90 line bytes)


class Plant:
    """The link's transmitters and an event queue; ``frame`` carries one frame."""

    def __init__(self, link: LinkType, devices: int, seed: int = 1) -> None:
        self.link = link
        self.draw = random.Random(seed)
        self.grant_s = link.grant_interval_s if link.shared else 0.0
        # The forwarder's delay per direction: the latency less the grant wait, half each way.
        self.delay_s = max(0.0, path(link).latency_s - (link.grant_wait_s if link.shared else 0.0)) / 2
        self.capped = link.shared and link.capped
        self.device_free = [0.0] * devices      # each device's own transmitter
        self.port_free = [0.0] * devices        # each device's downlink (not shared)
        self.up_free = self.down_free = 0.0     # the shared channels
        self._events: list = []
        self._order = itertools.count()

    def at(self, t: float, action, *args) -> None:
        heapq.heappush(self._events, (t, next(self._order), action, args))

    def run(self) -> None:
        while self._events:
            t, _, action, args = heapq.heappop(self._events)
            action(t, *args)

    def frame(self, t: float, src: int, dst: int, line_B: int, delivered, *args) -> None:
        """Hand a frame from ``src``'s stack to its link at ``t``; ``delivered(t, *args)``
        runs when it has reached ``dst``."""
        link = self.link
        bits = 8 * line_B
        start = self.device_free[src]
        if start <= t:  # idle: on a shared upstream, the request and the next MAP's grant
            start = t + (self.grant_s * (1 + self.draw.random()) if self.grant_s else 0.0)
        if self.capped:  # paced at the device's cap, then its turn on the channel
            done = start + bits / link.upstream_bps
            self.device_free[src] = done
            self.at(done - bits / link.up_channel_bps, self._on_channel, bits, dst, delivered, args)
            return
        if link.shared:
            start = max(start, self.up_free)
            self.up_free = start + bits / link.up_channel_bps
        self.device_free[src] = end = start + bits / link.upstream_bps
        self.at(end + self.delay_s, self._downstream, bits, dst, delivered, args)

    def _on_channel(self, t: float, bits: float, dst: int, delivered, args) -> None:
        self.up_free = max(self.up_free, t) + bits / self.link.up_channel_bps
        self.at(self.up_free + self.delay_s, self._downstream, bits, dst, delivered, args)

    def _downstream(self, t: float, bits: float, dst: int, delivered, args) -> None:
        if self.link.shared:
            self.down_free = end = max(self.down_free, t) + bits / self.link.rate_bps
        else:
            self.port_free[dst] = end = max(self.port_free[dst], t) + bits / self.link.rate_bps
        self.at(end + self.delay_s, delivered, *args)


class Connection:
    """One direction of a TCP connection: the sender's window and the receiver's
    acknowledgements. ``arrived(t, message)`` runs when a message's last byte is in."""

    def __init__(self, plant: Plant, src: int, dst: int, arrived, restart_after_idle: bool = True,
                 window: int = INITIAL_WINDOW) -> None:
        self.plant, self.src, self.dst, self.arrived = plant, src, dst, arrived
        self.restart_after_idle = restart_after_idle
        self.window = window
        self.queued: collections.deque = collections.deque()  # (payload_B, message or None)
        self.sent_at: collections.deque = collections.deque()  # send time of each segment in flight
        self.window_limited = False  # Linux's is_cwnd_limited, max_packets_out, cwnd_usage_seq
        self.most_in_flight = 0
        self.usage_mark = 0
        self.sent = 0              # segments sent
        self.last_send: float | None = None  # none yet: a fresh connection has not been idle
        self.srtt: float | None = None
        self.mdev = self.mdev_max = self.rttvar = 0.0
        self.rtt_mark = 0          # Linux's rtt_seq: rttvar decays once per window of data
        self.rto = RTO_INITIAL_S
        self.received = 0          # segments in at the receiver
        self.acked_by_receiver = 0
        self.delack_armed = False
        self.acked = 0             # segments the sender knows are in
        self.reverse: Connection | None = None  # the same TCP connection's other direction

    def send(self, t: float, size_B: int, message) -> None:
        """The application hands over a message of ``size_B`` bytes at ``t``."""
        if (self.restart_after_idle and not self.sent_at and self.last_send is not None
                and t - self.last_send > self.rto):
            self._restart(t - self.last_send)
        full, rest = divmod(size_B, MSS_B)
        pieces = [MSS_B] * full + ([rest] if rest or not full else [])
        for payload in pieces[:-1]:
            self.queued.append((payload, None))
        self.queued.append((pieces[-1], message))
        self._push(t)

    def _restart(self, idle_s: float) -> None:
        """Linux's tcp_cwnd_restart: halve per timeout gone by, not below the initial window."""
        floor = min(INITIAL_WINDOW, self.window)
        window = self.window
        idle_s -= self.rto
        while idle_s > 0 and window > floor:
            window >>= 1
            idle_s -= self.rto
        self.window = max(window, floor)

    def _push(self, t: float) -> None:
        while self.queued and len(self.sent_at) < self.window:
            payload, message = self.queued.popleft()
            self.sent_at.append(t)
            self.sent += 1
            self.last_send = t
            # A data segment carries the acknowledgement of what came the other way.
            ack = self.reverse._piggyback() if self.reverse is not None else None
            self.plant.frame(t, self.src, self.dst, frame_line_bytes(payload), self._segment_in, message, ack)
        # Linux's tcp_cwnd_validate: what the window was used for over the last window's data.
        limited = bool(self.queued)
        if self.acked >= self.usage_mark or limited or len(self.sent_at) > self.most_in_flight:
            self.window_limited = limited
            self.most_in_flight = len(self.sent_at)
            self.usage_mark = self.sent

    # the receiver's side
    def _segment_in(self, t: float, message, ack: int | None) -> None:
        if ack is not None:
            self.reverse._ack_in(t, ack)
        self.received += 1
        # The kernel acknowledges before the application reads: the ACK goes out ahead of
        # what the rank sends once its message is in.
        if self.received - self.acked_by_receiver >= 2:
            self._acknowledge(t)
        elif not self.delack_armed:
            self.delack_armed = True
            self.plant.at(t + DELAYED_ACK_S, self._delayed_ack)
        if message is not None:
            self.arrived(t, message)

    def _piggyback(self) -> int | None:
        """What a segment going the other way acknowledges of this direction (None: nothing new)."""
        if self.received == self.acked_by_receiver:
            return None
        self.acked_by_receiver = self.received
        return self.received

    def _delayed_ack(self, t: float) -> None:
        self.delack_armed = False
        if self.received > self.acked_by_receiver:
            self._acknowledge(t)

    def _acknowledge(self, t: float) -> None:
        self.acked_by_receiver = self.received
        self.plant.frame(t, self.dst, self.src, ACK_LINE_B, self._ack_in, self.received)

    # the sender's side
    def _measured(self, rtt: float) -> None:
        """Linux's tcp_rtt_estimator and tcp_set_rto: smoothed RTT plus a deviation that
        follows the largest within each window and is never below 200 ms."""
        if self.srtt is None:
            self.srtt, self.mdev = rtt, 2 * rtt
            self.rttvar = self.mdev_max = max(self.mdev, RTO_MIN_S)
            self.rtt_mark = self.sent
        else:
            error = rtt - self.srtt
            self.srtt += error / 8
            if error < 0:
                step = -error - self.mdev / 4
                self.mdev += step / 8 if step > 0 else step
            else:
                self.mdev += error - self.mdev / 4
            if self.mdev > self.mdev_max:
                self.mdev_max = self.mdev
                self.rttvar = max(self.rttvar, self.mdev_max)
            if self.acked > self.rtt_mark:
                if self.mdev_max < self.rttvar:
                    self.rttvar -= (self.rttvar - self.mdev_max) / 4
                self.rtt_mark = self.sent
                self.mdev_max = RTO_MIN_S
        self.rto = self.srtt + self.rttvar

    def _ack_in(self, t: float, cumulative: int) -> None:
        newly = cumulative - self.acked
        if newly <= 0:
            return
        self.acked = cumulative
        rtt = t - self.sent_at[0]  # from the oldest segment it covers (Linux's seq_rtt)
        for _ in range(newly):
            self.sent_at.popleft()
        self._measured(rtt)
        # Slow start, while the window limits the sender or is under twice its use (Linux's
        # tcp_is_cwnd_limited): one segment more for each acknowledged.
        if self.window_limited or self.window < 2 * self.most_in_flight:
            self.window += newly
        self._push(t)


def run_ranks(link: LinkType, programs: list, seed: int = 1, restart_after_idle: bool = True,
              window: int = INITIAL_WINDOW) -> list[list[float]]:
    """Run one generator per rank that yields ("send", dst, bytes), ("recv", src) or
    ("mark",), each rank on its own device on ``link``; sends are eager (the sender goes
    on at once), a receive waits for the message's last byte. Each pair of ranks shares
    one connection, made at its first message with ``window`` segments to send (as
    ``linkmodel.run_ranks``, but frame by frame). Returns every rank's times at its
    marks, in order."""
    ranks = len(programs)
    plant = Plant(link, ranks, seed)
    now = [0.0] * ranks
    marks: list[list[float]] = [[] for _ in range(ranks)]
    inbox: dict = collections.defaultdict(collections.deque)  # (src, dst) -> arrival times
    waiting: dict = {}  # rank -> the source it waits for
    step = [next(p, None) for p in programs]
    connections: dict = {}

    def arrived(t: float, pair) -> None:
        src, dst = pair
        inbox[pair].append(t)
        if waiting.get(dst) == src:
            del waiting[dst]
            go(t, dst)

    def go(t: float, r: int) -> None:
        now[r] = max(now[r], t)
        op = step[r]
        while op is not None:
            if op[0] == "send":
                pair = (r, op[1])
                if pair not in connections:
                    there = Connection(plant, r, op[1], arrived, restart_after_idle, window)
                    back = Connection(plant, op[1], r, arrived, restart_after_idle, window)
                    there.reverse, back.reverse = back, there
                    connections[pair], connections[(op[1], r)] = there, back
                connections[pair].send(now[r], op[2], pair)
            elif op[0] == "recv":
                queue = inbox[(op[1], r)]
                if not queue:
                    waiting[r] = op[1]
                    step[r] = op
                    return
                now[r] = max(now[r], queue.popleft())
            else:
                marks[r].append(now[r])
            op = step[r] = next(programs[r], None)

    for r in range(ranks):
        plant.at(0.0, go, r)
    plant.run()
    return marks
