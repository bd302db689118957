"""The one place where mpiexec command lines are made.

Everything that starts MPI ranks (benchmarks, workloads, waitlab, clusters)
describes the job as a ``Job`` and starts it with ``start()`` or ``run()``
(through ``shoal.proc``, so it is shown under --verbose and stopped as a
whole, daemons included), or asks ``command()`` for the argv and
environment. Process management stays with the MPI's own launcher; the MPI's
module in ``shoal.mpi.kinds`` says how to address it, shoal only says where
and how to start.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from shoal import proc
from shoal.errors import ShoalError
from shoal.mpi import scratch
from shoal.mpi.base import MPIInstall


# Time MPI gets to start before the first record of a job is due, in device seconds
# (an emulated cluster's dilation multiplies it). MPI_Init costs every rank CPU time
# that grows with the job: with one MPICH rank per set-top box, the last MPI_Init
# returned 1.7 s after launch at 8 boxes, and shoal bench's first point came 76-81 s
# after its start at 128, where a fixed 60 s left 8-16 s of the point's own timeout.
STARTUP_GRACE_S = 60.0
STARTUP_GRACE_PER_RANK_S = 1.0


def startup_grace_s(ranks: int) -> float:
    """How long a job of ``ranks`` ranks may take to start, in device seconds."""
    return STARTUP_GRACE_S + STARTUP_GRACE_PER_RANK_S * max(0, ranks)


def preload_first(library: str | Path, preloaded: str | None = None) -> str:
    """An LD_PRELOAD with ``library`` ahead of ``preloaded`` (default: this environment's, what
    the user already preloads), so that its MPI_* win over those behind it."""
    behind = (os.environ.get("LD_PRELOAD", "") if preloaded is None else preloaded).strip()
    return f"{library}:{behind}" if behind else str(library)


@dataclass(frozen=True)
class HostSlots:
    """A host as the launcher reaches it, and how many ranks it takes."""

    host: str
    slots: int = 1

    def __post_init__(self) -> None:
        # Host names reach the launcher's argv and a remote shell: allow only
        # what a DNS name or address can contain.
        allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]")
        if not self.host or not set(self.host) <= allowed or self.host.startswith("-"):
            raise ShoalError(f"host name {self.host!r} is not a valid host name or address")
        if self.slots < 1:
            raise ShoalError(f"host {self.host}: slots must be at least 1, got {self.slots}")


@dataclass
class Job:
    """What to run, with how many ranks, where, and with which environment."""

    mpi: MPIInstall
    ranks: int
    argv: list[str]
    # Environment for every rank (on the launcher's command line, so remote ranks get it too).
    rank_env: dict[str, str] = field(default_factory=dict)
    # None: all ranks on this machine. Otherwise ranks are placed on these hosts in order.
    hosts: list[HostSlots] | None = None
    # A program the launcher uses instead of ssh to start its proxy on a host
    # (the emulated cluster's namespace helper, or a custom ssh wrapper).
    launcher_exec: str | None = None
    # Extra environment for mpiexec itself (not necessarily the ranks).
    launcher_env: dict[str, str] = field(default_factory=dict)
    # Launcher options the caller needs verbatim (kept last before the program).
    extra_args: list[str] = field(default_factory=list)
    # A command that runs mpiexec itself somewhere else (an emulated cluster's
    # head namespace); argv is this prefix followed by the mpiexec line.
    exec_prefix: list[str] = field(default_factory=list)
    # Ranks on this machine as if each had a core of its own (a placement such as
    # seed 003's Table 1): the MPI is not told it is oversubscribed, so it does not
    # change how it waits. Open MPI forces mpi_yield_when_idle on when it is, whatever
    # the environment says, and a rank then yields its core in every progress call.
    own_cores: bool = False
    # Every process of the job runs on this machine, though in other namespaces (an emulated
    # cluster's head and devices): its session files may live in this process's directory.
    on_this_host: bool = False

    def command(self) -> tuple[list[str], dict[str, str]]:
        """Return (argv, environment additions) for the launch."""
        if self.ranks < 1:
            raise ShoalError(f"need at least 1 rank, got {self.ranks}")
        if self.hosts is not None and sum(h.slots for h in self.hosts) < self.ranks:
            total = sum(h.slots for h in self.hosts)
            raise ShoalError(f"{self.ranks} ranks do not fit on {len(self.hosts)} hosts with "
                             f"{total} slots; add hosts or slots, or use fewer ranks")
        env = {**self.mpi.env(), **self.launcher_env}
        argv = self.mpi.impl.launch_args(self)
        argv += list(self.extra_args)
        argv += [str(a) for a in self.argv]
        return [*self.exec_prefix, *argv], env

    def popen_env(self) -> dict[str, str]:
        """Full environment of the launcher: ours plus what the launch needs."""
        _, env = self.command()
        merged = dict(os.environ)
        merged.update(env)
        # Ranks get rank_env on the launcher's command line; a preload meant for them
        # stays off the launcher.
        merged.update({k: v for k, v in self.rank_env.items() if k != "LD_PRELOAD"})
        # The MPI's own tools first on PATH, so helpers it spawns are its own.
        merged["PATH"] = f"{self.mpi.bindir}{os.pathsep}{merged.get('PATH', '')}"
        if (self.hosts is None and not self.exec_prefix) or self.on_this_host:
            # Every process of the job on this machine: its session files in a directory
            # of this shoal process's own (never another user's leftovers; removed at exit).
            # In /tmp, a launcher whose pid matches a killed job's finds that job's PMIx
            # rendezvous socket there (/tmp/ompi.PID/pmix.HOST.tool: every cluster's head is
            # named alike) and its PMIx server's listener fails to start.
            merged["TMPDIR"] = scratch.directory()
        return merged

    @property
    def leaves(self) -> tuple[str, ...]:
        """Files the MPI's processes leave when stopped (removed after a job that did not
        end cleanly: ``shoal.heldfiles``)."""
        return self.mpi.impl.leftovers

    def start(self, **kwargs) -> proc.Process:
        """Start the job (``shoal.proc.start`` options: stdout, stderr, ...)."""
        argv, env = self.command()
        return proc.start(argv, env=self.popen_env(), show_env=env, also=self.mpi.impl.strays,
                          leaves=self.leaves, **kwargs)

    def run(self, **kwargs) -> proc.Result:
        """Run the job to completion (``shoal.proc.run`` options: timeout, capture, ...)."""
        argv, env = self.command()
        return proc.run(argv, env=self.popen_env(), show_env=env, also=self.mpi.impl.strays,
                        leaves=self.leaves, **kwargs)


def program_path(path: Path | str) -> str:
    return str(Path(path).resolve())
