"""Every external command shoal runs goes through here.

One place, so that every command

- is found by absolute path (``PATH``, then ``/usr/local/sbin``, ``/usr/sbin``
  and ``/sbin``, which Debian leaves off an ordinary user's ``PATH``); a
  missing tool is one line naming the Debian package that provides it;
- is echoed under ``--verbose`` (``shoal.verbose``), ready to paste;
- starts in its own session, so it and everything it starts (mpiexec, its
  proxies, the ranks, even those that move to their own process group) can be
  found again and stopped together: SIGTERM to all of them, a grace period,
  then SIGKILL, and waited for — on a timeout, on an error, and when SIGINT,
  SIGTERM or SIGHUP reach shoal;
- keeps the tail of its stderr for the one-line error message;
- can be replaced by a test (``substitute``).

Two shapes: ``run()`` runs to completion (optionally capturing output);
``start()`` returns a ``Process`` handle for long-running work (MPI jobs,
samplers, forwarders) that stops its whole tree when closed.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import re
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator

from shoal import verbose
from shoal.errors import ShoalError

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT  # stderr=STDOUT: into the same pipe as stdout
#: ``stderr=TAIL``: read stderr and keep its last lines (``Process.stderr_tail``).
TAIL = -10

#: Seconds between SIGTERM and SIGKILL when a command is stopped.
GRACE_S = 2.0
#: Directories searched after PATH: Debian keeps ip, tc, ... there and leaves
#: them off an ordinary user's PATH.
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")
#: The Debian package that provides a tool, for the "not found" line.
PACKAGES = {
    "ip": "iproute2", "tc": "iproute2", "bridge": "iproute2",
    "unshare": "util-linux", "nsenter": "util-linux", "setpriv": "util-linux",
    "mount": "mount", "umount": "mount",
    "ssh": "openssh-client", "scontrol": "slurm-client", "srun": "slurm-client",
    "cc": "gcc", "gcc": "gcc", "make": "make",
    "systemd-run": "systemd", "sysctl": "procps",
}
_TAIL_LINES = 20
#: Lines of stderr kept from the start (``Process.stderr_first_errors``): a job's first
#: complaint (one process's) comes before every other process's reaction to it.
_HEAD_LINES = 400
# What an error line says, in any program's words; warnings do not count.
_ERROR_WORDS = re.compile(r"\b(error|errors|fatal|abort\w*|unreachable|refused|failed|cannot|"
                          r"killed|segmentation|timed? ?out|no route|not found)\b", re.I)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NOISE = re.compile(r"\[[^\]]*\]|0x[0-9a-f]+|\d+", re.I)


class ToolMissing(ShoalError):
    """A program shoal needs is not installed (or not found where Debian puts it)."""


class CannotStart(ShoalError):
    """The operating system refused to start a command (``reason`` says why)."""

    def __init__(self, program: str, reason: str) -> None:
        super().__init__(f"cannot start {program}: {reason}")
        self.reason = reason


class CommandFailed(ShoalError):
    """A command shoal ran exited non-zero (``run(check=True)``)."""


class CommandTimeout(ShoalError):
    """A command did not finish in time; it was stopped with everything it started."""


class CommandStopped(ShoalError):
    """A command was stopped, with everything it started, because ``run(stop_if=...)`` gave a
    reason (a host it ran on stopped answering); the message says why."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


# How often run(stop_if=...) asks whether to stop the command.
STOP_POLL_S = 1.0


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached shoal. A KeyboardInterrupt, so every cleanup
    written for Ctrl-C (stop the job, keep what is measured) runs for it too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# -- finding tools ----------------------------------------------------------------
def search_dirs() -> list[str]:
    """Directories searched for tools, in order: PATH, then the sbin directories."""
    dirs = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d]
    return dirs + [d for d in SBIN_DIRS if d not in dirs]


def find(name: str) -> str | None:
    """Absolute path of an executable, or None. Never raises: unreadable or
    missing directories on PATH are skipped."""
    if os.sep in name:
        return os.path.abspath(name) if _executable(name) else None
    for directory in search_dirs():
        candidate = os.path.join(directory, name)
        if _executable(candidate):
            return os.path.abspath(candidate)
    return None


def _executable(path: str) -> bool:
    try:
        return os.path.isfile(path) and os.access(path, os.X_OK)
    except (OSError, ValueError):
        return False


def tool(name: str, purpose: str = "", package: str | None = None) -> str:
    """Absolute path of a tool shoal needs, or ToolMissing naming its package."""
    found = find(name)
    if found:
        return found
    package = package or PACKAGES.get(name)
    why = f" ({purpose})" if purpose else ""
    install = (f"install the Debian package {package} (apt-get install {package})"
               if package else "install it")
    where = "on PATH" if os.sep in name else f"on PATH or in {', '.join(SBIN_DIRS)}"
    raise ToolMissing(f"'{name}' is needed{why} but was not found {where}; {install}")


def _resolve(argv: list[str]) -> list[str]:
    argv = [str(a) for a in argv]
    if not argv:
        raise ValueError("empty command")
    if os.sep not in argv[0]:
        argv[0] = tool(argv[0])
    return argv


#: ``start(also=...)``: given every pid seen in a job and the process table,
#: the job's processes that left its session and tree.
Also = Callable[[set, dict], Iterable[int]]


# -- results ----------------------------------------------------------------------
@dataclass
class Result:
    """A finished command: its exit status and whatever output was captured."""

    argv: list[str]
    returncode: int
    stdout: Any = ""
    stderr: Any = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def tail(self, lines: int = 3) -> str:
        """The last non-empty lines of stderr (else stdout), joined with ' | '."""
        return _tail_text(self.stderr or self.stdout, lines)

    def error_line(self, what: str | None = None) -> str:
        """One line saying which command failed, how, and what it last said."""
        return _error_line(what or os.path.basename(self.argv[0]), self.returncode, self.tail())


def first_errors(text_lines: Iterable[str], lines: int = 3) -> list[str]:
    """The first ``lines`` distinct lines that report an error."""
    seen, found = set(), []
    for line in text_lines:
        if not _ERROR_WORDS.search(line) or re.search(r"\bwarning\b", line, re.I):
            continue
        key = _NOISE.sub("", line).strip()
        if key in seen:
            continue
        seen.add(key)
        found.append(line.strip())
        if len(found) == lines:
            break
    return found


def _tail_text(text: Any, lines: int) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    kept = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return " | ".join(kept[-lines:])


def _error_line(what: str, code: int | None, tail: str) -> str:
    how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 \
        else f"failed (exit status {code})"
    return f"{what} {how}" + (f": {tail}" if tail else "")


# -- fakes for tests --------------------------------------------------------------
Handler = Callable[[list[str], dict[str, str]], "Result | None"]
_substitutes: list[Handler] = []


@contextlib.contextmanager
def substitute(handler: Handler) -> Iterator[None]:
    """Within the block, ``run()`` asks ``handler(argv, env_add)`` first; a
    Result it returns stands for the command, None lets it run for real."""
    _substitutes.append(handler)
    try:
        yield
    finally:
        _substitutes.remove(handler)


# -- running ----------------------------------------------------------------------
def run(argv: list[str], *, env: dict[str, str] | None = None,
        env_add: dict[str, str] | None = None, input: str | bytes | None = None,
        capture: bool = True, text: bool = True, timeout: float | None = None,
        check: bool = False, what: str | None = None, cwd: str | None = None,
        show: bool = True, show_env: dict[str, str] | None = None,
        also: Also | None = None, leaves: tuple[str, ...] = (),
        stop_if: Callable[[], str | None] | None = None) -> Result:
    """Run a command to completion.

    ``env`` replaces the environment (default: shoal's own), ``env_add`` is
    added on top and shown under --verbose. With ``capture`` stdout and
    stderr are returned, else they go where shoal's go. ``timeout`` stops the
    command and all it started, then raises CommandTimeout; ``check`` turns a
    non-zero exit into CommandFailed (``what`` names the command in both).
    ``show_env`` is what --verbose prints as the added environment when the
    caller passes a whole ``env`` (default ``env_add``). ``also`` and ``leaves``:
    as for ``start()``. ``stop_if``: asked every ``STOP_POLL_S`` while the command runs; a
    reason it returns stops the command and raises CommandStopped.
    """
    argv = _resolve(argv)
    if show:
        verbose.show(argv, show_env if show_env is not None else env_add)
    for handler in list(_substitutes):
        faked = handler(argv, dict(env_add or {}))
        if faked is not None:
            return _checked(faked, check, what)
    out = PIPE if capture else None
    with start(argv, env=env, env_add=env_add, cwd=cwd, text=text, show=False, also=also, leaves=leaves,
               stdin=PIPE if input is not None else None, stdout=out,
               stderr=out) as process:
        name = what or os.path.basename(argv[0])
        try:
            stdout, stderr = _communicate(process.popen, input, timeout, stop_if)
        except subprocess.TimeoutExpired:
            process.stop()
            tail = _tail_text(_drain(process), 3)
            raise CommandTimeout(f"{name} did not finish within {timeout:g} s and was stopped"
                                 + (f"; it last said: {tail}" if tail else "")) from None
        except _StopAsked as asked:
            process.stop()
            _drain(process)
            raise CommandStopped(f"{name} was stopped: {asked.reason}", asked.reason) from None
    result = Result(argv, process.returncode, stdout if capture else "",
                    stderr if capture else "")
    return _checked(result, check, what)


class _StopAsked(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _communicate(popen: subprocess.Popen, input: Any, timeout: float | None,
                 stop_if: Callable[[], str | None] | None) -> tuple[Any, Any]:
    """``popen.communicate``, asking ``stop_if`` every STOP_POLL_S (a retried communicate
    loses no output)."""
    if stop_if is None:
        return popen.communicate(input, timeout=timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        try:
            return popen.communicate(input, timeout=STOP_POLL_S if left is None else max(0.0, min(STOP_POLL_S, left)))
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise
        reason = stop_if()
        if reason:
            raise _StopAsked(reason)


def _drain(process: "Process") -> Any:
    try:
        return process.popen.communicate(timeout=1)[1] or ""
    except (subprocess.TimeoutExpired, ValueError, OSError):
        return ""


def _checked(result: Result, check: bool, what: str | None) -> Result:
    if check and not result.ok:
        raise CommandFailed(result.error_line(what))
    return result


def start_helper(argv: list[str], env_add: dict[str, str], what: str) -> int:
    """Start a helper that prints ``ready`` once it serves, and leave it running (its cluster's
    teardown ends it); its pid. One line naming ``what`` and its last words if it does not."""
    process = start(argv, env_add=env_add, stdout=PIPE, stderr=TAIL)
    if process.popen.stdout.readline().strip() != "ready":
        process.stop()
        raise ShoalError(f"{what} did not start: {process.stderr_tail() or 'no message'}")
    process.popen.stdout.close()
    process.detach()
    return process.pid


def start(argv: list[str], *, env: dict[str, str] | None = None,
          env_add: dict[str, str] | None = None, stdin: Any = None, stdout: Any = None,
          stderr: Any = None, text: bool = True, bufsize: int = -1,
          pass_fds: Iterable[int] = (), cwd: str | None = None, show: bool = True,
          show_env: dict[str, str] | None = None, also: Also | None = None,
          leaves: tuple[str, ...] = ()) -> "Process":
    """Start a command in its own session and return its handle.

    ``stdin``/``stdout``/``stderr`` take PIPE, DEVNULL, a file, or None
    (inherit); ``stderr=TAIL`` keeps the last lines for error messages.
    ``also(pids seen in the job, process table)`` names more processes that
    belong to the job but left its session and tree (an MPI's daemons); they
    are stopped with it. ``leaves`` (globs) names files its processes make and
    remove only when they end cleanly (an MPI's shared memory): when the
    command stops or fails, those made since it started that no live process
    holds are removed (``shoal.heldfiles``).
    """
    argv = _resolve(argv)
    if show:
        verbose.show(argv, show_env if show_env is not None else env_add)
    full_env = dict(os.environ if env is None else env)
    full_env.update(env_add or {})
    keep_tail = stderr == TAIL
    # A stopping signal waits until the child is registered: raised inside Popen, after
    # the fork, it would leave a child that nobody stops.
    with _stopping_deferred():
        try:
            popen = subprocess.Popen(argv, env=full_env, stdin=stdin, stdout=stdout,
                                     stderr=PIPE if keep_tail else stderr, text=text,
                                     # a tool's stray non-UTF-8 byte must not become a traceback
                                     errors="replace" if text else None,
                                     bufsize=bufsize, pass_fds=tuple(pass_fds), cwd=cwd,
                                     start_new_session=True)
        except OSError as exc:
            raise CannotStart(argv[0], exc.strerror or str(exc)) from None
        process = Process(argv, popen, also, leaves)
    if keep_tail:
        process._pump_tail()
    return process


@dataclass(eq=False)
class Process:
    """A running command and everything it starts (its session)."""

    argv: list[str]
    popen: subprocess.Popen
    also: Also | None = None
    leaves: tuple[str, ...] = ()
    _started: float = field(default_factory=time.time)
    _seen: set[int] = field(default_factory=set)
    _tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=_TAIL_LINES))
    _head: list = field(default_factory=list)
    _lines: int = 0   # stderr lines read in all
    _pumps: list[threading.Thread] = field(default_factory=list)
    # Popen's pid and streams, for callers that talk to the command.
    pid: int = field(init=False)
    stdin: IO | None = field(init=False)
    stdout: IO | None = field(init=False)
    stderr: IO | None = field(init=False)

    def __post_init__(self) -> None:
        self.pid = self.popen.pid
        self.stdin, self.stdout, self.stderr = self.popen.stdin, self.popen.stdout, self.popen.stderr
        with _live_lock:
            _live.add(self)

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        code = self.popen.poll()
        if code is not None:
            self._forget()
        return code

    def wait(self, timeout: float | None = None) -> int | None:
        """Exit status, or None if still running after ``timeout`` seconds."""
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._forget()
        return code

    def stderr_tail(self, lines: int = 3) -> str:
        """The last lines of stderr (``stderr=TAIL``), joined with ' | '."""
        for pump in self._pumps:
            pump.join(timeout=0.5)
        return " | ".join(list(self._tail)[-lines:])

    def error_line(self, what: str | None = None) -> str:
        return _error_line(what or os.path.basename(self.argv[0]), self.returncode,
                           self.stderr_tail())

    def stderr_kept(self) -> list[str]:
        """The stderr lines kept (``stderr=TAIL``): the first ones and the last ones, each once."""
        for pump in self._pumps:
            pump.join(timeout=0.5)
        after_head = self._lines - len(self._head)
        return list(self._head) + (list(self._tail)[-after_head:] if after_head > 0 else [])

    def stderr_first_errors(self, lines: int = 3) -> str:
        """The first distinct error lines of stderr (``stderr=TAIL``), joined with ' | '.

        Distinct once stamps, host names and numbers in brackets are left out: a hundred
        processes reporting the same failure are one line."""
        for pump in self._pumps:
            pump.join(timeout=0.5)
        return " | ".join(first_errors(self._head, lines))

    def send_signal(self, signum: int) -> None:
        """Send a signal to every process of the command (e.g. forward SIGINT)."""
        for pid in self._members():
            _kill(pid, signum)

    def stop(self, grace_s: float = GRACE_S) -> int | None:
        """Stop the command and everything it started; return its exit status.

        SIGTERM to every member, up to ``grace_s`` for them to go, then SIGKILL
        to what is left; new processes started meanwhile are caught too.
        Signals to shoal wait until this is done, so a second Ctrl-C cannot
        leave half a job behind.
        """
        with signals_held():
            if self.popen.poll() is not None and not self._members():
                self._forget()
                return self.popen.returncode
            for signum, patience in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
                deadline, sent = time.monotonic() + patience, set()
                while True:
                    self.popen.poll()
                    members = self._members()
                    if not members and self.popen.returncode is not None:
                        break
                    # Each once (a second SIGTERM means "hurry" to some); the command itself
                    # first, so it cannot see a child die and exit on its own in between.
                    for pid in sorted(members - sent, key=lambda p: p != self.popen.pid):
                        _kill(pid, signum)
                        if signum == signal.SIGTERM:
                            _kill(pid, signal.SIGCONT)   # a stopped process must run to see it
                    sent |= members
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.02)
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for stream in (self.popen.stdin,):
                with contextlib.suppress(OSError):
                    if stream:
                        stream.close()
            self._forget()
            return self.popen.returncode

    def detach(self) -> None:
        """Let the command outlive shoal: it is no longer stopped on exit or on signals.

        For daemons whose owner is a record rather than this process (an
        emulated cluster's link forwarder); whoever removes the record stops it.
        """
        self._forget()
        self.popen.returncode = 0  # nobody waits for it from here on

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.popen.poll() is None or self._members():
            self.stop()
        self._forget()

    # -- internals ----------------------------------------------------------------
    def _members(self) -> set[int]:
        """Live processes of this command: its session, their descendants, and ``also``."""
        table = process_table()
        sid = self.popen.pid
        members = {pid for pid, info in table.items() if info.session == sid}
        if self.popen.returncode is None:   # once reaped, the pid may be someone else's
            members.add(sid)
        members |= descendants(table, members)
        if self.also is not None:
            self._seen |= members | {sid}
            extra: set[int] = set()
            with contextlib.suppress(OSError, ValueError):
                extra = set(self.also(self._seen, table))
            members |= extra | descendants(table, extra)
        members.discard(os.getpid())
        # A zombie has exited; only its parent's wait removes it.
        alive = {pid for pid in members if pid in table and table[pid].state != "Z"}
        if self.popen.returncode is None:
            # Not reaped, so the pid is still the command's, whatever one read of the table
            # missed: a stop must never kill its children and spare it.
            alive.add(sid)
        return alive

    def _pump_tail(self) -> None:
        def pump() -> None:
            with contextlib.suppress(ValueError, OSError):
                for line in self.popen.stderr:
                    if isinstance(line, bytes):
                        line = line.decode(errors="replace")
                    # Ranks' buffers can end in NULs and other control bytes: kept, they
                    # would make failures.csv a binary file to grep.
                    line = _CONTROL.sub("", line).strip()
                    if line:
                        self._lines += 1
                        self._tail.append(line)
                        if len(self._head) < _HEAD_LINES:
                            self._head.append(line)

        thread = threading.Thread(target=pump, name="shoal-stderr-tail", daemon=True)
        thread.start()
        self._pumps.append(thread)

    def _forget(self) -> None:
        with _live_lock:
            _live.discard(self)
        if self.leaves and self.popen.returncode not in (None, 0):
            self._remove_leftovers()

    def _remove_leftovers(self) -> None:
        """Files of ``leaves`` made since the start that nobody holds: the job's, now that
        it stopped or failed (a clean end removes its own). Once."""
        from shoal import heldfiles

        patterns, self.leaves = self.leaves, ()
        with contextlib.suppress(OSError):
            found = heldfiles.unheld(patterns, min_age_s=0, newer_than=self._started - 1)
            heldfiles.remove(path for path, _ in found)


def _kill(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


# -- the process table ------------------------------------------------------------
@dataclass(frozen=True)
class ProcInfo:
    """A process as /proc/PID/stat shows it (times in clock ticks): the one reader of that file."""

    ppid: int
    pgrp: int
    session: int
    state: str
    utime: int = 0
    stime: int = 0
    cutime: int = 0
    cstime: int = 0
    #: When the process started, in ticks after boot: with the pid, it names one process.
    start: int = 0
    #: Its command name (at most 15 bytes, as the kernel keeps it).
    comm: str = ""

    @property
    def alive(self) -> bool:
        """Running or sleeping, not a zombie waiting for its parent (nor dead)."""
        return self.state not in ("Z", "X")

    @property
    def cpu_s(self) -> float:
        """User and system CPU time so far, in seconds."""
        return (self.utime + self.stime) / os.sysconf("SC_CLK_TCK")

    @property
    def cpu_with_children_s(self) -> float:
        """The same, with the children it has waited for."""
        return (self.utime + self.stime + self.cutime + self.cstime) / os.sysconf("SC_CLK_TCK")


def stat(pid: int | str, root: str | os.PathLike = "/proc") -> ProcInfo | None:
    """The process ``pid`` from ``root``/PID/stat, or None when it is gone or not readable.

    The command name, in parentheses, may hold spaces and ')': fields count from the last ')'.
    """
    try:
        with open(f"{root}/{pid}/stat", "rb") as fh:
            head, fields = fh.read().rsplit(b")", 1)
        fields = fields.split()
        return ProcInfo(int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode(),
                        int(fields[11]), int(fields[12]), int(fields[13]), int(fields[14]),
                        int(fields[19]), head.partition(b"(")[2].decode(errors="replace"))
    except (OSError, IndexError, ValueError):
        return None


def process_table(root: str | os.PathLike = "/proc") -> dict[int, ProcInfo]:
    """Every process this one can see: pid -> parent, group, session, state."""
    table: dict[int, ProcInfo] = {}
    try:
        entries = os.listdir(root)
    except OSError:
        return table
    for entry in entries:
        if entry.isdigit():
            info = stat(entry, root)
            if info is not None:   # else gone meanwhile
                table[int(entry)] = info
    return table


def descendants(table: dict[int, ProcInfo], roots: set[int]) -> set[int]:
    """Every process below ``roots`` in the parent tree."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, info in table.items():
        children[info.ppid].append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


# -- signals reaching shoal -------------------------------------------------------
_live: set[Process] = set()
_live_lock = threading.Lock()
_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP (delivered afterwards) while a job is being stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM/SIGHUP while shoal ends its runs on the way out: a second
    Ctrl-C there would leave a manifest "running" and print a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {signum: signal.signal(signum, signal.SIG_IGN) for signum in _HELD}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


#: The signal (SIGTERM/SIGHUP) that asked shoal to stop, for its exit status.
received: int | None = None


def stop_reason() -> str:
    """Why a run stopped, for its manifest: the signal that asked (Ctrl-C unless another)."""
    return f"stopped by {signal.Signals(received).name if received else 'SIGINT (Ctrl-C)'}"


#: Set by the first stopping signal: the ones after it are ignored while shoal unwinds,
#: so a second Ctrl-C cannot cut the clean-up short and end in a traceback.
_stopping = False


#: Above zero while a child is being started; a stopping signal then waits in _pending.
_deferring = 0
_pending: BaseException | None = None


@contextlib.contextmanager
def _stopping_deferred() -> Iterator[None]:
    """Let the first stopping signal take effect only at the end of the block.

    Unlike signals_held, this leaves the signal mask alone, which children inherit."""
    global _deferring, _pending
    if threading.current_thread() is not threading.main_thread():
        yield   # signals are handled in the main thread only
        return
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if _deferring == 0 and _pending is not None:
            pending, _pending = _pending, None
            raise pending


def _stop_with(exc: BaseException) -> None:
    global _pending
    if _deferring:
        _pending = exc
        return
    raise exc


def _raise_terminated(signum: int, frame: Any) -> None:
    global received, _stopping
    if _stopping:
        return
    _stopping = True
    received = signum
    _stop_with(Terminated(signum))


def _interrupt_once(signum: int, frame: Any) -> None:
    global _stopping
    if _stopping:
        return
    _stopping = True
    _stop_with(KeyboardInterrupt())


def settle_signals() -> None:
    """Once the command is done (stopped, failed or finished) and cleaned up, a signal
    changes nothing: ignore them to the end (the interpreter restores SIGINT's default
    as it exits, and a late Ctrl-C would then end it by the signal instead of its exit
    status, after it had already said what it did)."""
    if threading.current_thread() is threading.main_thread():
        for signum in _HELD:
            signal.signal(signum, signal.SIG_IGN)


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP unwind shoal like Ctrl-C does (raising Terminated),
    so running commands are stopped and finished results kept; only the first
    stopping signal counts."""
    global _stopping
    _stopping = False
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) in (signal.SIG_DFL, None, _raise_terminated):
            signal.signal(signum, _raise_terminated)
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _interrupt_once):
        signal.signal(signal.SIGINT, _interrupt_once)


def stop_all() -> None:
    """Stop every command still running (shoal is exiting)."""
    with _live_lock:
        running = list(_live)
    for process in running:
        process.stop()
