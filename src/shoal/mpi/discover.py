"""Find an MPI installation and tell who it is.

The default is the first implementation in ``shoal.mpi.kinds`` as installed
in shoal's own environment (each implementation knows where its wheel puts
it). Any system installation works too, named by path or found on PATH.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from shoal import environment, proc
from shoal.errors import ShoalError
from shoal.mpi import kinds
from shoal.mpi.base import MPIInstall, tool_output

__all__ = ["MPIInstall", "KINDS", "resolve", "available"]

KINDS = kinds.names()


@functools.lru_cache(maxsize=None)   # asking an MPI who it is runs its tools: once per place
def _identify(bindir: Path) -> MPIInstall | None:
    """Ask each implementation whether ``bindir`` is one of its installations,
    first by the tools beside mpiexec, then by what mpiexec says of itself."""
    if not (bindir / "mpiexec").exists():
        return None
    for impl in kinds.implementations():
        found = impl.identify(bindir)
        if found:
            return found
    text = tool_output([str(bindir / "mpiexec"), "--version"])
    for impl in kinds.implementations():
        found = impl.from_launcher_version(text, bindir)
        if found:
            return found
    return None


def _bundled(kind: str) -> Path | None:
    return kinds.get(kind).bundled_bindir(Path(sys.prefix))


def _on_path() -> MPIInstall | None:
    mpiexec = proc.find("mpiexec")
    return _identify(Path(mpiexec).resolve().parent) if mpiexec else None


def resolve(spec: str | None = None) -> MPIInstall:
    """Resolve ``--mpi``: None, an implementation's name, "system", or a path.

    ``SHOAL_MPI`` in the environment is used when no spec is given.
    """
    spec = spec or environment.MPI.get() or kinds.default()
    if spec in KINDS:
        bundled = _bundled(spec)
        for found in (_identify(bundled) if bundled else None, _on_path()):
            if found and found.kind == spec:
                return found
        raise ShoalError(
            f"no {spec} MPI found (looked in {bundled or 'shoal environment'} and on PATH); "
            "run 'make setup', or name one with --mpi PATH")
    if spec == "system":
        found = _on_path()
        if not found:
            raise ShoalError(f"no {kinds.titles()} mpiexec on PATH; install one or use "
                             f"--mpi {kinds.default()}")
        return found
    path = Path(spec).expanduser()
    candidates = [path.parent] if path.is_file() else [path, path / "bin"]
    for bindir in candidates:
        found = _identify(bindir.resolve())
        if found:
            return found
    raise ShoalError(
        f"--mpi {spec}: no {kinds.titles()} found there (expected mpiexec with "
        f"{' or '.join(i.companion for i in kinds.implementations())} beside it); "
        f"give the MPI's bin directory or use --mpi {'|'.join(KINDS)}")


def resolve_each(specs: tuple[str, ...] | list[str]) -> list[MPIInstall]:
    """Resolve a list of ``--mpi`` specs (the labs compare several); an empty list is refused."""
    found = [resolve(s) for s in specs if s]
    if not found:
        raise ShoalError(f"no MPI given; use --mpi {','.join(kinds.names())}")
    return found


def available() -> list[MPIInstall]:
    """Every MPI shoal can use here, bundled first (for doctor and tests)."""
    seen: list[MPIInstall] = []
    for kind in KINDS:
        bundled = _bundled(kind)
        found = _identify(bundled) if bundled else None
        if found:
            seen.append(found)
    found = _on_path()
    if found and all(found.bindir != s.bindir for s in seen):
        seen.append(found)
    return seen
