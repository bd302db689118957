"""What every power source is: channels, readings, and how it fails.

A *source* is one kind of sensor or model (RAPL, hwmon, a battery, an HTTP
meter, a meter log, the utilisation model). It exposes *channels*, each one
quantity with a domain and a label saying whether it is measured or
modelled. A channel is either

* ``energy``: a cumulative counter (raw units x ``scale`` = joules) that may
  wrap at ``modulus`` raw units; energy of an interval is a counter delta;
* ``power``: an instantaneous reading (raw units x ``scale`` = watts);
  energy of an interval is the trapezoid between two readings.

``read()`` returns one float per channel in raw units, NaN where the read
failed; failures are remembered (the first distinct messages and a count) so they can be
reported instead of silently becoming zeros.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from shoal.power.sysfs import SensorError

MEASURED = "measured"
MODELLED = "modelled"
ENERGY = "energy"
POWER = "power"
NAN = math.nan
MAX_FAULT_MESSAGES = 3


class SourceUnavailable(Exception):
    """A source kind cannot be used here; str() says why and what to do."""


@dataclass(frozen=True)
class Channel:
    """One quantity a source delivers.

    ``part_of`` names the channel (same source) whose energy already
    includes this one (a RAPL core zone is part of its package), so sums
    over channels can skip it. ``max_power_W`` bounds the power the channel
    can see; with ``modulus`` it tells how long a counter takes to wrap.
    """

    source: str
    name: str
    domain: str
    kind: str
    quantity: str
    scale: float
    modulus: float | None = None
    max_power_W: float | None = None
    part_of: str = ""
    node: str = ""

    @property
    def key(self) -> str:
        return f"{self.node}:{self.source}/{self.name}" if self.node else f"{self.source}/{self.name}"

    def wrap_time_s(self) -> float | None:
        """Shortest time in which the counter can wrap (at max power)."""
        if self.quantity != ENERGY or not self.modulus or not self.max_power_W:
            return None
        return self.modulus * self.scale / self.max_power_W


@dataclass
class Source:
    """Base class: subclasses fill ``channels`` and implement ``read``."""

    label: str
    channels: list[Channel] = field(default_factory=list)
    #: Fastest period worth polling (the sensor's own conversion/update time).
    min_period_s: float = 0.0
    #: Default period when the user gives no rate.
    default_period_s: float = 0.1
    #: True for sources that may block (network, files): polled on their own thread.
    blocking: bool = False
    #: Remarks for the user (fallbacks, caveats), shown by `shoal power`.
    notes: list[str] = field(default_factory=list)
    #: Per channel: up to MAX_FAULT_MESSAGES distinct messages of failed reads, in order.
    faults: dict[str, list[str]] = field(default_factory=dict)
    fault_counts: dict[str, int] = field(default_factory=dict)

    def read(self) -> list[float]:
        raise NotImplementedError

    def poll(self) -> list[tuple[float, list[float]]]:
        """Readings since the last poll as (monotonic time, raw values).

        Sensors give one reading stamped now; a meter log may give many,
        each with its own timestamp.
        """
        t = time.monotonic()
        return [(t, self.read())]

    def known_idle_W(self) -> dict[str, float]:
        """Idle power per channel key that the source knows without measuring (a model's)."""
        return {}

    def fast_fds(self) -> list[int] | None:
        """Descriptors to pread, one integer per channel, when that is all ``read`` does.

        The sampler reads these inline at high rates (fewer Python calls per
        tick); on any error it falls back to ``poll`` to record the fault.
        """
        return None

    def fault(self, channel: str, exc: BaseException | str) -> None:
        """Remember a failed read of one channel (distinct messages, count)."""
        messages = self.faults.setdefault(channel, [])
        text = str(exc)
        if len(messages) < MAX_FAULT_MESSAGES and text not in messages:
            messages.append(text)
        self.fault_counts[channel] = self.fault_counts.get(channel, 0) + 1

    def close(self) -> None:
        pass


def read_or_nan(source: Source, channel: str, reader) -> float:
    """Call ``reader()``; on SensorError record the fault and return NaN."""
    try:
        return float(reader())
    except SensorError as exc:
        source.fault(channel, exc)
        return NAN
