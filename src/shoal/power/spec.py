"""Source specs (``--source``) and auto-detection: which sources to open.

Grammar, items joined with commas: ``auto``, ``none``, or a kind of
``shoal.power.kinds`` as it declares itself (``syntax()`` lists them)::

    auto | rapl | hwmon | battery | none
    http:URL[#JSON_PATH]          (``http://...`` alone also works)
    log:FILE[#TIME_COLUMN,POWER_COLUMN]
    model[:IDLE_W,BUSY_W][,cores=N][,cgroup=GROUP|,netns=PATH][,link_J_per_B=X]

A comma starts a new item unless what follows is not a source kind and
the item before takes an argument (model, log, http): commas inside a
model's numbers, a log's column pair or a URL stay where they belong.
``auto`` takes the first sensor found, in the order the kinds declare (RAPL,
hwmon, battery), and otherwise the model, saying that its watts are modelled.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from shoal.errors import ShoalError
from shoal.power import kinds
from shoal.power.base import Source, SourceUnavailable
from shoal.power.kinds import AUTO, NONE, Opening, SpecError, syntax

@functools.lru_cache(maxsize=None)
def _kind_start() -> re.Pattern:
    words = [AUTO, NONE, *(w for k in kinds.kinds() for w in (k.name, *k.aliases))]
    return re.compile(r"^\s*(?:" + "|".join(map(re.escape, words)) + r")\s*(?:$|:)", re.IGNORECASE)


@dataclass(frozen=True)
class Item:
    kind: str
    arg: str = ""


def parse(spec: str) -> list[Item]:
    """Split and check a spec string; raise SpecError naming the bad part."""
    if not spec or not spec.strip():
        raise SpecError(f"empty power source; use {syntax()}")
    items = []
    for part in _split(spec.strip()):
        part = part.strip()
        word, sep, arg = part.partition(":")
        word = word.lower()
        bare = next((k for k in kinds.kinds() if any(part.lower().startswith(p) for p in k.bare_prefixes)),
                    None)
        kind = bare or kinds.get(word)
        if bare is not None:
            arg = part
        elif word in (AUTO, NONE):
            if sep:
                raise SpecError(f"power source {word!r} takes no argument (got {part!r}); use {syntax()}")
            items.append(Item(word))
            continue
        if kind is None:
            raise SpecError(f"unknown power source {part!r}; use {syntax()}")
        if sep and not kind.takes_argument and bare is None:
            raise SpecError(f"power source {kind.name!r} takes no argument (got {part!r}); use {syntax()}")
        kind.check(arg, part)
        items.append(Item(kind.name, arg))
    if any(i.kind == NONE for i in items) and len(items) > 1:
        raise SpecError("power source 'none' cannot be combined with other sources")
    return items


def _split(spec: str) -> list[str]:
    """Split at commas, keeping commas inside an argument (a model's numbers, a log's
    column pair, a URL) unless what follows starts another source."""
    parts: list[str] = []
    for token in spec.split(","):
        if parts and not _kind_start().match(token):
            previous = kinds.get(parts[-1].partition(":")[0].strip())
            if previous is not None and previous.takes_argument and ":" in parts[-1]:
                parts[-1] += "," + token
                continue
        parts.append(token)
    return parts


def detect(node: str = "") -> tuple[list[Source], dict[str, str]]:
    """Open every sensor kind that works here; reasons for those that do not."""
    found, missing = [], {}
    for kind in kinds.sensors():
        try:
            found.append(kind.open("", Opening(node))[0])
        except SourceUnavailable as exc:
            missing[kind.name] = str(exc)
    return found, missing


def build(items: list[Item], *, node: str = "", offset_s: float = 0.0,
          since_mono: float = float("-inf")) -> tuple[list[Source], list[str]]:
    """Open the sources of a parsed spec; notes say what was chosen and why.

    Raises ShoalError when an explicitly named source is unavailable;
    ``auto`` never fails (the model is its last resort).
    """
    at = Opening(node, offset_s, since_mono)
    sources: list[Source] = []
    notes: list[str] = []
    for item in items:
        try:
            if item.kind == NONE:
                continue
            if item.kind == AUTO:
                chosen, why = _auto(node)
            else:
                chosen, why = kinds.get(item.kind).open(item.arg, at)
            sources.append(chosen)
            notes.extend(why)
        except SourceUnavailable as exc:
            for source in sources:
                source.close()
            raise ShoalError(f"power source {item.kind}: {exc}") from None
    return sources, notes


def _auto(node: str) -> tuple[Source, list[str]]:
    from shoal.power.model import ModelSource

    reasons = []
    for kind in kinds.sensors():
        try:
            source, _ = kind.open("", Opening(node))
            return source, [f"auto: using {kind.name} (measured)"]
        except SourceUnavailable as exc:
            reasons.append(f"{kind.name}: {exc}")
    model = ModelSource(node=node)
    return model, ["auto: no measured source here (" + "; ".join(reasons) + ")",
                   f"auto: falling back to the MODEL, power is modelled not measured: {model.describe}; "
                   "give model:IDLE_W,BUSY_W for your device"]
