"""Build shoal's native programs with the MPI's own mpicc, cached per MPI.

Each directory under ``shoal/native/`` is one target; its ``target.toml``
says what it is::

    kind = "exe"            # or "shared" (a .so, e.g. a PMPI library)
    output = "shoal-bench"  # file name produced
    sources = ["*.c"]       # globs relative to the directory
    cflags = ["-O2"]
    libs = ["-lm"]
    uses = ["sdsm"]         # optional: other targets whose sources are compiled in

The MPI's module says what its compiler wrapper needs (environment, flags).
The cache key holds the MPI identity (kind, version, ABI, place) and a hash
of the sources and flags, so a changed MPI or source rebuilds; a build
writes to a temporary name and renames, so concurrent builds are safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from shoal import environment, proc
from shoal.errors import ShoalError
from shoal.mpi.base import MPIInstall

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

NATIVE_DIR = Path(__file__).resolve().parent.parent / "native"


def cache_root() -> Path:
    base = environment.CACHE.get() or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shoal")
    return Path(base)


def _target_spec(target: str) -> tuple[Path, dict]:
    tdir = NATIVE_DIR / target
    spec_file = tdir / "target.toml"
    if not spec_file.exists():
        known = sorted(p.parent.name for p in NATIVE_DIR.glob("*/target.toml"))
        raise ShoalError(f"no native target '{target}' (known: {', '.join(known)})")
    with open(spec_file, "rb") as fh:
        return tdir, tomllib.load(fh)


def _sources(tdir: Path, spec: dict) -> list[Path]:
    found: list[Path] = []
    for pattern in spec.get("sources", ["*.c"]):
        found.extend(sorted(tdir.glob(pattern)))
    return found


def _cached(target: str, tdir: Path, spec: dict, files: list[Path], key: tuple,
            place: str) -> tuple[Path, bool]:
    """Where the build of these files with this key lives, and whether it is there already."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(repr(key).encode())
    out_dir = cache_root() / "native" / place / f"{target}-{digest.hexdigest()[:12]}"
    output = out_dir / spec.get("output", target)
    if not output.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
    return output, output.exists()


def _temporary(output: Path) -> str:
    """A temporary name beside the output: a build renames it into place when done,
    so concurrent builds are safe."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
    os.close(fd)
    return tmp_name


def _install(tmp_name: str, output: Path) -> Path:
    os.chmod(tmp_name, 0o755)
    os.replace(tmp_name, output)
    return output


def build(target: str, mpi: MPIInstall, extra_cflags: tuple[str, ...] = ()) -> Path:
    """Return the path of the built target for this MPI, compiling if needed."""
    tdir, spec = _target_spec(target)
    sources = _sources(tdir, spec)
    headers = sorted(tdir.glob("*.h")) + sorted((NATIVE_DIR / "common").glob("*.h"))
    includes = [NATIVE_DIR / "common", tdir]
    for used in spec.get("uses", []):
        udir, uspec = _target_spec(used)
        sources += _sources(udir, uspec)
        headers += sorted(udir.glob("*.h"))
        includes.append(udir)
    cflags = list(spec.get("cflags", ["-O2"])) + mpi.impl.cflags(mpi) + list(extra_cflags)
    libs = list(spec.get("libs", []))
    kind = spec.get("kind", "exe")
    output, built = _cached(target, tdir, spec, sources + headers, (cflags, libs, kind), mpi.identity)
    if built:
        if not _record_path(output).exists():   # built before records were kept
            _write_record(output, mpi, cflags, libs)
        return output
    out_dir = output.parent
    tmp_name = _temporary(output)
    argv = [str(mpi.mpicc), *cflags, *(f"-I{d}" for d in includes)]
    if kind == "shared":
        argv += ["-shared", "-fPIC"]
    argv += ["-o", tmp_name, *map(str, sources), *libs]
    done = proc.run(argv, env_add=mpi.impl.build_env(mpi))
    if not done.ok:
        os.unlink(tmp_name)
        log = out_dir / "build.log"
        log.write_text(" ".join(argv) + "\n\n" + done.stdout + done.stderr)
        first = next((ln for ln in (done.stderr or done.stdout).splitlines() if "error" in ln),
                     (done.stderr or done.stdout or "no output").strip().splitlines()[0])
        raise ShoalError(f"building {target} with {mpi.name} failed: {first.strip()} "
                         f"(full log: {log})")
    _write_record(output, mpi, cflags, libs)
    return _install(tmp_name, output)


def _record_path(output: Path) -> Path:
    return output.with_name(output.name + ".build.json")


def _write_record(output: Path, mpi: MPIInstall, cflags: list[str], libs: list[str]) -> None:
    """What a native program was compiled with, beside it: its runs' stacks name it."""
    said = proc.run([str(mpi.mpicc), "--version"], env_add=mpi.impl.build_env(mpi))
    lines = (said.stdout or said.stderr).strip().splitlines() if said.ok else []
    record = {"compiler": lines[0] if lines else None,
              "cflags": cflags, "libs": libs, "mpi": mpi.name}
    tmp = _record_path(output).with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, _record_path(output))


def record(program: Path | str) -> dict | None:
    """The compiler and flags a native program built by ``build`` was made with (None when
    it was not built here)."""
    try:
        return json.loads(_record_path(Path(program)).read_text())
    except (OSError, ValueError):
        return None


def build_host(target: str) -> Path:
    """Build a target that uses no MPI (``compiler = "cc"``) with the host's C compiler."""
    tdir, spec = _target_spec(target)
    if spec.get("compiler") != "cc":
        raise ShoalError(f"native target '{target}' is an MPI program; build it with an MPI")
    compiler = proc.tool("cc", f"to build {target}")
    sources = _sources(tdir, spec)
    # Sources may come from another target's directory (guestprobe: the workloads' kernels),
    # whose headers are then found, and keyed, beside them.
    includes = list(dict.fromkeys([NATIVE_DIR / "common", tdir, *(s.parent.resolve() for s in sources)]))
    headers = [h for d in includes for h in sorted(d.glob("*.h"))]
    cflags, libs = list(spec.get("cflags", ["-O2"])), list(spec.get("libs", []))
    output, built = _cached(target, tdir, spec, sources + headers, (cflags, libs, compiler), "host")
    if built:
        return output
    tmp_name = _temporary(output)
    done = proc.run([compiler, *cflags, *(f"-I{d}" for d in includes), "-o", tmp_name, *map(str, sources), *libs])
    if not done.ok:
        os.unlink(tmp_name)
        raise ShoalError(f"building {target} failed: {done.error_line('cc')}")
    return _install(tmp_name, output)
