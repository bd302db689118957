"""The kinds of power source shoal knows: one module each, found here by itself.

A module here defines ``KIND``, an instance of a ``Kind`` subclass: its name,
its grammar in ``--power``/``--source`` (``syntax``, ``check``), whether
``auto`` tries it and in which order (``detect``), what to do where it is
missing (``fix``) and how to ``open`` it. Dropping in a new module is all it
takes for the grammar, ``auto``, ``shoal doctor``, ``shoal power sources``
and the help texts to know it. The modules stay light: the source itself is
imported in ``open()``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass

from shoal.errors import ShoalError


#: Words that are not kinds of source: pick one (``auto``) or measure nothing (``none``).
AUTO, NONE = "auto", "none"


class SpecError(ShoalError):
    """A --source string that cannot be parsed (exit code 2)."""


@dataclass(frozen=True)
class Opening:
    """Where and how a source is opened: the node it measures, and for logs the clock."""

    node: str = ""
    offset_s: float = 0.0
    since_mono: float = float("-inf")


class Kind:
    """One kind of power source. Subclasses set the attributes and override what they need."""

    #: The word in a spec ("rapl"), and other words for it ("https").
    name: str = ""
    aliases: tuple[str, ...] = ()
    #: How the spec names it, for help and errors ("log:FILE[#TIME,POWER]").
    syntax: str = ""
    #: Whether the name is followed by ":ARGUMENT".
    takes_argument: bool = False
    #: A sensor that ``auto`` tries, in this order (lowest first); None: never picked by auto.
    detect: int | None = None
    #: What to do where the kind is missing (shown by doctor and power sources).
    fix: str = ""
    #: Place in listings.
    order: int = 50
    #: What its readings are, where auto cannot find it ("measured", "wall", "power").
    label: str = "measured"
    domain: str = ""
    quantity: str = ""
    #: A spec item that starts so names this kind with the whole item as its argument
    #: ("http://meter/p" alone).
    bare_prefixes: tuple[str, ...] = ()

    def __init__(self, **declared: object) -> None:
        for key, value in declared.items():
            if not hasattr(type(self), key):
                raise TypeError(f"a power source kind declares no {key!r}")
            setattr(self, key, value)

    def check(self, arg: str, item: str) -> None:
        """Refuse a malformed argument (SpecError naming ``item``); nothing is opened."""

    def open(self, arg: str, at: Opening) -> tuple["object", list[str]]:
        """The open source and notes on what was chosen; SourceUnavailable where it cannot be."""
        raise NotImplementedError


class Sensor(Kind):
    """A sensor of this machine that ``auto`` may find: its ``Source`` class ("module:Class")
    takes the node's name and raises SourceUnavailable where the sensor is not."""

    source: str = ""

    def open(self, arg: str, at: Opening):
        module, _, name = self.source.partition(":")
        return getattr(importlib.import_module(module), name)(node=at.node), []


@functools.lru_cache(maxsize=None)
def kinds() -> tuple[Kind, ...]:
    """Every kind, in listing order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        kind = getattr(importlib.import_module(f"{__name__}.{info.name}"), "KIND", None)
        if isinstance(kind, Kind):
            found.append(kind)
    return tuple(sorted(found, key=lambda k: (k.order, k.name)))


def get(word: str) -> Kind | None:
    """The kind a spec word names (its name or an alias), or None."""
    word = word.lower()
    return next((k for k in kinds() if word == k.name or word in k.aliases), None)


def sensors() -> tuple[Kind, ...]:
    """The kinds ``auto`` tries, in its order."""
    return tuple(sorted((k for k in kinds() if k.detect is not None), key=lambda k: k.detect))


@functools.lru_cache(maxsize=None)
def syntax() -> str:
    """What a spec may hold, for help texts and errors (the one copy, made from the kinds)."""
    return "|".join([AUTO, *(k.syntax for k in kinds()), NONE])


def help_text(default: str = "") -> str:
    """The help of an option that takes a spec."""
    tail = f" (default {default})" if default else ""
    return f"power source(s), comma-separated: {syntax()}{tail}"
