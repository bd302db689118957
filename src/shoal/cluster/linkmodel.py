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
        return min(self.uplink.rate_bps, self.downlink.rate_bps)

    @property
    def loss(self) -> float:
        """Chance a frame is lost on the way (each direction of each link draws once)."""
        return 1 - (1 - self.uplink.loss) * (1 - self.downlink.loss)

    def serialization_s(self, payload_B: int) -> float:
        """Line time of a message, store-and-forward at the switch included."""
        wire = wire_bytes(payload_B)
        up, down = self.uplink.rate_bps, self.downlink.rate_bps
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
