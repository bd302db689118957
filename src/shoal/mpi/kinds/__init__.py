"""The MPI implementations shoal knows: one module each, found here by itself.

A module here defines ``IMPLEMENTATION``, an instance of
``shoal.mpi.base.Implementation``; dropping in a new module is all it takes
for ``--mpi``, discovery, launching, namespaces and waitlab to know it.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from shoal.errors import ShoalError
from shoal.mpi.base import Implementation


@functools.lru_cache(maxsize=None)
def implementations() -> tuple[Implementation, ...]:
    """Every implementation, the default first."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        impl = getattr(module, "IMPLEMENTATION", None)
        if isinstance(impl, Implementation):
            found.append(impl)
    return tuple(sorted(found, key=lambda i: (i.order, i.kind)))


def names() -> tuple[str, ...]:
    return tuple(i.kind for i in implementations())


def default() -> str:
    """The implementation used when none is named (shoal's bundled default)."""
    return names()[0]


def get(kind: str) -> Implementation:
    for impl in implementations():
        if impl.kind == kind:
            return impl
    raise ShoalError(f"unknown MPI '{kind}'; shoal knows {', '.join(names())}")


def titles() -> str:
    """"MPICH or Open MPI": for messages that list what shoal can find."""
    words = [i.title for i in implementations()]
    return " or ".join(words) if len(words) < 3 else ", ".join(words[:-1]) + " or " + words[-1]


def choices_help() -> str:
    """The values ``--mpi`` takes, for help texts."""
    first, *rest = names()
    return ", ".join([f"{first} (default)", *rest]) + ", system or a path"


def _union(attribute: str) -> tuple[str, ...]:
    """Every known MPI's ``attribute`` (a tuple), each entry once, in order."""
    seen: list[str] = []
    for impl in implementations():
        seen += [p for p in getattr(impl, attribute) if p not in seen]
    return tuple(seen)


def setting_prefixes() -> tuple[str, ...]:
    """Environment prefixes that tune any known MPI (recorded with measurements)."""
    return _union("setting_prefixes")


def launcher_prefixes() -> tuple[str, ...]:
    """Environment prefixes any known MPI's launcher reads."""
    return _union("launcher_prefixes")


def host_settings() -> tuple[str, ...]:
    """Launcher settings of any known MPI that name this machine's own network."""
    return _union("host_settings")


def launcher_names() -> frozenset[str]:
    """Program names of MPI launchers (``shoal run -- LAUNCHER ...``)."""
    return frozenset({"mpiexec", "mpirun"}.union(*(i.launcher_names for i in implementations())))
