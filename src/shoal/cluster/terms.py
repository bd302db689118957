"""The terms of an ``--emulate`` spec (``8xstb@mpeg2-sd+1xxeon-blade``) as options add to them.

Options that belong to the devices of one profile (``--background stb=mpeg2-sd``, ``--qos
stb=10M``) become ``@`` suffixes of that profile's terms, as ``--freq`` does, so the devices
carry them wherever the spec goes (a study's plans, a manifest, ``--resume``).
"""

from __future__ import annotations

from typing import Callable

from shoal.errors import ShoalError


def kinds(spec: str) -> list[str]:
    """The device profile of each term of an emulate spec, in order (``8xstb@mpeg2-sd+2xnuc``
    gives ``["stb", "nuc"]``)."""
    return [term.split("@")[0].partition("x")[2] for term in spec.replace(" ", "").split("+")]


def with_suffix(spec: str, given: dict[str, str], suffix: Callable[[str], str],
                carries: Callable[[str], bool], option: str, what: str) -> str:
    """``spec`` with ``@suffix(value)`` on every term of each profile in ``given`` (profile ->
    value as typed after ``option``); refused for a profile the spec lacks, or a term that
    already ``carries`` such a suffix (``what`` names it)."""
    terms, profiles = spec.replace(" ", "").split("+"), kinds(spec)
    for kind, value in given.items():
        if kind not in profiles:
            raise ShoalError(f"{option} {kind}={value}: --emulate {spec} has no {kind} devices; give "
                             f"{what} to one of its profiles: {', '.join(dict.fromkeys(profiles))}")
    out = []
    for term, kind in zip(terms, profiles):
        if kind in given:
            if any(carries(word) for word in term.split("@")[1:]):
                raise ShoalError(f"{option} {kind}={given[kind]}: --emulate {spec} already gives "
                                 f"{kind} {what}; give it once")
            term = f"{term}@{suffix(given[kind])}"
        out.append(term)
    return "+".join(out)
