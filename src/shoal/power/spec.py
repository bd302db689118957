"""Source specs (``--source``) and auto-detection: which sources to open.

Grammar, items joined with commas::

    auto | rapl | hwmon | battery | none
    http:URL[#JSON_PATH]          (``http://...`` alone also works)
    log:FILE[#TIME_COLUMN,POWER_COLUMN]
    model[:IDLE_W,BUSY_W][,cores=N][,cgroup=GROUP|,netns=PATH][,link_J_per_B=X]

A comma starts a new item unless what follows is not a source kind and
the item before takes an argument (model, log, http): commas inside a
model's numbers, a log's column pair or a URL stay where they belong.
``auto`` takes the first measured source found in the order RAPL, hwmon,
battery, and otherwise the model, saying that its watts are modelled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shoal.errors import ShoalError
from shoal.power.base import Source, SourceUnavailable

KINDS = ("auto", "rapl", "hwmon", "battery", "http", "https", "log", "model", "none")
SYNTAX = "auto|rapl|hwmon|battery|http:URL[#json.path]|log:FILE[#TIME,POWER]|model[:IDLE_W,BUSY_W]|none"
_KIND_START = re.compile(r"^\s*(?:auto|rapl|hwmon|battery|none|model|https?|log)\s*(?:$|:)", re.IGNORECASE)
_TAKES_ARGS = ("model", "log", "http", "https")
SENSOR_KINDS = ("rapl", "hwmon", "battery")


class SpecError(ShoalError):
    """A --source string that cannot be parsed (exit code 2)."""


@dataclass(frozen=True)
class Item:
    kind: str
    arg: str = ""


def parse(spec: str) -> list[Item]:
    """Split and check a spec string; raise SpecError naming the bad part."""
    if not spec or not spec.strip():
        raise SpecError(f"empty power source; use {SYNTAX}")
    items = []
    for part in _split(spec.strip()):
        part = part.strip()
        kind, sep, arg = part.partition(":")
        kind = kind.lower()
        if kind in ("http", "https") and arg.startswith("//"):
            kind, arg = "http", part  # a bare URL
        if kind not in KINDS:
            raise SpecError(f"unknown power source {part!r}; use {SYNTAX}")
        if kind in ("auto", "rapl", "hwmon", "battery", "none") and sep:
            raise SpecError(f"power source {kind!r} takes no argument (got {part!r}); use {SYNTAX}")
        if kind == "http" and not re.match(r"^https?://[^/#\s]+", arg):
            raise SpecError(f"power source {part!r}: give a URL, e.g. http:http://meter:8080/status#data.power_W")
        if kind == "log" and not arg.split("#")[0]:
            raise SpecError(f"power source {part!r}: give a file, e.g. log:meter.csv")
        if kind == "model" and arg:
            parse_model_args(arg)
        items.append(Item(kind, arg))
    if any(i.kind == "none" for i in items) and len(items) > 1:
        raise SpecError("power source 'none' cannot be combined with other sources")
    return items


def _split(spec: str) -> list[str]:
    """Split at commas, keeping commas inside a model's or log's or URL's argument."""
    parts: list[str] = []
    for token in spec.split(","):
        if parts and not _KIND_START.match(token):
            previous = parts[-1].partition(":")[0].strip().lower()
            if previous in _TAKES_ARGS and ":" in parts[-1]:
                parts[-1] += "," + token
                continue
        parts.append(token)
    return parts


def parse_model_args(arg: str) -> dict:
    """``IDLE_W,BUSY_W[,cores=N][,cgroup=G|,netns=PATH][,link_J_per_B=X]`` to keyword arguments."""
    from shoal.inputs.grammar import NON_NEGATIVE, POSITIVE, GrammarError, number

    out: dict = {}
    numbers = []
    for token in [t.strip() for t in arg.split(",") if t.strip()]:
        key, eq, value = token.partition("=")
        try:
            if not eq:
                numbers.append(number(token, NON_NEGATIVE))
            elif key == "cores":
                out["cores"] = number(value, POSITIVE)
            elif key == "link_J_per_B":
                out["link_J_per_B"] = number(value, NON_NEGATIVE)
            elif key in ("cgroup", "netns"):
                out[key] = value
            else:
                raise SpecError(f"model option {key!r} unknown; use cores=, cgroup=, netns=, link_J_per_B=")
        except GrammarError as exc:
            raise SpecError(f"model: {token!r} {exc}; use model:IDLE_W,BUSY_W") from None
    if len(numbers) not in (0, 2):
        raise SpecError(f"model takes two numbers IDLE_W,BUSY_W, got {len(numbers)} ({arg!r})")
    if numbers:
        if numbers[1] < numbers[0]:
            raise SpecError(f"model: need 0 <= IDLE_W <= BUSY_W, got {numbers[0]:g},{numbers[1]:g}")
        out["idle_W"], out["busy_W"] = numbers
    if "cgroup" in out and "netns" in out:
        raise SpecError("model: give cgroup= or netns=, not both")
    return out


def _sensor(kind: str, node: str) -> Source:
    if kind == "rapl":
        from shoal.power.rapl import RaplSource
        return RaplSource(node=node)
    if kind == "hwmon":
        from shoal.power.hwmon import HwmonSource
        return HwmonSource(node=node)
    from shoal.power.battery import BatterySource
    return BatterySource(node=node)


def detect(node: str = "") -> tuple[list[Source], dict[str, str]]:
    """Open every sensor kind that works here; reasons for those that do not."""
    found, missing = [], {}
    for kind in SENSOR_KINDS:
        try:
            found.append(_sensor(kind, node))
        except SourceUnavailable as exc:
            missing[kind] = str(exc)
    return found, missing


def build(items: list[Item], *, node: str = "", offset_s: float = 0.0,
          since_mono: float = float("-inf")) -> tuple[list[Source], list[str]]:
    """Open the sources of a parsed spec; notes say what was chosen and why.

    Raises ShoalError when an explicitly named source is unavailable;
    ``auto`` never fails (the model is its last resort).
    """
    from shoal.power.httpmeter import HttpMeterSource
    from shoal.power.meterlog import MeterLogSource
    from shoal.power.model import ModelSource

    sources: list[Source] = []
    notes: list[str] = []
    for item in items:
        try:
            if item.kind == "none":
                continue
            if item.kind == "auto":
                chosen, why = _auto(node)
                sources.append(chosen)
                notes.extend(why)
            elif item.kind in SENSOR_KINDS:
                sources.append(_sensor(item.kind, node))
            elif item.kind == "http":
                url, _, path = item.arg.partition("#")
                meter = HttpMeterSource(url, path, node=node)
                meter.probe()  # a meter named but not answering is an error, not a silent gap
                sources.append(meter)
            elif item.kind == "log":
                path, _, columns = item.arg.partition("#")
                sources.append(MeterLogSource(path, columns, offset_s=offset_s,
                                              since_mono=since_mono, node=node))
            elif item.kind == "model":
                model = ModelSource(**parse_model_args(item.arg), node=node)
                sources.append(model)
                if not item.arg:
                    notes.append(f"model without numbers uses {_default_device()}; "
                                 "give model:IDLE_W,BUSY_W for your device")
        except SourceUnavailable as exc:
            for source in sources:
                source.close()
            raise ShoalError(f"power source {item.kind}: {exc}") from None
    return sources, notes


def _default_device() -> str:
    from shoal.power.model import default_watts

    name, idle_W, busy_W = default_watts()
    return f"a {name} ({idle_W:.3g} W idle, {busy_W:.3g} W busy)"


def _auto(node: str) -> tuple[Source, list[str]]:
    from shoal.power.model import ModelSource

    reasons = []
    for kind in SENSOR_KINDS:
        try:
            source = _sensor(kind, node)
            return source, [f"auto: using {kind} (measured)"]
        except SourceUnavailable as exc:
            reasons.append(f"{kind}: {exc}")
    model = ModelSource(node=node)
    return model, ["auto: no measured source here (" + "; ".join(reasons) + ")",
                   f"auto: falling back to the MODEL, power is modelled not measured: {model.describe}; "
                   "give model:IDLE_W,BUSY_W for your device"]
