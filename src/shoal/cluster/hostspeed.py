"""How fast this machine's core is, in reference cores: measured, cached per host, checked.

A device profile's speed is in reference cores on a named kernel (``shoal.profiles``:
the reference core's time per unit of work on shoal's own workloads' kernels). An
emulated device core must get the share of a host core that makes it that fast, so the
host's core is measured on the same kernels: the workload program's ``--probe`` runs
each kernel's serial part (no MPI), one copy per CPU this command may use, in
interleaved rounds, and reads CPU time per unit, which another process on the same CPU
does not lengthen. Host speed on a kernel = the reference core's time / this core's.

The result is cached per host (CPU model, kernel release, frequency governor, the
probe program's build); a cached speed is checked with a short probe of raytrace and
videostream each time it is used and measured again when the check reads it much slower
(a changed host) or at all faster (a speed cached under load), when the host changes, or
on ``recalibrate``. ``--host-speed`` (or an inventory's ``host_speed``)
overrides it with one number for every kernel.
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from shoal import jsonfile, proc
from shoal.hostfacts import cpu_model
from shoal.errors import ShoalError
from shoal.profiles import HOST, MIX, DeviceProfile, reference_kernels

# CPU seconds per kernel and round, and rounds: about 1.4 s of CPU per copy in all. Many short
# samples rather than a few long ones: on a shared machine a core's throughput drops by up to
# 40 % for tenths of a second at a time (another guest on its SMT sibling, which no steal
# counter shows), and the fastest sample finds the core's own speed only if some samples fit
# between such spells. Measured on a 2-vCPU EPYC guest, six calibrations each: 12 rounds of
# 25 ms spread 0.75 % (max - min over the median of their mixes), 3 rounds of 0.1 s 20 %.
PROBE_S = 0.025
ROUNDS = 12
# The check of a cached speed: raytrace and videostream, 8 samples of one probe part each.
CHECK_PROBE_S, CHECK_ROUNDS = 0.02, 8
CHECK_KERNELS = ("raytrace", "videostream")
# The cached speed is taken when a short probe of each check kernel reads no more than this
# slower than it: a host under load reads a few per cent slow on CPU time (shared caches), a
# changed host more.
CHECK_TOLERANCE = 0.15
# ... and no more than this faster. Load only slows a probe, so a check that reads faster
# found a cached speed measured under load: videostream, the kernel that reads memory most,
# read 1.15-1.35 reference cores in calibrations on a busy 2-vCPU EPYC whose quiet core reads
# 1.52, and a MIX profile's share of a core with it.
CHECK_FASTER = 0.05
# A calibration whose rounds spread more than this: the host does not hold its speed.
SPREAD_WARNING = 0.10
CACHE_NAME = "host-speed.json"
CACHE_ENTRIES = 16
ABSURD = 1e3  # host speeds outside [1/ABSURD, ABSURD] are refused


@dataclass(frozen=True)
class HostSpeed:
    """This machine's core in reference cores, per kernel, and how it was found."""

    by_kernel: dict[str, float]
    # "measured" (this command), "cached" (an earlier measurement, checked), "asked"
    # (--host-speed or an inventory's host_speed).
    source: str
    # How much slower the median of three blocks of consecutive rounds ran than the fastest
    # block, on the mix, each block read by its fastest samples: 1 - median / fastest (0 when
    # asked). A host that holds its speed reads under a per cent; one whose speed moves
    # (throttling, a busy hypervisor) more. The fastest sample is what the speed is taken from.
    spread: float = 0.0
    cpu_model: str = ""
    # Seconds per unit of each kernel on this core (the fastest sample of copies and rounds).
    unit_s: dict[str, float] = field(default_factory=dict)
    copies: int = 0
    rounds: int = 0
    measured_utc: str = ""
    # Why it was measured again, or what the cached speed's check read.
    note: str = ""
    # Said once when the calibration's rounds spread more than SPREAD_WARNING.
    warning: str = ""

    @property
    def mix(self) -> float:
        """The kernels' geometric mean: the speed of profiles given as plain estimates."""
        values = list(self.by_kernel.values())
        return math.exp(sum(math.log(v) for v in values) / len(values))

    def of(self, kernel: str) -> float:
        """Host speed on ``kernel`` (MIX: the geometric mean; HOST: 1, this core itself)."""
        if kernel == HOST:
            return 1.0
        if kernel == MIX or kernel not in self.by_kernel:
            return self.mix
        return self.by_kernel[kernel]

    def core_share(self, profile: DeviceProfile) -> float:
        """The share of one host core (at most all of it) that makes a device core as fast
        as its profile."""
        return min(1.0, profile.speed / self.of(profile.speed_kernel))

    @classmethod
    def asked(cls, value: float) -> "HostSpeed":
        check(value)
        return cls({name: float(value) for name in reference_kernels()}, "asked")

    def describe(self) -> dict:
        """What manifests and findings record (numbers as numbers)."""
        return {"value": self.mix, **asdict(self), "mix": self.mix}

    @classmethod
    def from_record(cls, record: dict | float | None) -> "HostSpeed":
        """Back from ``describe()`` (a cluster's state file); a bare number from older ones."""
        if record is None:
            return cls.asked(1.0)
        if isinstance(record, (int, float)):
            return cls.asked(float(record))
        fields = {k: record[k] for k in cls.__dataclass_fields__ if k in record}
        return cls(**fields)


def check(value: float) -> float:
    """Validate a host speed asked for; ShoalError says what is wrong and what to do."""
    try:
        speed = float(value)
    except (TypeError, ValueError):
        raise ShoalError(f"--host-speed: give a number of reference cores such as 1.8, got {value!r}") from None
    if not math.isfinite(speed) or speed <= 0:
        raise ShoalError(f"--host-speed must be a positive number of reference cores (this core's "
                         f"speed; leave it out to measure it), got {value}")
    if not 1 / ABSURD <= speed <= ABSURD:
        raise ShoalError(f"--host-speed {value}: must be within {1 / ABSURD:g}..{ABSURD:g} reference cores")
    return speed


def host_key(program: Path) -> dict[str, str]:
    """What a cached speed belongs to: another CPU, kernel, governor or probe program
    (a changed kernel's source, compiler or flags) is measured again."""
    return {"cpu_model": cpu_model(), "kernel": platform.release(), "governor": _governor(),
            "machine": platform.machine(), "program": str(program)}


def _governor() -> str:
    try:
        return Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read_text().strip()
    except OSError:
        return "none"


def probe(program: Path, copies: int, probe_s: float = PROBE_S, rounds: int = ROUNDS,
          kernels: list[str] | None = None) -> list[dict]:
    """Run ``copies`` probes at once (one per CPU); each returns the program's JSON."""
    names = ",".join(kernels or list(reference_kernels()))
    argv = [str(program), "--probe", names, "--probe-s", f"{probe_s:g}", "--rounds", str(rounds)]
    started = [proc.start(argv, stdout=proc.PIPE, show=i == 0) for i in range(copies)]
    results = []
    for worker in started:
        with worker:
            out, _ = worker.popen.communicate(timeout=120)
        if worker.popen.returncode != 0:
            raise ShoalError(f"the host speed probe ({' '.join(argv)}) failed with status "
                             f"{worker.popen.returncode}; rerun with --host-speed N to give it")
        results.append(json.loads(out))
    return results


def from_probes(results: list[dict], source: str = "measured") -> HostSpeed:
    """The host speed the probes' samples give (pure arithmetic; tests feed it timings)."""
    kernels = reference_kernels()
    unit_s: dict[str, list[float]] = {}
    rounds: list[dict[str, float]] = []  # per copy and round: kernel -> s per unit
    for result in results:
        per_round: dict[int, dict[str, float]] = {}
        for entry in result["probe"]:
            if entry["name"] not in kernels:
                continue
            for r, sample in enumerate(entry["samples"]):
                t = sample["cpu_s"] / sample["units"]
                unit_s.setdefault(entry["name"], []).append(t)
                per_round.setdefault(r, {})[entry["name"]] = t
        rounds += list(per_round.values())
    if not unit_s:
        raise ShoalError("the host speed probe returned no samples of the reference kernels")
    # The fastest sample: load on a shared host (caches, memory bandwidth, a hypervisor's
    # other guests) only ever lengthens a kernel's CPU time, never shortens it.
    fastest = {name: min(ts) for name, ts in unit_s.items()}
    by_kernel = {name: kernels[name].unit_s / t for name, t in fastest.items()}

    def mix(times: dict[str, float]) -> float:
        logs = [math.log(kernels[n].unit_s / t) for n, t in times.items()]
        return math.exp(sum(logs) / len(logs))

    # The spread compares three blocks of consecutive rounds, each read by its own fastest
    # samples: one short round in a slow spell says nothing, a block slow throughout does.
    whole = [r for r in rounds if set(r) == set(fastest)]
    size = max(1, math.ceil(len(whole) / 3))
    blocks = [whole[i:i + size] for i in range(0, len(whole), size)]
    mixes = [mix({n: min(r[n] for r in block) for n in fastest}) for block in blocks]
    spread = 1 - statistics.median(mixes) / max(mixes) if len(mixes) > 1 else 0.0
    return HostSpeed(by_kernel, source, spread, cpu_model(), fastest, len(results),
                     len(whole) // max(1, len(results)),
                     time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def measure(program: Path, copies: int) -> HostSpeed:
    return from_probes(probe(program, max(1, copies)))


def _cache_file() -> Path:
    from shoal.mpi.build import cache_root

    return cache_root() / CACHE_NAME


def _read_cache(key: dict) -> HostSpeed | None:
    try:
        entries = json.loads(_cache_file().read_text())
        entry = entries.get(json.dumps(key, sort_keys=True))
        return HostSpeed.from_record(entry) if entry else None
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _write_cache(key: dict, speed: HostSpeed) -> None:
    path = _cache_file()
    try:
        entries = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        entries = {}
    entries[json.dumps(key, sort_keys=True)] = speed.describe()
    # One entry per probe build: every fresh MPI install (a clone's own venv) adds one, so
    # only the newest few are kept.
    newest = sorted(entries.items(), key=lambda kv: str(kv[1].get("measured_utc", "")))[-CACHE_ENTRIES:]
    entries = dict(newest)
    try:
        jsonfile.replace(path, entries)
    except OSError:
        pass  # an unwritable cache costs a measurement next time, nothing else


def _checked(program: Path, cached: HostSpeed) -> tuple[bool, str]:
    """A short probe of each check kernel against the cached speed: (agrees, what it read)."""
    missing = [k for k in CHECK_KERNELS if not cached.unit_s.get(k)]
    if missing:
        return False, f"the cached speed has no {missing[0]} time"
    result = probe(program, 1, probe_s=CHECK_PROBE_S, rounds=CHECK_ROUNDS, kernels=list(CHECK_KERNELS))[0]
    moved = {}
    for part in result["probe"]:
        now = min(s["cpu_s"] / s["units"] for s in part["samples"])
        moved[part["name"]] = now / cached.unit_s[part["name"]] - 1
    read = ", ".join(f"{k} {m:+.1%}" for k, m in moved.items()) + " against the cached times"
    return all(-CHECK_FASTER <= m <= CHECK_TOLERANCE for m in moved.values()), read


def measured(program: Path, copies: int, recalibrate: bool = False) -> HostSpeed:
    """This host's speed: cached and checked, or measured now (and cached)."""
    key = host_key(program)
    cached = None if recalibrate else _read_cache(key)
    note = "--recalibrate" if recalibrate else "no cached speed for this host"
    if cached is not None:
        agrees, read = _checked(program, cached)
        if agrees:
            return HostSpeed(**{**asdict(cached), "source": "cached", "note": f"check: {read}"})
        note = f"measured again: the check read {read}"
    speed = measure(program, copies)
    warning = ""
    if speed.spread > SPREAD_WARNING:
        warning = (f"this host's core speed spread {speed.spread:.0%} over the calibration's rounds "
                   f"(more than {SPREAD_WARNING:.0%}): it does not hold its speed, so emulated devices' "
                   "speed and every device time carry that uncertainty; quieten the host or give "
                   "--host-speed N")
        print(f"shoal: warning: {warning}", file=sys.stderr)
        if cached is not None:
            # The check caught the host in a slow spell and the calibration could not get
            # past it: the speed measured while the host held it is the better one.
            return HostSpeed(**{**asdict(cached), "source": "cached", "warning": warning,
                                "note": f"{note}; the calibration did not hold its speed "
                                        f"(mix {speed.mix:.3g}), so the cached speed stays"})
    speed = HostSpeed(**{**asdict(speed), "note": note, "warning": warning})
    if not warning:
        _write_cache(key, speed)  # a host that did not hold its speed is measured again next time
    return speed


_resolved: dict[tuple, HostSpeed] = {}


def resolve(asked: float | None = None, mpi: str | None = None, recalibrate: bool = False) -> HostSpeed:
    """The host speed a command's emulated devices are held against: ``asked`` as given,
    else measured (or cached) once per command with the workload program of ``mpi``."""
    if asked is not None:
        return HostSpeed.asked(asked)
    key = (mpi, recalibrate)
    if key not in _resolved:
        from shoal.cluster import cpulimit
        from shoal.mpi import build, discover

        try:
            program = build.build("work", discover.resolve(mpi) if mpi else _any_mpi())
        except ShoalError as exc:
            raise ShoalError(f"measuring this host's core speed needs the workload program ({exc}); "
                             "give --host-speed N (reference cores) to skip the measurement") from None
        _resolved[key] = measured(program, max(1, math.floor(cpulimit.capacity())), recalibrate)
    return _resolved[key]


def _any_mpi():
    """The default MPI, else any installed one: the probe uses none of it but its compiler."""
    from shoal.mpi import discover

    try:
        return discover.resolve(None)
    except ShoalError:
        found = discover.available()
        if not found:
            raise
        return found[0]


def cached_here() -> HostSpeed | None:
    """The newest cached speed of this host (its CPU, kernel and governor), any probe build."""
    try:
        entries = json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return None
    here = {"cpu_model": cpu_model(), "kernel": platform.release(), "governor": _governor()}
    found = []
    for key, entry in entries.items():
        try:
            if all(json.loads(key).get(k) == v for k, v in here.items()):
                found.append(HostSpeed.from_record(entry))
        except (ValueError, TypeError, AttributeError):
            continue
    return max(found, key=lambda s: s.measured_utc) if found else None
