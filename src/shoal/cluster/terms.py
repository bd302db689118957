"""The terms of an ``--emulate`` spec (``8xstb@mpeg2-sd+1xxeon-blade``) as options add to them.

Options that belong to the devices of one profile (``--background stb=mpeg2-sd``, ``--qos
stb=10M``) become ``@`` suffixes of that profile's terms, as ``--freq`` does, so the devices
carry them wherever the spec goes (a study's plans, a manifest, ``--resume``).
"""

from __future__ import annotations

from typing import Callable

from shoal.errors import ShoalError


def with_suffix(spec: str, given: dict[str, str], suffix: Callable[[str], str],
                carries: Callable[[str], bool], option: str, what: str) -> str:
    """``spec`` with ``@suffix(value)`` on every term of each profile in ``given`` (profile ->
    value as typed after ``option``); refused for a profile the spec lacks, or a term that
    already ``carries`` such a suffix (``what`` names it)."""
    terms = spec.replace(" ", "").split("+")
    kinds = [term.split("@")[0].partition("x")[2] for term in terms]
    for kind, value in given.items():
        if kind not in kinds:
            raise ShoalError(f"{option} {kind}={value}: --emulate {spec} has no {kind} devices; give "
                             f"{what} to one of its profiles: {', '.join(dict.fromkeys(kinds))}")
    out = []
    for term, kind in zip(terms, kinds):
        if kind in given:
            if any(carries(word) for word in term.split("@")[1:]):
                raise ShoalError(f"{option} {kind}={given[kind]}: --emulate {spec} already gives "
                                 f"{kind} {what}; give it once")
            term = f"{term}@{suffix(given[kind])}"
        out.append(term)
    return "+".join(out)
