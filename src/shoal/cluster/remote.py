"""Real clusters: ssh-reachable hosts and Slurm allocations.

The MPI's own launcher does the work (over ssh, or through its Slurm
support inside an allocation); shoal checks beforehand that every host
can run the job and says, one line per host, what is wrong.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from shoal import __version__, environment, proc
from shoal.cluster.inventory import Inventory
from shoal.errors import ShoalError
from shoal.mpi.discover import MPIInstall


def ssh_override() -> str | None:
    """The program the MPI launcher uses instead of plain ssh (SHOAL_SSH), if any."""
    return environment.SSH.get() or None


def ssh_program() -> str:
    """ssh, or the replacement named by SHOAL_SSH."""
    return environment.SSH.get() or proc.find("ssh") or "ssh"


def check_host(address: str, mpi: MPIInstall, binary: str | None, timeout: float = 15.0,
               stack: dict | None = None) -> str | None:
    """Return None if the host is ready, else one line saying what is wrong there.
    ``stack``: filled with the host's own stack (shoal.stackfacts, run there in the same call)."""
    probes = [f"echo mpi=$({shlex.quote(str(mpi.mpiexec))} --version 2>&1 | head -n 3 | tr '\\n' ' ')",
              f"echo shoal=$({shlex.quote(sys.executable)} -c 'import shoal; print(shoal.__version__)' 2>/dev/null)"]
    if stack is not None:
        probes.append(f"echo stack=$({shlex.quote(sys.executable)} -m shoal.stackfacts 2>/dev/null)")
    if binary:
        probes.append(f"test -x {shlex.quote(binary)} && echo binary=yes || echo binary=no")
    argv = [ssh_program(), "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", address, "; ".join(probes)]
    try:
        done = proc.run(argv, timeout=timeout)
    except proc.CommandTimeout:
        return f"{address}: ssh did not answer within {timeout:.0f} s; check the host is up"
    except (proc.CannotStart, proc.ToolMissing) as exc:
        return f"{address}: cannot run ssh ({exc}); install an ssh client"
    if not done.ok:
        return f"{address}: ssh failed ({done.tail(1) or 'no message'}); set up key-based ssh to this host"
    facts = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    if stack is not None:
        try:
            stack.update(json.loads(facts.get("stack") or "{}"))
        except ValueError:
            stack["unknown"] = "shoal.stackfacts printed no JSON there"
    local = proc.run([str(mpi.mpiexec), "--version"], env_add=mpi.env()).stdout
    local = " ".join(local.splitlines()[:3])
    if facts.get("mpi", "").split() != local.split():
        return (f"{address}: MPI differs from this machine's ({mpi.name} at {mpi.mpiexec}); "
                "install the same MPI at the same path on every host")
    if facts.get("shoal") != __version__:
        return (f"{address}: shoal {facts.get('shoal') or 'missing'} there, {__version__} here; "
                f"install shoal {__version__} with the same Python path ({sys.executable})")
    if binary and facts.get("binary") != "yes":
        return f"{address}: {binary} is missing; copy it there or build on a shared filesystem"
    return None


def preflight(inventory: Inventory, mpi: MPIInstall, binary: str | None = None,
              stacks: dict[str, dict] | None = None) -> list[str]:
    """Check every host in parallel; return one line per failing host (empty: all ready).
    ``stacks``: filled with each node's stack, by node name."""
    if stacks is not None:
        stacks.update({n.name: {} for n in inventory.nodes})
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = pool.map(lambda n: check_host(n.address, mpi, binary,
                                                stack=stacks[n.name] if stacks is not None else None),
                           inventory.nodes)
    return [line for line in results if line]


# -- Slurm -----------------------------------------------------------------------------
_BRACKET = re.compile(r"^(.*?)\[([^\]]+)\](.*)$")


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand Slurm's compact syntax: ``node[01-03,7],gpu1`` -> node01 node02 node03 node7 gpu1."""
    parts, depth, current = [], 0, ""
    for ch in nodelist:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        current += ch
    parts.append(current)
    hosts: list[str] = []
    for part in filter(None, (p.strip() for p in parts)):
        hosts.extend(_expand_one(part))
    return hosts


def _expand_one(pattern: str) -> list[str]:
    match = _BRACKET.match(pattern)
    if not match:
        return [pattern]
    prefix, ranges, suffix = match.groups()
    out: list[str] = []
    for item in ranges.split(","):
        if "-" in item:
            lo, hi = item.split("-", 1)
            if not (lo.isdigit() and hi.isdigit()) or int(lo) > int(hi):
                raise ShoalError(f"SLURM_JOB_NODELIST: cannot read range {item!r} in {pattern!r}")
            numbers = [str(n).zfill(len(lo)) for n in range(int(lo), int(hi) + 1)]
        elif item.isdigit():
            numbers = [item]
        else:
            raise ShoalError(f"SLURM_JOB_NODELIST: cannot read {item!r} in {pattern!r}")
        for number in numbers:
            out.extend(_expand_one(prefix + number + suffix))
    return out


def allocation_hosts() -> list[str]:
    """Hosts of the current Slurm allocation, via scontrol when present."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise ShoalError("the inventory says mode = \"slurm\" but this is not inside a Slurm "
                         "allocation (no SLURM_JOB_ID); run under salloc or sbatch")
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not nodelist:
        raise ShoalError("SLURM_JOB_NODELIST is not set; run shoal inside the allocation's shell")
    scontrol = proc.find("scontrol")
    if scontrol:
        done = proc.run([scontrol, "show", "hostnames", nodelist])
        if done.ok and done.stdout.split():
            return done.stdout.split()
    return expand_nodelist(nodelist)


_SRUN_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")


def slurm_stacks(hosts: list[str], timeout: float = 120.0) -> dict[str, dict]:
    """Each allocation host's stack (shoal.stackfacts), read there by one ``srun`` task per
    host, as the job's ranks will run; a host that printed nothing usable says why."""
    srun = proc.find("srun")
    if not srun:
        return {h: {"unknown": "srun not found here"} for h in hosts}
    # SLURMD_NODENAME: the name Slurm knows the host by (its hostname may differ).
    script = f'echo "$SLURMD_NODENAME $({shlex.quote(sys.executable)} -m shoal.stackfacts 2>/dev/null)"'
    # --label: srun passes a task's output on in pieces of 1 KiB, and unlabelled the pieces of
    # two tasks' long lines can interleave; labelled, each task's are put back in order.
    argv = [srun, f"--nodes={len(hosts)}", "--ntasks-per-node=1", f"--nodelist={','.join(hosts)}",
            "--label", "sh", "-c", script]
    try:
        done = proc.run(argv, timeout=timeout)
    except proc.CommandTimeout:
        return {h: {"unknown": f"srun did not finish within {timeout:.0f} s"} for h in hosts}
    stacks: dict[str, dict] = {h: {"unknown": "srun ran nothing there: " + (done.tail(1) or "no message")}
                               for h in hosts}
    pieces: dict[int, list[str]] = {}
    for line in done.stdout.splitlines():
        labelled = _SRUN_LABEL.match(line)
        if labelled:
            pieces.setdefault(int(labelled[1]), []).append(labelled[2])
    for parts in pieces.values():
        name, _, facts = "".join(parts).strip().partition(" ")
        if name in stacks:
            try:
                stacks[name] = json.loads(facts)
            except ValueError:
                stacks[name] = {"unknown": "shoal.stackfacts printed no JSON there"}
    return stacks


def slurm_inventory(inventory: Inventory) -> Inventory:
    """The allocation's hosts in order; each takes its inventory entry, else the first node's profile."""
    by_name = {n.name: n for n in inventory.nodes}
    template = inventory.nodes[0]
    nodes = []
    for host in allocation_hosts():
        known = by_name.get(host)
        nodes.append(known or replace(template, name=host, address=host))
    return Inventory(nodes, "slurm", inventory.source, inventory.host_speed, inventory.profiles)
