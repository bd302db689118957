"""Run a stage file without systemd, on a boot timeline, with systemd's socket passing.

Each data edge is a listening AF_UNIX socket the runner owns, as systemd owns
a socket unit's: a sender connects and writes at once (blocking only when the
buffer is full), and the traffic starts the receiver, which gets the
listening sockets as fds 3.. with ``LISTEN_FDS``, ``LISTEN_FDNAMES`` and its
own ``LISTEN_PID`` (set by a ``/bin/sh`` trampoline that ``exec``s the stage,
so the pid is the stage's). Unit dependencies are timed events: unit U is
ready at ``timeline[U]`` seconds after the start (userspace start), and no
stage starts before ``systemd_ready_s``. A need without data is met when that
stage exits with status 0.

Every stage runs in its own session, with stdout and stderr in a log; at the
end (all sinks reported, a failure, or the deadline) whatever still runs is
killed by process group and the socket directory is removed.
"""

from __future__ import annotations

import fcntl
import os
import selectors
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import asdict, dataclass, field

from shoal import verbose
from shoal.errors import ShoalError
from shoal.pallex import protocol
from shoal.pallex.stagefile import App

SH = "/bin/sh"
_TRAMPOLINE = 'LISTEN_PID=$$; export LISTEN_PID; exec "$@"'
GRACE_S = 2.0  # after the last sink reported, time for senders to see their data read


@dataclass
class StageRecord:
    """One stage of one cycle; times in seconds from the start of the cycle."""

    name: str
    ready_s: float  # its units are ready (and systemd runs)
    trigger_s: float | None = None  # first data waiting on an input
    start_s: float | None = None
    end_s: float | None = None
    pid: int | None = None
    exit_code: int | None = None
    cpu_s: float | None = None
    status: str = "waiting"  # waiting | running | ok | failed | killed | not started
    reason: str = ""
    log: str = ""
    report: dict = field(default_factory=dict)

    def describe(self) -> dict:
        return asdict(self)


@dataclass
class CycleResult:
    app: str
    mode: str
    outcome: str  # done | failed | deadline
    t0_mono: float
    t0_wall: float
    end_s: float  # the cycle's end: last sink report, failure, or deadline
    stages: dict[str, StageRecord]
    done_reports: list[dict]
    edges: list[dict]
    problems: list[str]

    def describe(self) -> dict:
        return {"app": self.app, "mode": self.mode, "outcome": self.outcome, "t0_mono": self.t0_mono,
                "t0_wall": self.t0_wall, "end_s": self.end_s,
                "stages": {k: v.describe() for k, v in self.stages.items()},
                "done_reports": self.done_reports, "edges": self.edges, "problems": self.problems}


class Runner:
    """One duty cycle of ``app``.

    ``timeline`` maps units to ready times (s); ``systemd_ready_s`` is when
    the service manager can start anything; ``not_before_s`` holds every stage
    back (the baseline: the application starts when userspace is done).
    ``eager`` starts receivers when their units are ready instead of at their
    first data. ``params`` fill ``{NAME}`` in commands.
    """

    def __init__(self, app: App, timeline: dict[str, float] | None = None, *, systemd_ready_s: float = 0.0,
                 not_before_s: float = 0.0, mode: str = "pallex", eager: bool = False,
                 python: str | None = None, params: dict[str, str] | None = None,
                 extra_env: dict[str, str] | None = None, workdir: str | None = None) -> None:
        self.app = app
        self.timeline = dict(timeline or {})
        self.systemd_ready_s = systemd_ready_s
        self.not_before_s = not_before_s
        self.mode = mode
        self.eager = eager
        self.python = python
        self.params = {**app.params, **(params or {})}
        self.extra_env = dict(extra_env or {})
        self._workdir_parent = workdir

    def ready_s(self, stage: str) -> float:
        units = self.app.stages[stage].units
        times = [self.timeline.get(u, self.systemd_ready_s) for u in units]
        return max([self.systemd_ready_s, self.not_before_s, *times])

    # -- the cycle -------------------------------------------------------------------
    def run(self) -> CycleResult:
        work = tempfile.mkdtemp(prefix="pallex-", dir=self._workdir_parent)
        sel = selectors.DefaultSelector()
        listeners: dict[str, socket.socket] = {}
        pidfds: dict[int, str] = {}
        records = {s: StageRecord(s, self.ready_s(s)) for s in self.app.order}
        done_reports: list[dict] = []
        problems: list[str] = []
        sinks = set(self.app.sinks())
        try:
            for edge in self.app.edges:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.bind(os.path.join(work, f"{edge.name}.sock"))
                sock.listen(16)
                listeners[edge.name] = sock
            done = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            done.bind(os.path.join(work, "done.sock"))
            done.listen(16)
            sel.register(done, selectors.EVENT_READ, ("done", None))
            for edge in self.app.edges:
                sel.register(listeners[edge.name], selectors.EVENT_READ, ("data", edge))
            t0 = time.monotonic()
            t0_wall = time.time()
            outcome, end_s, last_report = "", None, None
            while True:
                now = time.monotonic() - t0
                for name in self.app.order:
                    if records[name].status == "waiting":
                        self._maybe_start(name, records, now, work, t0, sel, listeners, pidfds)
                if any(r.status == "failed" for r in records.values()) and self.app.on_failure != "none":
                    outcome, end_s = "failed", now
                    break
                reported = {r.get("stage") for r in done_reports}
                if sinks <= reported:
                    if last_report is None:
                        last_report = now
                    if all(r.status != "running" for r in records.values()) or now - last_report > GRACE_S:
                        outcome, end_s = "done", last_report
                        break
                if all(r.status in ("ok", "failed", "not started", "killed") for r in records.values()):
                    outcome, end_s = "failed", now
                    problems.append("every stage ended but not every sink reported done")
                    break
                if now >= self.app.deadline_s:
                    outcome, end_s = "deadline", now
                    break
                wake = [self.app.deadline_s]
                wake += [r.ready_s for r in records.values() if r.status == "waiting" and r.ready_s > now]
                if last_report is not None:
                    wake.append(last_report + GRACE_S)
                for key, _ in sel.select(max(0.0, min(wake) - now)):
                    kind, what = key.data
                    if kind == "data":
                        rec = records[what.dst]
                        if rec.trigger_s is None:
                            rec.trigger_s = time.monotonic() - t0
                        sel.unregister(key.fileobj)  # systemd stops watching a socket whose service runs
                    elif kind == "done":
                        done_reports.extend(_read_done(done))
                    elif kind == "exit":
                        self._reap(what, records, sel, key.fileobj, pidfds, t0)
            self._end(records, outcome, end_s, problems, sel, pidfds, t0)
            for rec in records.values():
                out = _read_log(os.path.join(work, f"{rec.name}.log"))
                err = _read_log(os.path.join(work, f"{rec.name}.err"))
                rec.log = out + err
                reports = protocol.parse_reports(out)
                rec.report = reports[-1] if reports else {}
                if rec.status == "failed":
                    # Its error output first: a buffered stdout reaches the file after it.
                    said = last_error_line(err, rec.report) or last_error_line(out, rec.report)
                    if said:
                        rec.reason = f"{rec.reason}: {said}"
                    problems.append(f"stage {rec.name} failed: {rec.reason}")
            while True:  # reports that arrived while the last processes ended
                more = _read_done(done, block=False)
                if not more:
                    break
                done_reports.extend(more)
            edges = self._edge_summary(records, problems)
            return CycleResult(self.app.name, self.mode, outcome, t0, t0_wall, float(end_s), records,
                               done_reports, edges, problems)
        finally:
            for rec in records.values():
                if rec.status == "running" and rec.pid:
                    _kill_group(rec.pid)
            sel.close()
            for sock in listeners.values():
                sock.close()
            shutil.rmtree(work, ignore_errors=True)

    def _maybe_start(self, name, records, now, work, t0, sel, listeners, pidfds) -> None:
        rec = records[name]
        if now < rec.ready_s:
            return
        for need in self.app.ordering_needs(name):
            status = records[need].status
            if status in ("failed", "killed", "not started"):
                rec.status, rec.reason = "not started", f"needed stage {need} {status}"
                return
            if status != "ok":
                return
        inputs = self.app.inputs(name)
        if inputs and not self.eager and rec.trigger_s is None:
            return
        env = dict(os.environ)
        env.update(self.extra_env)
        env.update({"PALLEX_APP": self.app.name, "PALLEX_STAGE": name})
        for key in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "PALLEX_OUTPUTS", "PALLEX_DONE"):
            env.pop(key, None)
        outs = self.app.outputs(name)
        if outs:
            env["PALLEX_OUTPUTS"] = ",".join(f"{e.dst}={os.path.join(work, e.name + '.sock')}" for e in outs)
        if name in self.app.sinks():
            env["PALLEX_DONE"] = os.path.join(work, "done.sock")
        argv = self.app.stages[name].argv(self.python, self.params)
        fds = [listeners[e.name].fileno() for e in inputs]
        if fds:
            env["LISTEN_FDS"] = str(len(fds))
            env["LISTEN_FDNAMES"] = ":".join(e.src for e in inputs)
        for e in inputs:  # the receiver owns accepting now
            try:
                sel.unregister(listeners[e.name])
            except KeyError:
                pass
        rec.start_s = time.monotonic() - t0
        try:
            rec.pid = _spawn(argv, env, fds, os.path.join(work, name))
        except OSError as exc:
            rec.status, rec.reason, rec.end_s = "failed", f"cannot start {argv[0]}: {exc.strerror}", rec.start_s
            return
        rec.status = "running"
        pidfd = os.pidfd_open(rec.pid)
        pidfds[pidfd] = name
        sel.register(pidfd, selectors.EVENT_READ, ("exit", name))

    def _reap(self, name, records, sel, fd, pidfds, t0) -> None:
        rec = records[name]
        _, status, usage = os.wait4(rec.pid, 0)
        rec.end_s = time.monotonic() - t0
        rec.cpu_s = usage.ru_utime + usage.ru_stime
        sel.unregister(fd)
        pidfds.pop(fd, None)
        os.close(fd)
        _kill_group(rec.pid)  # anything the stage left behind in its session
        if os.WIFEXITED(status):
            rec.exit_code = os.WEXITSTATUS(status)
        else:
            rec.exit_code = -os.WTERMSIG(status)
        rec.status = "ok" if rec.exit_code == 0 else "failed"
        if rec.exit_code != 0:
            rec.reason = f"exit status {rec.exit_code}" if rec.exit_code > 0 else f"killed by signal {-rec.exit_code}"

    def _end(self, records, outcome, end_s, problems, sel, pidfds, t0) -> None:
        for fd, name in list(pidfds.items()):
            rec = records[name]
            _kill_group(rec.pid)
            self._reap(name, records, sel, fd, pidfds, t0)
            rec.status = "killed"
            rec.reason = {"deadline": f"still running at the deadline ({self.app.deadline_s:g} s)",
                          "failed": "still running when another stage failed"}.get(
                outcome, "still running after every sink reported")
            problems.append(f"stage {name}: {rec.reason}")
        for rec in records.values():
            if rec.status == "waiting":
                rec.status = "not started"
                rec.reason = rec.reason or ("its units were not ready" if rec.ready_s > end_s else
                                            "its data or needed stages never came")

    def _edge_summary(self, records, problems) -> list[dict]:
        out = []
        for edge in self.app.edges:
            sent = records[edge.src].report.get("sent", {}).get(edge.dst, {})
            got = records[edge.dst].report.get("received", {}).get(edge.src, {})
            row = {"from": edge.src, "to": edge.dst, "expected_bytes": edge.bytes,
                   "sent_bytes": sent.get("bytes"), "received_bytes": got.get("bytes"),
                   "identical": bool(sent) and bool(got) and sent.get("sha256") == got.get("sha256")}
            if sent and got and not row["identical"]:
                problems.append(f"data edge {edge.src} -> {edge.dst}: received bytes differ from those sent")
            out.append(row)
        return out


def _spawn(argv: list[str], env: dict[str, str], fds: list[int], log: str) -> int:
    """posix_spawn through /bin/sh so LISTEN_PID is the stage's own pid; fds become 3, 4, ...;
    its output goes to LOG.log and its error output to LOG.err."""
    # Copies above every target number first, so no dup2 overwrites a source still needed.
    floor = 3 + len(fds)
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd in fds]
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
    log_fd, err_fd = os.open(log + ".log", flags, 0o600), os.open(log + ".err", flags, 0o600)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        actions = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, log_fd, 1),
                   (os.POSIX_SPAWN_DUP2, err_fd, 2)]
        actions += [(os.POSIX_SPAWN_DUP2, fd, 3 + i) for i, fd in enumerate(moved)]
        full = [SH, "-c", _TRAMPOLINE if fds else 'exec "$@"', "pallex-stage", *argv]
        verbose.show(argv, {k: v for k, v in env.items() if k.startswith(("PALLEX_", "LISTEN_FD"))})
        return os.posix_spawn(SH, full, env, file_actions=actions, setsid=True)
    finally:
        for fd in (log_fd, err_fd, null, *moved):
            os.close(fd)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_done(done: socket.socket, block: bool = True) -> list[dict]:
    import json

    out = []
    done.setblocking(False)
    while True:
        try:
            conn, _ = done.accept()
        except BlockingIOError:
            break
        conn.settimeout(2.0)
        with conn, conn.makefile("r") as fh:
            try:
                for line in fh:
                    if line.strip():
                        out.append(json.loads(line))
            except (OSError, ValueError):
                pass
    done.setblocking(True)
    return out


def last_error_line(log: str, report: dict | None = None) -> str:
    """What a failed stage said last: the error of its report (the stage protocol catches it),
    else its output's last line that is not a report (a traceback's final line is its error)."""
    said = str((report or {}).get("error") or "")
    for line in reversed(log.splitlines() if not said else []):
        if line.strip() and not line.startswith("PALLEX "):
            said = line.strip()
            break
    return said if len(said) <= 300 else said[:297] + "..."



def _read_log(path: str) -> str:
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def check_sh() -> None:
    if not os.access(SH, os.X_OK):
        raise ShoalError(f"{SH} not found; the runner starts stages through it (Debian: dash)")
