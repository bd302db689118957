"""Run one of shoal-sdsm's programs under a wait mode and read its report.

Each program prints one JSON line: per-rank reports (role, wall and CPU time,
time inside libshoalsdsm and blocked in its receives, compute time, output
hash) and per-rank CPU timelines. libshoalwait is always preloaded (``busy``
is its pass-through) so every rank's sleeping time is known too; the time
split of a rank is then

    user code   wall - time inside libshoalsdsm
    S-DSM code  inside libshoalsdsm, not blocked in a receive
    MPI wait    blocked in a receive, awake
    sleep       blocked in a receive, asleep (libshoalwait telemetry)
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal import proc
from shoal.errors import ShoalError
from shoal.execute import waiting
from shoal.execute.session import DeviceClock, Session
from shoal.mpi import build
from shoal.mpi.base import MPIInstall
from shoal.mpi.launch import Job
from shoal.wait import library, telemetry, traffic

TARGET = "sdsmapps"
# Largest chunk one MPI message carries (a count is a C int).
MAX_CHUNK_B = 2**31 - 1


@dataclass(frozen=True)
class App:
    """A program of shoal-sdsm and the ranks its S-DSM version needs."""

    name: str
    description: str
    min_ranks: int
    default_ranks: int
    # ranks of the plain-MPI version for the same number of compute tasks
    mpi_ranks_delta: int | None = None


APPS = {
    "full": App("full", "Experiment E Full: two clients write one datum back to back", 2, 3),
    "burst": App("burst", "Experiment E Burst: bursts of writes separated by pauses", 2, 3),
    "lock": App("lock", "Experiment E Lock: a client holds the lock while the other waits", 2, 3),
    "hough": App("hough", "Hough transform: 2 servers, I/O and tasks share line chunks", 4, 7, -2),
    "video": App("video", "Videostream: 1 server, input, output and tasks, frame chunks", 4, 7, -1),
}


def app(name: str) -> App:
    if name not in APPS:
        raise ShoalError(f"unknown S-DSM program '{name}'; use one of {', '.join(APPS)}")
    return APPS[name]


@dataclass
class Result:
    """A run's report plus what shoal measured around it."""

    app: str
    impl: str
    mode: str | None
    mpi: str
    launch_s: float
    report: dict[str, Any]
    telemetry: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ranks(self) -> list[dict[str, Any]]:
        return self.report["ranks"]

    def role(self, role: str) -> list[dict[str, Any]]:
        return [r for r in self.ranks if r["role"] == role]

    def output_hash(self) -> str:
        hashes = [r["hash"] for r in self.ranks if r["hash"] != "0000000000000000"]
        return hashes[0] if hashes else ""

    def traffic(self) -> list[dict[str, Any]]:
        """Who talked to whom (``shoal.wait.traffic``'s tidy rows; none without libshoalwait)."""
        return traffic.rows(self.telemetry)

    def time_split(self) -> list[dict[str, Any]]:
        """Per rank: user code, S-DSM code, MPI wait and sleep (s)."""
        sleep = {}
        for rec in self.telemetry:
            sleep[rec["rank"]] = sum(c["sleep_s"] for c in rec.get("calls", {}).values())
        rows = []
        for r in self.ranks:
            slept = min(sleep.get(r["rank"], 0.0), r["wait_s"])
            rows.append({"rank": r["rank"], "role": r["role"], "host": r.get("host", ""),
                         "device_core": r.get("device_core"),
                         "wall_s": r["wall_s"],
                         "cpu_s": r["cpu_s"], "compute_s": r["compute_s"],
                         "user_s": max(r["wall_s"] - r["lib_s"], 0.0),
                         "sdsm_s": max(r["lib_s"] - r["wait_s"], 0.0),
                         "mpi_wait_s": max(r["wait_s"] - slept, 0.0), "sleep_s": slept})
        return rows


def run_on_cluster(session: Session, mpi: MPIInstall, name: str, args: list[str],
                   blocks: list[tuple[str, int]], mode: str | None = "busy",
                   impl: str = "sdsm", env: dict[str, str] | None = None) -> Result:
    """Run one program on a cluster that is up, ``blocks`` ranks on its nodes in turn
    (``placement.on_nodes``); the result is in device time and device CPU seconds."""
    names = [n for n, _ in blocks]
    # The program's command goes to the cluster, which puts its placement in front (each
    # rank onto a core of its device, under that core's CPU budget).
    job = session.cluster.job(mpi, len(blocks), command(mpi, name, impl, args),
                              ranks_per_node=[c for _, c in blocks], names=names,
                              wildcard=True)   # servers take any source
    shares = [session.cluster.device_core_share(n) for n, count in blocks for _ in range(count)]
    return run(mpi, name, args, job.ranks, mode, impl=impl, job=job, env=env, clock=session.clock,
               timeout_s=session.clock.timeout(1800),
               place=waiting.devices_place(session.cluster, names), core_shares=shares)


def _to_device(report: dict[str, Any], records: list[dict[str, Any]], clock: DeviceClock,
               core_shares: list[float]) -> None:
    """Host measures to device measures: every time of the report and telemetry by the
    clock; each rank's CPU seconds (its own and its timeline's) over the host-core share its
    device core is held to (``Cluster.device_core_share``), so a rank that kept its device
    core busy shows as many CPU seconds as wall seconds. ``cpu_host_s`` keeps the host's."""
    def share(rank: int) -> float:
        return core_shares[rank] if rank < len(core_shares) else 1.0

    for i, r in enumerate(report["ranks"]):
        report["ranks"][i] = r = {**clock.record(r, ("wall_s", "lib_s", "wait_s", "compute_s")),
                                  "cpu_host_s": r["cpu_s"], "cpu_s": r["cpu_s"] / share(r["rank"])}
        r["quiet"] = [[clock.seconds(a), clock.seconds(b)] for a, b in r["quiet"]]
    for i, t in enumerate(report.get("timeline", [])):
        report["timeline"][i] = {**clock.record(t, ("t_s",)),
                                 "cpu_s": [c / share(t["rank"]) for c in t["cpu_s"]]}
    for rec in records:
        for name, call in rec.get("calls", {}).items():
            rec["calls"][name] = clock.record(call, ("sleep_s",))


def command(mpi: MPIInstall, name: str, impl: str, args: list[str]) -> list[str]:
    """A rank's command line: shoal-sdsm running program ``name`` in ``impl``."""
    return [str(program(mpi)), name, "--impl", impl, *args]


def program(mpi: MPIInstall) -> Path:
    """shoal-sdsm built for this MPI (compiled on first use, cached)."""
    return build.build(TARGET, mpi)


def default_ranks(name: str, impl: str) -> int:
    """Ranks of a program when none are asked for: one sequential, the plain-MPI version's own."""
    program = app(name)
    if impl == "seq":
        return 1
    if impl == "mpi":
        return program.default_ranks + (program.mpi_ranks_delta or 0)
    return program.default_ranks


def check_args(name: str, impl: str, ranks: int, chunk_bytes: int | None = None) -> None:
    """Refuse bad input before anything is launched (one line, exit 2)."""
    a = app(name)
    if impl not in ("sdsm", "mpi", "seq"):
        raise ShoalError(f"implementation '{impl}': use sdsm, mpi or seq")
    if impl != "sdsm" and name in ("full", "burst", "lock"):
        raise ShoalError(f"{name} exists only on the S-DSM; drop --impl {impl}")
    if impl == "seq" and ranks != 1:
        raise ShoalError(f"the sequential {name} runs on 1 rank, not {ranks}")
    if impl == "sdsm" and ranks < a.min_ranks:
        raise ShoalError(f"{name} on the S-DSM needs at least {a.min_ranks} ranks, got {ranks}")
    if impl == "mpi" and ranks < a.min_ranks + (a.mpi_ranks_delta or 0):
        raise ShoalError(f"plain-MPI {name} needs at least {a.min_ranks + (a.mpi_ranks_delta or 0)} "
                         f"ranks, got {ranks}")
    if chunk_bytes is not None and not 4 <= chunk_bytes <= MAX_CHUNK_B:
        raise ShoalError(f"chunk of {chunk_bytes} B: one MPI message carries 4 to {MAX_CHUNK_B} B; "
                         "use a smaller --bytes")


def run(mpi: MPIInstall, name: str, args: list[str], ranks: int, mode: str | None = "busy",
        impl: str = "sdsm", job: Job | None = None, env: dict[str, str] | None = None,
        timeout_s: float = 1800, own_cores: bool = False, clock: DeviceClock = DeviceClock(),
        place: dict | None = None, core_shares: list[float] | None = None) -> Result:
    """Run one program; ``job`` (from a cluster, made with ``command``) replaces the local
    launch, and ``place`` says whose wait calibration its ranks use (None: this host's;
    shoal.wait.tuning).

    ``own_cores``: the local ranks wait as they would with a core each (a Table 1
    placement, whose power is modelled so), not as the MPI waits when it knows it is
    oversubscribed (``launch.Job.own_cores``). ``clock``: the job ran on an
    emulated cluster slower than real time; every time in the result is turned
    into device time by it. ``core_shares``: per rank, the host-core share its device
    core is held to (its CPU seconds become the device's: ``_to_device``).

    ``mode`` None runs without libshoalwait (the MPI's own waiting, e.g. with
    one of its ``wait_knobs`` set through ``env``).
    """
    if job is None:
        job = Job(mpi, ranks, command(mpi, name, impl, args), rank_env=dict(env or {}),
                  own_cores=own_cores)
    else:
        job.rank_env.update(env or {})
    tel_dir = Path(tempfile.mkdtemp(prefix="shoal-dsm-"))
    try:
        if mode is not None:
            job = library.apply(job, mode, telemetry_dir=tel_dir, place=place)
        t0 = time.monotonic()
        try:
            done = job.run(timeout=timeout_s)
        except proc.CommandTimeout as exc:
            raise ShoalError(f"{name} under {mode or 'the MPI default'} did not finish in "
                             f"{timeout_s:.0f} s") from exc
        launch_s = time.monotonic() - t0
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            first = next((ln.strip() for ln in done.stderr.splitlines()
                          if ln.strip() and not ln.startswith("=")), "no output")
            raise ShoalError(f"{name} ({impl}) under {mode or 'the MPI default'} with {mpi.name} "
                             f"failed (exit {done.returncode}): {first}")
        records = telemetry.read_dir(tel_dir) if mode is not None else []
        report = json.loads(lines[-1])
        if clock.dilation != 1.0 or any(c != 1.0 for c in core_shares or []):
            _to_device(report, records, clock, core_shares or [])
        return Result(name, impl, mode, mpi.name, clock.seconds(launch_s), report, records)
    finally:
        shutil.rmtree(tel_dir, ignore_errors=True)
