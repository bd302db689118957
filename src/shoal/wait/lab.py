"""waitlab: 003's waiting experiments, every wait mode side by side.

Experiments (programs in ``shoal/native/waittests``, two or three ranks):

C      no MPI: how long clock_nanosleep really sleeps, 0 to 1 ms, idle and
       loaded, at the default timer slack and at 1 ns, with cyclictest beside
       it; on this host and, with ``emulate``, inside one emulated device of
       each profile (shoal.wait.experiment_c)
A      the sender sends bursts of 10 messages and pauses; the receiver loops
       on MPI_Probe + MPI_Recv (003 Figure 1a) and samples its own CPU load
       from the kernel's accounting (CLOCK_PROCESS_CPUTIME_ID)
D      one message per gap, gaps growing x1.05 from 1 ns to ~130 ms (003
       Experiment D); the reaction time of each message is the receive's
       return minus the send time (one monotonic clock, one host)
P10ms, P100ms, P1s
       one message every 10 ms, 100 ms, 1 s (a sensor, a video frame): the
       rhythm a learned mode can predict; the receiver's CPU load and the
       reaction times after the first 8 messages (those teach the pattern)
poisson
       Poisson arrivals, exponential gaps of mean 100 ms from a fixed seed:
       nothing to predict, the backoff's cap decides the reaction time
full, burst, lock
       003's S-DSM patterns: rank 0 serves writes and a lock to two clients
       (Probe + Recv on MPI_ANY_SOURCE); Full is message-heavy, Burst writes
       in bursts with pauses, Lock holds a lock the other client waits for

Contenders per MPI: every wait mode of libshoalwait (busy is the MPI's own
spinning; linear is its linear mode at the library's default, 1 ns steps from
1 ns to 1 us under 1 ns timer slack), ``seed003`` (003's own adaptive receive:
d_min 0, d_max 1 us, d_step 1 ns, the kernel's default timer slack),
``degraded+seed003`` (003's Adaptive Degraded: the same with the MPI's Degraded knob
set), and the MPI's own knobs without the library (``wait_knobs`` of its module in
shoal.mpi.kinds).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from shoal import proc
from shoal.errors import ShoalError
from shoal.mpi.discover import MPIInstall
from shoal.mpi.launch import Job
from shoal.runs.store import Run
from shoal.wait.library import apply
from shoal.wait.modes import parse_mode

EXPERIMENTS = ("C", "A", "D", "P10ms", "P100ms", "P1s", "poisson", "full", "burst", "lock")
# Regular gaps (s) and how many messages, quick and not.
PERIODIC = {"P10ms": (0.01, 40, 500), "P100ms": (0.1, 12, 100), "P1s": (1.0, 10, 30)}
POISSON_QUICK = 12   # Poisson arrivals' count in --quick (else 200)
LEARNING = 8   # first messages of a rhythm, left out of its reaction quantiles
DEFAULT_MODES = ("busy", "yield", "sleep:100", "linear:1,1000,1", "seed003", "degraded+seed003",
                 "backoff", "auto")
# A first look (--quick): the MPI's own waiting (busy and its first option) and every mode a
# user can choose (yield, a fixed sleep, the seed's linear ramp, backoff, auto, event); one
# rhythm (100 ms) and Poisson arrivals, 12 messages each (4 past the learning ones), beside
# C, A, D and the S-DSM patterns. A contender's seven experiments take about 5 s per MPI
# here, most of it the 100 ms rhythm's and the Poisson arrivals' own gaps.
QUICK_MODES = ("busy", "yield", "sleep:100", "seed003", "backoff", "auto", "event")
QUICK_EXPERIMENTS = tuple(e for e in EXPERIMENTS if e not in ("P10ms", "P1s"))

RESULT_COLUMNS = [
    "experiment", "mpi", "contender", "mode", "status", "wall_s", "cpu_s", "cpu_load",
    "messages", "throughput_msg_per_s", "reaction_p50_s", "reaction_p99_s",
    "reaction_burst_p50_s", "reaction_sparse_p50_s", "reaction_sparse_p99_s",
    "launch_s", "energy_J", "energy_kind", "place", "device_core_load",
]
# Experiments of two ranks: with a cluster they also run across two of its devices.
TWO_RANKS = ("A", "D", "P10ms", "P100ms", "P1s", "poisson")


@dataclass(frozen=True)
class Devices:
    """Two ranks across devices of an open cluster: the sender on the first, the receiver
    (the waiting rank) on the second, over the link between them."""

    cluster: Any                      # an open shoal.cluster Cluster
    names: tuple[str, str]
    receiver_quota: float = 1.0       # the share of a host core one receiver core gets
    place: dict | None = None         # the receiver device's calibration key

    @property
    def label(self) -> str:
        return f"{self.names[0]}->{self.names[1]}"

    @classmethod
    def of(cls, cluster) -> "Devices":
        """The first two devices of ``cluster``."""
        first, second = cluster.nodes[:2]
        if cluster.emulated is None:
            return cls(cluster, (first.name, second.name), 1.0, {})
        from shoal.wait import calibrate

        quota = calibrate.device_quota(cluster.emulated, second.profile.name)
        return cls(cluster, (first.name, second.name), quota,
                   calibrate.device_key(cluster.emulated, second.profile.name))


@dataclass(frozen=True)
class Contender:
    """One way of waiting: a libshoalwait mode, or the MPI's own option."""

    label: str
    mode: str | None                      # None: no library, MPI's own behaviour
    env: dict[str, str] = field(default_factory=dict)
    slack_ns: int | None = None           # None: the library's (1 ns); 0: the kernel's default


# 003's adaptive receive as the seed ran it: d_min = 0 (§3, "as in Experiment D"), 1 us
# at most in 1 ns steps, and the kernel's default timer slack (its Experiment C brings
# PR_SET_TIMERSLACK in as a separate, OS-dependent workaround).
NAMED = {"seed003": Contender("seed003", "linear:0,1000,1", slack_ns=0)}
# Seed 003 Experiment B (Figures 2b, 2d): the adaptive receiver's CPU load between bursts.
SEED003_EXPERIMENT_B = "about 20 % of a core on ARM (Odroid XU4, Raspberry Pi 3B+), under 10 % on a Core i7"


# "degraded+X": contender X with the MPI's Degraded knob also set (the first of its module's
# ``wait_knobs``; an MPI without a yield-when-idle names its nearest knob first, see its
# module): "degraded+seed003" is seed 003's Adaptive Degraded, its adaptive receive with
# the MPI yielding whenever a test finds nothing.
DEGRADED_PLUS = "degraded+"


def degraded_env(mpi: MPIInstall) -> dict[str, str]:
    """The environment of the MPI's Degraded mode (its first wait knob; none known: {})."""
    knobs = list(mpi.impl.wait_knobs.values())
    return dict(knobs[0]) if knobs else {}


def contender_names(text: str) -> str:
    """A mode or a named contender, validated (``seed003``, a libshoalwait mode, or either
    after ``degraded+``)."""
    if text.startswith(DEGRADED_PLUS):
        return DEGRADED_PLUS + contender_names(text[len(DEGRADED_PLUS):])
    return text if text in NAMED else parse_mode(text).text


def contender_for(label: str, mpi: MPIInstall) -> Contender:
    """The contender a validated name stands for on this MPI."""
    if label.startswith(DEGRADED_PLUS):
        inner = contender_for(label[len(DEGRADED_PLUS):], mpi)
        return Contender(label, inner.mode, {**inner.env, **degraded_env(mpi)}, inner.slack_ns)
    return NAMED[label] if label in NAMED else Contender(parse_mode(label).text, label)


def contenders(mpi: MPIInstall, modes: tuple[str, ...] = DEFAULT_MODES,
               native: bool = True, quick: bool = False) -> list[Contender]:
    """The modes, then the MPI's own options (quick: only its first, the seed's Degraded)."""
    found = [contender_for(m, mpi) for m in modes]
    if native:
        knobs = list(mpi.impl.wait_knobs.items())
        found += [Contender(label, None, env) for label, env in knobs[:1 if quick else None]]
    return found


def scenario(experiment: str, quick: bool) -> tuple[int, list[str]]:
    """(ranks, program arguments) of one experiment."""
    if experiment == "A":
        return 2, ["burst", "--cycles", "3" if quick else "6", "--burst", "10",
                   "--pause", "0.2" if quick else "1.0", "--sample", "0.05"]
    if experiment == "D":
        if quick:   # coarser: x1.25 from 1 us to 20 ms
            return 2, ["gaps", "--start", "1e-6", "--factor", "1.25", "--max", "0.02"]
        return 2, ["gaps", "--start", "1e-9", "--factor", "1.05", "--max", "0.13"]
    if experiment in PERIODIC:
        gap, quick_count, count = PERIODIC[experiment]
        return 2, ["gaps", "--fixed", str(gap), "--count", str(quick_count if quick else count),
                   "--size", "8"]
    if experiment == "poisson":
        return 2, ["gaps", "--poisson", "0.1", "--seed", "1", "--count",
                   str(POISSON_QUICK) if quick else "200", "--size", "8"]
    if experiment == "full":
        return 3, ["full", "--writes", "300" if quick else "2000"]
    if experiment == "burst":
        return 3, ["burstdsm", "--cycles", "2" if quick else "5", "--writes",
                   "200" if quick else "1000", "--pause", "0.1" if quick else "0.5"]
    if experiment == "lock":
        return 3, ["lock", "--cycles", "2" if quick else "5", "--hold", "0.1" if quick else "0.5"]
    raise ShoalError(f"unknown waitlab experiment '{experiment}'; use {', '.join(EXPERIMENTS)}")


def run_program(mpi: MPIInstall, contender: Contender, ranks: int, args: list[str],
                timeout_s: float = 300, telemetry_dir: Path | None = None,
                devices: Devices | None = None) -> tuple[dict[str, Any], float, float]:
    """Run one scenario (on this host, or one rank on each of ``devices``); return (its JSON
    result, start, end monotonic times). With ``telemetry_dir`` the library writes its rank
    files there."""
    from shoal.mpi import build   # the compiler cache: not needed for `shoal --help`

    exe = build.build("waittests", mpi)
    argv = [str(exe), *args]
    if devices is None:
        job = Job(mpi, ranks, argv, rank_env=dict(contender.env))
    else:   # the receivers probe MPI_ANY_SOURCE
        job = devices.cluster.job(mpi, ranks, argv, ranks_per_node=1, rank_env=dict(contender.env),
                                  names=list(devices.names[:ranks]), wildcard=True)
    if contender.mode is not None:
        job = apply(job, contender.mode, telemetry_dir, slack_ns=contender.slack_ns,
                    place=devices.place if devices else None)
    t0 = time.monotonic()
    try:
        done = job.run(timeout=timeout_s)
    except proc.CommandTimeout as exc:
        raise ShoalError(f"{args[0]} under {contender.label} did not finish in {timeout_s:.0f} s") from exc
    t1 = time.monotonic()
    found = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    # Whole-process lines (--process-cpu 1) come after MPI_Finalize, in any order among ranks.
    lines = [ln for ln in found if "process_rank" not in ln]
    if done.returncode != 0 or not lines:
        first = next((ln for ln in done.stderr.splitlines() if ln.strip()), "no output")
        raise ShoalError(f"{args[0]} under {contender.label} failed "
                         f"(exit {done.returncode}): {first.strip()}")
    processes = {ln["process_rank"]: ln for ln in found if "process_rank" in ln}
    return ({**lines[0], "process": processes} if processes else lines[0]), t0, t1


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    import numpy as np

    return float(np.quantile(np.asarray(values), q))


def summarize(experiment: str, data: dict[str, Any]) -> dict[str, Any]:
    """The results row of one run (CPU of the waiting rank, reaction times)."""
    row: dict[str, Any] = {"wall_s": data["wall_s"]}
    if experiment in ("A", "D") or experiment in PERIODIC or experiment == "poisson":
        row["cpu_s"] = data["cpu_s"]
        row["messages"] = data.get("received", data.get("count"))
    else:
        row["cpu_s"] = data["server_cpu_s"]
        row["messages"] = data["messages"]
        row["throughput_msg_per_s"] = data["messages"] / data["wall_s"]
    row["cpu_load"] = row["cpu_s"] / data["wall_s"] if data["wall_s"] > 0 else None
    if experiment == "D":
        gaps, reaction = data["gap_s"], data["reaction_s"]
        row["reaction_p50_s"] = _quantile(reaction, 0.5)
        row["reaction_p99_s"] = _quantile(reaction, 0.99)
        row["reaction_burst_p50_s"] = _quantile([r for g, r in zip(gaps, reaction) if g < 10e-6], 0.5)
        sparse = [r for g, r in zip(gaps, reaction) if g >= 1e-3]
        row["reaction_sparse_p50_s"] = _quantile(sparse, 0.5)
        row["reaction_sparse_p99_s"] = _quantile(sparse, 0.99)
    elif experiment in PERIODIC or experiment == "poisson":
        steady = data["reaction_s"][LEARNING:]
        row["reaction_p50_s"] = _quantile(steady, 0.5)
        row["reaction_p99_s"] = _quantile(steady, 0.99)
    return row


def _energy(session, t0: float, t1: float) -> tuple[float | None, str | None]:
    if session is None:
        return None, None
    rows = [r for r in session.energy_between(t0, t1)
            if not r["part_of"] and r["energy_J"] is not None]
    if not rows:
        return None, None
    return sum(r["energy_J"] for r in rows), "+".join(sorted({r["kind"] for r in rows}))


def run_lab(run: Run, mpis: list[MPIInstall], experiments: tuple[str, ...],
            modes: tuple[str, ...] = DEFAULT_MODES, quick: bool = False, native: bool = True,
            power_session=None, on_done: Callable[[dict[str, Any]], None] | None = None,
            devices: Devices | None = None) -> list[dict]:
    """Run every experiment under every contender (on this host, or across ``devices``: then
    the two-rank experiments only, and each row also holds the receiver's share of a device
    core); append rows as they finish.

    Tables: ``results`` (one row per experiment, MPI and contender),
    ``load`` (experiment A's CPU load series), ``reaction`` (experiment D's
    per-message reaction times). A failed run is a row with its status and
    the lab goes on.
    """
    experiments = mpi_experiments(experiments)
    if devices is not None:
        experiments = tuple(e for e in experiments if e in TWO_RANKS)
    for e in experiments:
        scenario(e, quick)           # reject unknown names before running anything
    place = devices.label if devices else "host"
    done = {(r["experiment"], r["mpi"], r["contender"], r.get("place") or "host") for r in run.rows("results")}
    rows = []
    for mpi in mpis:
        for contender in contenders(mpi, modes, native, quick):
            for experiment in experiments:
                key = (experiment, mpi.name, contender.label, place)
                if key in done:
                    continue
                ranks, args = scenario(experiment, quick)
                row: dict[str, Any] = {"experiment": experiment, "mpi": mpi.name,
                                       "contender": contender.label,
                                       "mode": contender.mode or "", "status": "ok", "place": place}
                try:
                    data, t0, t1 = run_program(mpi, contender, ranks, args, devices=devices)
                except ShoalError as exc:
                    row["status"] = f"failed: {exc}"
                else:
                    row.update(summarize(experiment, data))
                    if devices is not None and row["cpu_load"] is not None:
                        row["device_core_load"] = row["cpu_load"] / devices.receiver_quota
                    # Energy covers the whole launch (mpiexec start to exit).
                    row["launch_s"] = t1 - t0
                    row["energy_J"], row["energy_kind"] = _energy(power_session, t0, t1)
                    tag = {"experiment": experiment, "mpi": mpi.name, "contender": contender.label,
                           "place": place}
                    if experiment == "A":
                        run.append("load", [{**tag, "t_s": t, "load": ld}
                                            for t, ld in zip(data["t_s"], data["load"])])
                    if experiment == "D":
                        run.append("reaction", [{**tag, "i": i, "gap_s": g, "reaction_s": r}
                                                for i, (g, r) in enumerate(zip(data["gap_s"],
                                                                               data["reaction_s"]))])
                run.append("results", [row], columns=RESULT_COLUMNS)
                rows.append(row)
                if on_done:
                    on_done(row)
    return rows


def mpi_experiments(experiments) -> tuple[str, ...]:
    """The experiments that launch MPI ranks (all but C)."""
    return tuple(e for e in experiments if e != "C")


def planned(mpis: list[MPIInstall], experiments, modes, native: bool, quick: bool = False) -> int:
    return sum(len(contenders(m, modes, native, quick)) for m in mpis) * len(mpi_experiments(experiments))


# ---------------------------------------------------------------- the command as a call
@dataclass
class LabRequest:
    """Which contenders, experiments and MPIs; ``modes`` and ``experiments`` as given (None:
    the defaults, or the quick ones)."""

    modes: str | None = None            # semicolon or comma list of modes and named contenders
    experiments: str | None = None      # comma list
    mpis: tuple[str, ...] = ()          # MPI names or paths
    native: bool = True                 # also each MPI's own wait options
    quick: bool = False
    power: str | None = None            # a power spec: energy of each launch
    out: Path | None = None
    resume: Path | None = None          # an interrupted lab to continue
    emulate: str | None = None          # C inside these emulated devices, two-rank experiments across them
    cluster: str | None = None          # the same with an inventory file


@dataclass
class LabPlan:
    """A request checked: its contenders, experiments and MPIs decided; nothing run yet."""

    request: LabRequest
    modes: tuple[str, ...]
    experiments: tuple[str, ...]
    mpis: list[MPIInstall]
    places: int = 1                     # where Experiment C sweeps: the host and one device per profile

    @property
    def total(self) -> int:
        """Launches (and Experiment C's conditions) the lab makes (a resumed lab skips those it has)."""
        from shoal.wait import experiment_c

        sweeps = experiment_c.steps(self.places) if "C" in self.experiments else 0
        launches = planned(self.mpis, self.experiments, self.modes, self.request.native, self.request.quick)
        if self.request.emulate or self.request.cluster:   # on this host, then across two devices
            launches *= 2
        return sweeps + launches


@dataclass
class LabResult:
    """The run with its ``results`` rows, and which of them failed."""

    run: Run
    results: list[dict[str, Any]]

    sleep: list[dict[str, Any]] = field(default_factory=list)   # Experiment C's summary rows

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.results + self.sleep if r["status"].startswith("failed")]


def parse_modes(text: str | None, quick: bool = False) -> tuple[str, ...]:
    """Contenders from ``--modes``: split on ';' when given, else on ',' keeping numeric
    parameter runs with their mode ("linear:1,1000,1" holds commas)."""
    if not text:
        return QUICK_MODES if quick else DEFAULT_MODES
    if ";" in text:
        items = [m for m in text.split(";") if m]
    else:
        items = []
        for part in text.split(","):
            if items and part and (part[0].isdigit() or part[0] == "."):
                items[-1] += "," + part
            elif part:
                items.append(part)
    return tuple(contender_names(m) for m in items)


def plan(request: LabRequest) -> LabPlan:
    """Check every input: contenders, experiments, MPIs."""
    from shoal.mpi import discover

    modes = parse_modes(request.modes, request.quick)
    across = request.emulate or request.cluster
    experiments = (tuple(e for e in request.experiments.split(",") if e) if request.experiments else
                   ("C", "A") if across else QUICK_EXPERIMENTS if request.quick else EXPERIMENTS)
    for e in mpi_experiments(experiments):
        scenario(e, request.quick)
    places = 1
    if across:
        from shoal.cluster import rules
        from shoal.cluster.session import emulated_inventory
        from shoal.wait import sleepaccuracy

        rules.one_cluster(request.emulate, request.cluster, None)
        option = "--emulate" if request.emulate else "--cluster"
        inv = emulated_inventory(request.emulate, request.cluster, None, None)
        others = [e for e in mpi_experiments(experiments) if e not in TWO_RANKS]
        if others:
            raise ShoalError(f"{option} runs C inside the devices and {', '.join(TWO_RANKS)} across two "
                             f"of them, not {', '.join(others)}; leave {option} out for those")
        if mpi_experiments(experiments) and len(inv.nodes) < 2:
            raise ShoalError(f"{option}: {', '.join(mpi_experiments(experiments))} put the sender and the "
                             "receiver on two devices; give at least two, e.g. --emulate 2xodroid-xu4")
        if "C" in experiments and inv.runs_here:
            places += len(sleepaccuracy.one_of_each_profile(inv))
    # Experiment C alone launches no MPI: it needs none installed.
    mpis = discover.resolve_each(request.mpis) if mpi_experiments(experiments) else []
    return LabPlan(request, modes, experiments, mpis, places)


def run(lab: LabPlan, argv: list[str],
        on_done: Callable[[dict[str, Any]], None] | None = None) -> LabResult:
    """Run the planned lab (or the rest of a resumed one), with its figures, kept as a run; an
    interrupted lab keeps what it finished and says how to continue."""
    from shoal.errors import Interrupted

    request = lab.request
    session = None
    if request.power:
        from shoal import power

        session = power.open_session(request.power).start()
    if request.resume:
        record = Run.open(request.resume)
    else:
        from shoal.hostfacts import collect

        record = Run.create("waitlab", argv, request.out,
                            mpis=[m.describe() for m in lab.mpis], modes=list(lab.modes),
                            experiments=list(lab.experiments), quick=request.quick,
                            host=collect(), power=request.power)
    try:
        if "C" in lab.experiments:
            _experiment_c(record, request, on_done)
        run_lab(record, lab.mpis, lab.experiments, lab.modes, request.quick, request.native,
                session, on_done=on_done)
        if (request.emulate or request.cluster) and mpi_experiments(lab.experiments):
            _across_devices(record, lab, session, on_done)
    except KeyboardInterrupt:
        record.finish("interrupted", reason=proc.stop_reason())
        raise Interrupted(f"interrupted; finished runs are in {record.path} "
                          f"(continue with --resume {record.path})") from None
    finally:
        if session is not None:
            record.append("power", session.new_samples())
            session.stop()
    from shoal.wait import plots   # matplotlib: only once there is something to plot

    figures = plots.plot_all(record)
    result = LabResult(record, record.rows("results"), record.rows("sleep_summary"))
    record.finish("complete" if not result.failed else "partial",
                  figures=[f.name for f in figures], failed=len(result.failed))
    return result


def _across_devices(record: Run, lab: LabPlan, power_session,
                    on_done: Callable[[dict[str, Any]], None] | None) -> list[dict[str, Any]]:
    """The two-rank experiments again, the sender on the cluster's first device and the
    receiver on its second, over their link (seed 003 ran A and B across two ARM boards)."""
    from shoal import cluster as clusters

    request = lab.request
    with clusters.open(emulate=request.emulate, inventory=request.cluster) as where:
        devices = Devices.of(where)
        if where.emulated is not None:
            record.update_manifest(emulated=where.emulated.describe())
        record.update_manifest(across_devices={"sender": devices.names[0], "receiver": devices.names[1],
                                               "receiver_quota": devices.receiver_quota})
        return run_lab(record, lab.mpis, lab.experiments, lab.modes, request.quick, request.native,
                       power_session, on_done=on_done, devices=devices)


def _experiment_c(record: Run, request: LabRequest,
                  on_done: Callable[[dict[str, Any]], None] | None) -> list[dict[str, Any]]:
    """Experiment C on this host, then inside one emulated device of each profile."""
    from shoal.wait import experiment_c, kernelclock, sleepaccuracy

    sweep = sleepaccuracy.QUICK if request.quick else sleepaccuracy.SEED
    record.update_manifest(kernel_clock=kernelclock.facts(), sleep_sweep={
        "longest_s": sweep.longest_s, "step_s": sweep.step_s, "repeats": sweep.repeats})
    rows = experiment_c.run_experiment(record, [sleepaccuracy.host_place()], sweep, request.quick, on_done)
    if request.emulate or request.cluster:
        from shoal import cluster as clusters
        from shoal.cluster.session import emulated_inventory

        inv = emulated_inventory(request.emulate, request.cluster, None, None)
        if not inv.runs_here:
            return rows   # real hosts: the sweep runs where shoal runs (shoal wait calibrate there)
        # One device sweeps at a time: the dilation need only fit the largest alone.
        alone = [(name,) for name in sleepaccuracy.one_of_each_profile(inv)]
        with clusters.open(emulate=request.emulate, inventory=request.cluster, at_once=alone) as devices:
            record.update_manifest(emulated=devices.emulated.describe())
            rows += experiment_c.run_experiment(record, sleepaccuracy.device_places(devices.emulated),
                                                sweep, request.quick, on_done)
    return rows
