"""What shoal needs to know about an MPI implementation, in one interface.

Each implementation is one module in ``shoal.mpi.kinds`` defining a subclass
of ``Implementation`` as ``IMPLEMENTATION``; nothing outside this package
names an MPI. Adding a system MPI, Intel MPI or MVAPICH is one new module
there: how to recognise an installation, how its launcher takes ranks,
hosts and environment, how to keep traffic on emulated links, how to kill
a whole job, its own tuning knobs, and what its PMPI layer needs.
"""

from __future__ import annotations

import hashlib
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from shoal import proc
from shoal.errors import ShoalError

if TYPE_CHECKING:
    from shoal.mpi.launch import Job


@dataclass(frozen=True)
class MPIInstall:
    """One installation: its implementation (kind), version, ABI and where its tools are."""

    kind: str  # the name of its module in shoal.mpi.kinds
    version: str
    abi: str
    bindir: Path

    @property
    def impl(self) -> "Implementation":
        from shoal.mpi import kinds

        return kinds.get(self.kind)

    @property
    def mpicc(self) -> Path:
        return self.bindir / "mpicc"

    @property
    def mpiexec(self) -> Path:
        return self.bindir / "mpiexec"

    @property
    def name(self) -> str:
        return f"{self.impl.title} {self.version}"

    @property
    def identity(self) -> str:
        """Stable key for build caches: changes when kind, version, ABI or place change."""
        digest = hashlib.sha256(f"{self.kind}|{self.version}|{self.abi}|{self.bindir}".encode())
        return f"{self.kind}-{self.version}-{digest.hexdigest()[:10]}"

    def env(self) -> dict[str, str]:
        """Environment additions every launch with this MPI needs."""
        return self.impl.env(self)

    def describe(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "version": self.version,
                "abi": self.abi, "bindir": str(self.bindir)}


def tool_output(argv: list[str], env_add: dict[str, str] | None = None,
                timeout: float = 30) -> str:
    """What one of an MPI's own tools prints (stdout and stderr), or "" if it cannot run."""
    try:
        done = proc.run(argv, env_add=env_add, timeout=timeout)
    except ShoalError:
        return ""
    return done.stdout + done.stderr


@dataclass(frozen=True)
class Death:
    """A process of a job that its launcher reported dead: killed by ``signal`` or exited
    with ``status``; what the launcher did not say is None."""

    rank: int | None = None
    pid: int | None = None
    host: str | None = None
    signal: int | None = None
    status: int | None = None

    def describe(self, hosts: list[str] | None = None, pids: list[int] | None = None) -> str:
        """One line: which rank, where, and how ("rank 1 on stb2 (pid 812) killed by
        SIGSEGV"). ``hosts`` and ``pids`` (by rank, from the job's start) name the rank and
        its device where the launcher gave only a pid or its own host."""
        rank = self.rank
        if rank is None and pids and self.pid in pids:
            rank = pids.index(self.pid)
        host = hosts[rank] if hosts and rank is not None and rank < len(hosts) else self.host
        who = f"rank {rank}" if rank is not None else "a rank"
        where = f" on {host}" if host else ""
        pid = f" (pid {self.pid})" if self.pid is not None else ""
        if self.signal is not None:
            try:
                how = f"killed by {signal.Signals(self.signal).name}"
            except ValueError:
                how = f"killed by signal {self.signal}"
        else:
            how = f"exited with status {self.status}"
        return f"{who}{where}{pid} {how}"


@dataclass(frozen=True)
class HeadLaunch:
    """What a head-side launch of an MPI needs (``Implementation.head_launch``)."""

    #: The variable the launcher sets in each rank to its rank number (before MPI_Init).
    rank_variable: str
    rank_env: dict[str, str]
    launcher_env: dict[str, str]
    launcher_args: list[str]


class Implementation:
    """One MPI implementation. Subclasses set the names and override what differs."""

    #: Short name: ``--mpi KIND``, cache keys, manifests ("mpich").
    kind: str = ""
    #: How people write it ("MPICH").
    title: str = ""
    #: Place in ``--mpi`` help and in ``available()``; the lowest is the default.
    order: int = 100
    #: The tool beside mpiexec that tells this MPI apart (and its version).
    companion: str = ""
    #: Launcher program names besides ``mpiexec``/``mpirun`` (``shoal run -- LAUNCHER ...``).
    launcher_names: tuple[str, ...] = ()
    #: Environment variable prefixes that tune it: recorded with every benchmark run.
    setting_prefixes: tuple[str, ...] = ()
    #: Prefixes of what its launcher reads from its environment (carried along where the
    #: launcher is started over ssh), and the names among them that belong to this machine's
    #: own network (an interface name), never carried to another.
    launcher_prefixes: tuple[str, ...] = ()
    host_settings: tuple[str, ...] = ()
    #: The MPI's own ways to wait less (label -> rank environment), for waitlab.
    wait_knobs: dict[str, dict[str, str]] = {}
    #: Files (globs) its ranks and daemons remove only when they end cleanly: removed
    #: after a job that was stopped or failed, and by ``shoal doctor --fix``.
    leftovers: tuple[str, ...] = ()
    #: The variable its launcher sets in each rank to the rank's index among the ranks
    #: of its host (which core of an emulated device the rank runs on).
    local_rank_variable: str = ""

    # -- discovery ------------------------------------------------------------------
    def bundled_bindir(self, prefix: Path) -> Path | None:
        """Where shoal's own environment (``sys.prefix``) holds this MPI, if it does."""
        return None

    def identify(self, bindir: Path) -> MPIInstall | None:
        """This MPI if ``bindir`` (which has an mpiexec) holds it, asked through its own tools."""
        return None

    def from_launcher_version(self, text: str, bindir: Path) -> MPIInstall | None:
        """This MPI if ``mpiexec --version`` printed ``text`` (no companion tools found)."""
        return None

    # -- building -------------------------------------------------------------------
    def build_env(self, mpi: MPIInstall) -> dict[str, str]:
        """Environment its compiler wrapper (mpicc) needs (default: the launch's)."""
        return self.env(mpi)

    def cflags(self, mpi: MPIInstall) -> list[str]:
        """Compiler flags every native target needs with this MPI."""
        return []

    def build_facts(self, mpi: MPIInstall) -> dict[str, str]:
        """How this installation was built (configure options, device, compiler), as its
        own tools print it, for a run's stack; {} when they say nothing."""
        return {}

    # -- launching ------------------------------------------------------------------
    def env(self, mpi: MPIInstall) -> dict[str, str]:
        """Environment every launch with this MPI needs (for mpiexec itself)."""
        return {}

    def launch_args(self, job: "Job") -> list[str]:
        """mpiexec and its options for ``job``: ranks, hosts, launcher agent, rank
        environment (the program and ``job.extra_args`` are added after)."""
        raise NotImplementedError

    def namespace_transport(self, subnet: str) -> tuple[dict[str, str], list[str]]:
        """(rank environment, launcher options) that keep traffic between emulated
        devices (network namespaces of one kernel) on their shaped links, never
        on shared memory or loopback, and on the emulated ``subnet``."""
        return {}, []

    def launcher_from_mpiexec_only(self) -> list[str]:
        """Launcher options that leave every daemon to ``mpiexec`` itself (no daemon starts
        others through the launcher helper): the helper of a cluster over hosts is at a
        path of the head's host only."""
        return []

    def head_launch(self, subnet: str, kinds: int = 1) -> "HeadLaunch | None":
        """How to start every rank from the launcher's own host (the emulated cluster's
        head) into its device (``--layout head``): ranks of one host that must still
        talk over the emulated links on ``subnet``, and the process manager's server
        reachable from the devices; ``kinds``: how many device profiles the job's ranks
        run on (boxes and blades: 2). None: this MPI cannot."""
        return None

    def deaths(self, lines: list[str]) -> list[Death]:
        """The processes the launcher's own report (its stderr ``lines``) says died, in the
        order it names them; [] where it names none."""
        return []

    def wildcard_transport(self) -> dict[str, str]:
        """Rank environment, beside ``namespace_transport``, for jobs on emulated devices
        whose ranks receive from MPI_ANY_SOURCE."""
        return {}

    def forward_env(self, env: dict[str, str], names: Iterable[str]) -> dict[str, str]:
        """Environment for a user-written mpiexec line so its ranks see ``names`` of ``env``."""
        return dict(env)

    def nonblocking_twins(self, env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
        """libshoalwait runs a blocking collective as its nonblocking form, whose algorithm
        the MPI chooses by other settings. The settings that give each nonblocking form the
        blocking algorithm that ``env`` (the ranks' environment) chooses, and the choices
        (``NAME=value``) that have no nonblocking twin. ({}, []) where nothing is chosen."""
        return {}, []

    def rendezvous_above_B(self, mpi: MPIInstall) -> int | None:
        """Message size above which this MPI's TCP transport sends a request and waits for
        the receiver's answer before the data: one round trip more on any link (None: no
        such step was seen)."""
        return None

    # -- stopping -------------------------------------------------------------------
    def strays(self, job: set[int], table: dict[int, proc.ProcInfo]) -> set[int]:
        """Processes of a job that left its session and process tree (daemons of
        its launcher), given every pid seen in the job so far; they are stopped
        with it."""
        return set()

