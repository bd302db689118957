"""A network power meter answering HTTP with JSON (or a bare number), in watts.

Spec: ``http:URL[#PATH]`` where PATH finds the watts in the JSON body:
a JSON pointer (``/data/power_W``, RFC 6901) or a dotted path
(``data.power_W``, ``meters.0.power``; integers index lists). Without PATH
the body must be a number. Examples: a Shelly plug
``http:http://plug/rpc/Switch.GetStatus?id=0#apower``; a Tasmota plug
``http:http://plug/cm?cmnd=Status%208#StatusSNS.ENERGY.Power``.

Each poll is stamped with the midpoint of request and response (the best
estimate of when the meter sampled). A poll that times out, is refused or
returns something unreadable is a NaN reading: the sampler records a gap
and flags energy over it as partial; polling continues, so a meter that
comes back is used again.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from shoal.power.base import MEASURED, NAN, POWER, Channel, Source, SourceUnavailable
from shoal.power.sysfs import SensorError

DEFAULT_PERIOD_S = 0.18  # what a REST micro-server frontend sustains (RECS: ~180 ms)


class MeterError(SensorError):
    """The meter answered nothing usable."""


def parse_path(path: str) -> list[str]:
    """Split a JSON pointer or dotted path into keys."""
    if not path:
        return []
    if path.startswith("/"):
        return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]
    return path.split(".")


def extract_watts(body: bytes, keys: list[str]) -> float:
    """The number at ``keys`` in a JSON body (or the body itself)."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise MeterError(0, f"not JSON: {body[:40]!r}") from None
    for key in keys:
        if isinstance(value, list):
            try:
                value = value[int(key)]
            except (ValueError, IndexError):
                raise MeterError(0, f"no element {key!r} in a list of {len(value)}") from None
        elif isinstance(value, dict):
            if key not in value:
                raise MeterError(0, f"no key {key!r} (keys: {', '.join(list(value)[:8])})")
            value = value[key]
        else:
            raise MeterError(0, f"cannot take {key!r} of {type(value).__name__}")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise MeterError(0, f"value is not a number: {str(value)[:40]!r}")
    try:
        watts = float(value)
    except ValueError:
        raise MeterError(0, f"value is not a number: {value[:40]!r}") from None
    if not math.isfinite(watts):
        raise MeterError(0, f"value is not finite: {value!r}")
    return watts


class HttpMeterSource(Source):
    """One HTTP meter: one power channel (domain ``wall`` unless told)."""

    def __init__(self, url: str, path: str = "", node: str = "", domain: str = "wall",
                 timeout_s: float = 1.0) -> None:
        parts = urlsplit(url)
        host = parts.netloc or url
        super().__init__(label=f"http:{host}", min_period_s=0.0,
                         default_period_s=DEFAULT_PERIOD_S, blocking=True)
        self.url, self.keys, self.timeout_s = url, parse_path(path), timeout_s
        name = path or parts.path or "/"
        self.channels.append(Channel(source=self.label, name=name, domain=domain, kind=MEASURED,
                                     quantity=POWER, scale=1.0, node=node))

    def fetch(self) -> float:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as response:
                body = response.read(1 << 20)
        except urllib.error.HTTPError as exc:
            raise MeterError(0, f"{self.url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise MeterError(0, f"{self.url}: {reason}") from None
        try:
            return extract_watts(body, self.keys)
        except MeterError as exc:
            raise MeterError(0, f"{self.url}: {exc.strerror}") from None

    def probe(self) -> None:
        """One reading before a run starts: a meter that does not answer is unavailable."""
        try:
            self.fetch()
        except MeterError as exc:
            raise SourceUnavailable(f"{exc.strerror}; check the URL and that the meter is on "
                                    "(a meter that fails later in the run leaves gaps, flagged partial)"
                                    ) from None

    def poll(self) -> list[tuple[float, list[float]]]:
        t0 = time.monotonic()
        try:
            value = self.fetch()
        except MeterError as exc:
            self.fault(self.channels[0].name, exc.strerror)
            value = NAN
        t1 = time.monotonic()
        return [((t0 + t1) / 2.0, [value])]

    def read(self) -> list[float]:
        return self.poll()[0][1]
