"""MPICH (and derivatives with its hydra launcher): the wheel shoal installs by default."""

from __future__ import annotations

import re
from pathlib import Path

from shoal.mpi.base import Death, HeadLaunch, Implementation, MPIInstall, tool_output


# Hydra's report of a process killed by a signal, a block per process: "PID 812 RUNNING AT
# stb2" (newer: "RANK 1 PID 812 ..."), then "EXIT CODE: 11", the signal's number (139 where a
# shell stood between: 128 + 11), or "KILLED BY SIGNAL: 11". A rank that calls exit(11) gets
# no block (measured with MPICH 5.0.2). Without a rank, the job's own pid list names it.
_HYDRA_PID = re.compile(r"^=\s+(?:RANK (\d+) )?PID (\d+) RUNNING AT (\S+)")
_HYDRA_SIGNAL = re.compile(r"^=\s+(?:EXIT CODE|KILLED BY SIGNAL): (\d+)")
# The job's own end, which Hydra prints even where its block names a process it killed.
_HYDRA_EXIT_STRING = re.compile(r"EXIT STRING: .*\(signal (\d+)\)")

# The blocking algorithms (MPIR_CVAR_<C>_INTRA_ALGORITHM) whose nonblocking twin is
# MPIR_CVAR_I<C>_INTRA_ALGORITHM=sched_<name>, for the collectives libshoalwait rewrites:
# MPICH 5.0's own lists of both (read through MPI_T). The rest (tree, k_brucks, recexch,
# ...) have none.
_SCHED_TWINS = {
    "BARRIER": (),
    "BCAST": ("binomial", "smp", "scatter_recursive_doubling_allgather", "scatter_ring_allgather"),
    "REDUCE": ("binomial", "smp", "reduce_scatter_gather"),
    "ALLREDUCE": ("smp", "recursive_doubling", "reduce_scatter_allgather"),
    "GATHER": ("binomial",),
    "GATHERV": ("linear",),
    "SCATTER": ("binomial",),
    "SCATTERV": ("linear",),
    "ALLGATHER": ("brucks", "recursive_doubling", "ring"),
    "ALLGATHERV": ("brucks", "recursive_doubling", "ring"),
    "ALLTOALL": ("brucks", "pairwise"),
    "ALLTOALLV": (),
    "REDUCE_SCATTER": ("noncommutative", "pairwise", "recursive_doubling", "recursive_halving"),
    "REDUCE_SCATTER_BLOCK": ("noncommutative", "pairwise", "recursive_doubling",
                             "recursive_halving"),
}


class MPICH(Implementation):
    kind = "mpich"
    title = "MPICH"
    companion = "mpichversion"
    order = 10
    launcher_names = ("mpiexec.hydra",)
    setting_prefixes = ("MPIR_CVAR_", "MPICH_", "UCX_", "FI_")
    launcher_prefixes = ("MPIR_", "MPICH_", "HYDRA_", "UCX_", "FI_")
    host_settings = ("HYDRA_IFACE",)
    # Shared memory of each host's ranks (1-2 MB each, in RAM) and each proxy's topology
    # file (Hydra writes it to /tmp whatever TMPDIR says).
    leftovers = ("/dev/shm/mpich_shm_*", "/tmp/hydra_hwloc_xmlfile_*")
    local_rank_variable = "MPI_LOCALRANKID"
    # No yield-when-idle here: heavy yield (its yields become 1 ns sleeps) comes first and
    # stands in for the Degraded mode ("degraded", "degraded+X").
    wait_knobs = {"mpich:heavy_yield": {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"},
                  "mpich:progress_throttle": {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1"}}

    def bundled_bindir(self, prefix: Path) -> Path:
        return prefix / "bin"

    def identify(self, bindir: Path) -> MPIInstall | None:
        if not (bindir / self.companion).exists():
            return None
        text = tool_output([str(bindir / self.companion)])
        version = re.search(r"MPICH Version:\s*(\S+)", text)
        abi = re.search(r"MPICH ABI:\s*(\S+)", text)
        if not version:
            return None
        return MPIInstall(self.kind, version.group(1), abi.group(1) if abi else "?", bindir)

    def build_facts(self, mpi: MPIInstall) -> dict[str, str]:
        # "MPICH Device:       ch4:ucx ofi" -> {"device": "ch4:ucx ofi"}
        text = tool_output([str(mpi.bindir / self.companion)])
        return {key.lower().replace(" ", "_"): value.strip()
                for key, value in re.findall(r"^MPICH ([A-Za-z0-9 ]+?):\s*(.*)$", text, re.M)
                if key not in ("Version", "ABI")}

    def from_launcher_version(self, text: str, bindir: Path) -> MPIInstall | None:
        if "HYDRA" not in text:
            return None
        version = re.search(r"Version:\s*(\S+)", text)
        return MPIInstall(self.kind, version.group(1) if version else "?", "?", bindir)

    def launch_args(self, job) -> list[str]:
        argv = [str(job.mpi.mpiexec), "-n", str(job.ranks)]
        if job.hosts is not None:
            argv += ["-hosts", ",".join(f"{h.host}:{h.slots}" for h in job.hosts)]
        if job.launcher_exec:
            argv += ["-launcher", "ssh", "-launcher-exec", job.launcher_exec]
        for key, value in job.rank_env.items():
            argv += ["-genv", key, value]
        return argv

    def namespace_transport(self, subnet: str) -> tuple[dict[str, str], list[str]]:
        # MPICH shares memory only between ranks of one host name, so ranks of
        # one device still use it (as on the real board); UCX finds peers on
        # the same kernel by itself and is held to TCP on the device's link.
        # No TCP keepalive between ranks: UCX drops a connection whose idle probes go
        # unanswered for 16 s, and on a crowded shared plant (128 set-top boxes in one
        # Allreduce of 256 KiB, thousands of retransmits per connection) they were, and
        # MPICH then crashed in every rank. The devices are local; a hung job meets
        # shoal's own timeout.
        return {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0", "FI_PROVIDER": "tcp",
                "UCX_TCP_KEEPIDLE": "inf"}, []

    def head_launch(self, subnet: str, kinds: int = 1) -> HeadLaunch:
        # One hydra proxy (beside mpiexec) starts every rank. NOLOCAL: ranks of one
        # proxy would otherwise share memory; each is its own node. -pmi-port: ranks
        # reach the proxy's PMI server by TCP (PMI_PORT, the head's name on the plant)
        # instead of an inherited socket, so the business-card exchange crosses the
        # plant as a box's lookups at the head-end would; the rank's number is then
        # PMI_ID. MPICH has no on-demand exchange: every rank reads every card in
        # MPI_Init (CH4_ROOTS_ONLY_PMI only spares ranks that share a node).
        return HeadLaunch("PMI_ID", {"MPIR_CVAR_NOLOCAL": "1"}, {}, ["-pmi-port"])

    def deaths(self, lines: list[str]) -> list[Death]:
        deaths, pending = [], None
        for line in lines:
            if m := _HYDRA_PID.match(line.strip()):
                pending = m
            elif pending and (m := _HYDRA_SIGNAL.match(line.strip())):
                number = int(m.group(1))
                rank = int(pending.group(1)) if pending.group(1) else None
                deaths.append(Death(rank=rank, pid=int(pending.group(2)), host=pending.group(3),
                                    signal=number - 128 if number > 128 else number))
                pending = None
            elif m := _HYDRA_EXIT_STRING.search(line):
                # Hydra's block names the first process by rank that ended badly, which can
                # be one it killed itself (SIGKILL) after another rank's crash; the exit
                # string still names the crash's signal, if not its rank.
                number = int(m.group(1))
                if not any(d.signal == number for d in deaths):
                    deaths.append(Death(signal=number))
        return list(dict.fromkeys(deaths))

    def wildcard_transport(self) -> dict[str, str]:
        # With UCX (the default netmod) a server receiving from MPI_ANY_SOURCE and
        # answering two clients on other emulated devices stalls for good after a few
        # messages: one TCP connection per pair, nothing queued on either side, every
        # rank in MPI_Recv (30 lines reproduce it; explicit sources and 2 ranks do not).
        # The OFI netmod's tcp provider (FI_PROVIDER above) carries the same traffic
        # over the same eth0.
        return {"MPIR_CVAR_CH4_NETMOD": "ofi"}

    def forward_env(self, env: dict[str, str], names) -> dict[str, str]:
        return dict(env)  # hydra passes its whole environment to the ranks

    def nonblocking_twins(self, env) -> tuple[dict[str, str], list[str]]:
        # Measured: with MPIR_CVAR_BCAST_INTRA_ALGORITHM=binomial, an MPI_Ibcast of 16 KiB
        # on 8 ranks still scattered and gathered; with IBCAST's sched_binomial it sent
        # exactly the binomial tree's bytes.
        twins, lone = {}, []
        for coll, names in _SCHED_TWINS.items():
            name = f"MPIR_CVAR_{coll}_INTRA_ALGORITHM"
            chosen = env.get(name, "auto").strip().lower()
            twin = f"MPIR_CVAR_I{coll}_INTRA_ALGORITHM"
            if chosen == "auto" or twin in env:
                continue
            if chosen in names:
                twins[twin] = f"sched_{chosen}"
            else:
                lone.append(f"{name}={chosen}")
        return twins, lone


IMPLEMENTATION = MPICH()
