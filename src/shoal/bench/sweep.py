"""Run the native benchmark program over a list of points, keeping every result.

One launch of the program measures many points and prints one JSON record
per finished point; rows are appended to the run directory as each record
arrives. If the job dies or a point exceeds its timeout, the job is killed,
the point is recorded in ``failures.csv`` and a new job continues with the
points after it. ``--resume`` passes only the points not yet in
``results.csv``.
"""

from __future__ import annotations

import collections
import json
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from shoal import proc
from shoal.bench import records
from shoal.errors import Interrupted, ShoalError
from shoal.execute.session import DeviceClock
from shoal.mpi.base import Death
from shoal.mpi.launch import Job, startup_grace_s
from shoal.runs.store import Run

@dataclass
class Options:
    """How each point is measured (passed to the native program)."""

    ci: float = 0.02
    budget_s: float = 1.0
    min_reps: int = 10
    max_reps: int = 100000
    rep_time_s: float | None = None
    warmup: int | None = None
    flush_B: int = 0
    check: bool = False
    inner: int | None = None
    point_timeout_s: float | None = None

    def program_args(self) -> list[str]:
        args = ["--ci", repr(self.ci), "--budget", repr(self.budget_s),
                "--min-reps", str(self.min_reps), "--max-reps", str(self.max_reps)]
        if self.rep_time_s is not None:
            args += ["--rep-time", repr(self.rep_time_s)]
        if self.warmup is not None:
            args += ["--warmup", str(self.warmup)]
        if self.flush_B:
            args += ["--flush", str(self.flush_B)]
        if self.inner:
            args += ["--inner", str(self.inner)]
        if self.check:
            args.append("--check")
        return args

    @property
    def timeout_s(self) -> float:
        """Longest a single point may take before it is declared hung."""
        if self.point_timeout_s is not None:
            return self.point_timeout_s
        return max(30.0, 4.0 * self.budget_s + 20.0)

    def describe(self) -> dict[str, Any]:
        return {"ci_target": self.ci, "budget_s": self.budget_s, "min_reps": self.min_reps,
                "max_reps": self.max_reps, "rep_time_s": self.rep_time_s, "warmup": self.warmup,
                "flush_B": self.flush_B, "check": self.check, "inner": self.inner,
                "point_timeout_s": self.timeout_s}


@dataclass(frozen=True)
class Point:
    test: str
    size_B: int


@dataclass
class Config:
    """Where one set of points runs: a label, its node and rank counts, and a job maker."""

    label: str
    nodes: int
    ranks: int
    make_job: Callable[[list[str]], Job]
    wait_mode: str = ""
    # Devices the ranks run on (empty: this machine); energy is summed over them.
    node_names: list[str] = field(default_factory=list)
    # Host time to device time (an emulated cluster's dilation).
    clock: DeviceClock = field(default_factory=DeviceClock)
    # Whether the switches the nodes' links go through are charged (not to a lone reference machine).
    with_shared: bool = True
    # A host of the job that stopped answering ("ADDRESS: why"), else None (Session.lost).
    lost: Callable[[], "str | None"] = lambda: None


class EnergyMeter(Protocol):
    def energy_between(self, t0_mono: float, t1_mono: float, nodes: list[str],
                       with_shared: bool = True) -> dict[str, Any] | None: ...


@dataclass
class Events:
    """Callbacks the CLI uses for progress; all optional."""

    point_started: Callable[[Config, Point], None] = lambda c, p: None
    point_done: Callable[[Config, dict[str, Any]], None] = lambda c, row: None
    point_failed: Callable[[Config, Point, str], None] = lambda c, p, reason: None
    point_skipped: Callable[[Config, Point, str], None] = lambda c, p, reason: None


@dataclass
class Sweep:
    run: Run
    program: Path
    options: Options
    events: Events = field(default_factory=Events)
    energy: EnergyMeter | None = None
    # Emulated clusters: judges whether the host gave the devices their CPU (cluster.slack).
    slack: Any = None
    # Asked after a failed point: raises ShoalError if a host is gone (ssh clusters), so a
    # lost host ends the run at once instead of failing every point after it.
    hosts_ready: Callable[[], None] | None = None

    def finished_ids(self) -> set[str]:
        return {r["point_id"] for r in self.run.rows("results")} | {
            r["point_id"] for r in self.run.rows("skipped")}

    def run_config(self, config: Config, points: list[Point]) -> None:
        """Measure every point of ``points`` not already finished in this run."""
        done = self.finished_ids()
        todo = [p for p in points
                if self._pid(config, p) not in done]
        launches_without_progress = 0
        while todo:
            finished, failure = self._launch(config, todo)
            todo = todo[finished:]
            if failure is None:
                if todo:  # the program ended cleanly without reporting everything
                    failure = ("incomplete", "the benchmark program exited before this point")
                else:
                    break
            if not todo:  # every point was measured: the job failed (or hung) on its way out
                self._note_late_failure(config, *failure)
                break
            if finished == 0:
                launches_without_progress += 1
            else:
                launches_without_progress = 0
            failed_point = todo[0]
            self._record_failure(config, failed_point, *failure)
            todo = todo[1:]
            if self.hosts_ready is not None:
                self.hosts_ready()
            if launches_without_progress >= 3:
                raise ShoalError(
                    f"the benchmark program failed {launches_without_progress} times in a row "
                    f"without finishing a point ({failure[0]}: {failure[1]}); see "
                    f"{self.run.table_path('failures')}; finished points are kept")

    def skip(self, config: Config, points: list[tuple[Point, str]]) -> None:
        """Record points that cannot run in this configuration, with the reason."""
        done = self.finished_ids()
        for point, reason in points:
            if self._pid(config, point) not in done:
                self._record_skip(config, point, reason)

    @staticmethod
    def _pid(config: Config, point: Point) -> str:
        return records.point_id(config.label, config.nodes, config.ranks, point.test, point.size_B)

    # -- one launch -------------------------------------------------------------
    def _launch(self, config: Config, todo: list[Point]) -> tuple[int, tuple[str, str] | None]:
        """Run one job over ``todo``; return (points finished, failure or None)."""
        argv = [str(self.program), "--points",
                ",".join(f"{p.test}:{p.size_B}" for p in todo), *self.options.program_args()]
        job = config.make_job(argv)
        process = job.start(stdout=proc.PIPE, stderr=proc.TAIL)
        hello: dict[str, Any] = {}
        # What the launcher printed on stdout (some report dead processes there).
        said: collections.deque[str] = collections.deque(maxlen=40)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(process.stdout, lines.put), daemon=True).start()
        finished = 0
        timeout_s = config.clock.timeout(self.options.timeout_s)
        # Starting MPI runs on the devices' CPUs too: dilated like the points.
        deadline = time.monotonic() + config.clock.timeout(startup_grace_s(config.ranks)) + timeout_s
        if finished < len(todo):
            self.events.point_started(config, todo[0])
        try:
            while True:
                try:
                    line = lines.get(timeout=max(0.05, min(deadline - time.monotonic(), proc.STOP_POLL_S)))
                except queue.Empty:
                    lost = config.lost()
                    if lost:
                        process.stop()
                        return finished, ("lost", f"a host stopped answering: {lost}")
                    if time.monotonic() < deadline:
                        continue
                    process.stop()
                    return finished, ("timeout", f"no result within {timeout_s:.0f} s")
                if line is None:  # stdout closed: the job ended
                    code = process.wait()
                    if code != 0 and finished < len(todo):
                        deaths = job.mpi.impl.deaths([*process.stderr_kept(), *said])
                        return finished, ("crashed", _crash_detail(process, code, deaths, hello))
                    return finished, None
                record = _parse(line)
                if record is None:
                    said.append(line)
                    continue
                kind = record.get("type")
                if kind == "hello":
                    # MPI is up: from now on each point has its own timeout.
                    deadline = time.monotonic() + timeout_s
                    hello = record
                    self._note_hello(config, record)
                elif kind in ("point", "skip"):
                    if finished >= len(todo):
                        continue
                    point = todo[finished]
                    if (record.get("test"), record.get("size_B")) != (point.test, point.size_B):
                        process.stop()
                        return finished, ("protocol", f"expected {point.test}:{point.size_B}, got "
                                          f"{record.get('test')}:{record.get('size_B')}")
                    if kind == "point":
                        self._record_point(config, record)
                    else:
                        self._record_skip(config, point, record.get("reason", ""))
                    finished += 1
                    deadline = time.monotonic() + timeout_s
                    if finished < len(todo):
                        self.events.point_started(config, todo[finished])
                elif kind == "error":
                    process.stop()
                    return finished, ("error", str(record.get("message", "")))
        except KeyboardInterrupt:
            process.stop()
            self.run.finish("interrupted", reason=proc.stop_reason())
            raise Interrupted(f"interrupted; finished points are in {self.run.path} "
                              f"(continue with --resume {self.run.path})") from None
        finally:
            process.stop()   # also what the job left behind after mpiexec exited

    # -- writing ----------------------------------------------------------------
    def _note_hello(self, config: Config, record: dict[str, Any]) -> None:
        seen = self.run.manifest.get("jobs", {})
        key = job_key(config.label, config.nodes, config.ranks)
        if key not in seen:
            seen[key] = {"ranks": record.get("ranks"), "hosts": record.get("hosts"),
                         "mpi_library": record.get("mpi_library"), "timer": record.get("timer"),
                         "timer_resolution_s": record.get("timer_resolution_s")}
            self.run.update_manifest(jobs=seen)

    def _record_point(self, config: Config, record: dict[str, Any]) -> None:
        record = config.clock.record(record, records.TIME_KEYS)
        row = records.result_row(record, config.label, config.nodes, config.wait_mode,
                                 config.clock.dilation)
        if self.energy is not None and row["t_start_mono_s"] != "":
            records.add_energy(row, self.energy.energy_between(
                float(row["t_start_mono_s"]), float(row["t_end_mono_s"]), config.node_names,
                config.with_shared), config.clock)
        if self.slack is not None and row["t_start_mono_s"] != "":
            from shoal.cluster import slack

            row.update(slack.row_columns(self.slack.between(float(row["t_start_mono_s"]),
                                                            float(row["t_end_mono_s"]))))
        self.run.append("samples", records.sample_rows(row["point_id"], record["samples_s"]),
                        columns=records.SAMPLE_COLUMNS)
        self.run.append("results", [row], columns=records.RESULT_COLUMNS)
        self.events.point_done(config, row)

    def _record_skip(self, config: Config, point: Point, reason: str) -> None:
        pid = self._pid(config, point)
        self.run.append("skipped", [{"point_id": pid, "config": config.label, "nodes": config.nodes,
                                     "ranks": config.ranks, "test": point.test,
                                     "size_B": point.size_B, "reason": reason}])
        self.events.point_skipped(config, point, reason)

    def _note_late_failure(self, config: Config, reason: str, detail: str) -> None:
        """A job that failed after its last point: its points stand; the manifest says so."""
        late = self.run.manifest.get("jobs_failed_after_points", [])
        late.append({"job": job_key(config.label, config.nodes, config.ranks), "reason": reason, "detail": detail})
        self.run.update_manifest(jobs_failed_after_points=late)

    def _record_failure(self, config: Config, point: Point, reason: str, detail: str) -> None:
        pid = self._pid(config, point)
        self.run.append("failures", [{
            "point_id": pid, "config": config.label, "nodes": config.nodes, "ranks": config.ranks,
            "test": point.test, "size_B": point.size_B, "reason": reason, "detail": detail,
        }], columns=records.FAILURE_COLUMNS)
        self.events.point_failed(config, point, f"{reason}: {detail}")


def _crash_detail(process: proc.Process, code: int, deaths: list[Death] | None = None,
                  hello: dict[str, Any] | None = None) -> str:
    """What a crashed job said: the first error lines of any of its processes (the launcher's
    or a rank's, where the failure began), then the launcher's last lines. ``deaths``: the
    processes the launcher reported dead, named by rank and device with the job's ``hello``
    ("rank 1 on stb2 (pid 812) killed by SIGSEGV"). One killed by a signal comes first,
    since a rank that dies that way writes nothing of it; an exit status only where no
    process wrote an error line."""
    first, last = process.stderr_first_errors(), process.stderr_tail()
    hosts, pids = (hello or {}).get("hosts"), (hello or {}).get("pids")
    killed = [d for d in deaths or [] if d.signal is not None]
    # SIGKILL and SIGTERM are how launchers clear the rest of a job once one process died
    # (and some report those too, in no set order): another signal is the cause.
    killed.sort(key=lambda d: d.signal in (signal.SIGKILL, signal.SIGTERM))
    if killed:
        first = " | ".join(x for x in (killed[0].describe(hosts, pids), first) if x)
    elif deaths and not first:
        first = deaths[0].describe(hosts, pids)
    if first and last and last.endswith(first.rsplit(" | ", 1)[-1]) and first in last:
        return last
    parts = [f"first: {first}"] if first else []
    parts += [f"last: {last}"] if last else []
    return "; ".join(parts) or f"exit status {code}"


def _pump(stream, put: Callable[[Any], None]) -> None:
    for line in stream:
        put(line.rstrip("\n"))
    put(None)


def _parse(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None  # MPI libraries sometimes print warnings on stdout
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def job_key(label: str, nodes: int, ranks: int) -> str:
    """How a configuration's job facts are keyed in the manifest's ``jobs``."""
    return f"{label}/{nodes}/{ranks}"
