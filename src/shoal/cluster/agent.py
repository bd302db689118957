"""What runs on each host of an emulated cluster spread over several (``shoal cluster agent``).

The command that brings such a cluster up (``multihost.up``) starts one agent per host
through the host engine (``hostengine``) three times at most:

- ``probe``: says what the host offers: its shoal version, the CPUs this command may use
  (under Slurm no more than the allocation gives the node), its core's speed, and its
  clock as chrony sees it;
- ``up``: reads the plan on stdin, builds the host's share of the devices exactly as a one-host cluster is built
  (``EmulatedCluster``: namespaces, per-core CPU budgets, memory limits, the forwarder)
  at the dilation every host shares, with the cluster's addresses and its forwarder
  linked to the other hosts' (``crosslinks``), says it is built, waits until its
  forwarder has heard every other host's (the underlay's round trip and the clocks'
  offsets measured), says it is ready with them, and holds it until a stopping
  signal (``cluster down``, the end of the Slurm step or job), then removes it;
- ``down``: removes the share on this host: its agent is asked to stop, and whatever is
  still recorded is removed as any leftover is;
- ``links``: what this host's forwarder counted of the frames from other hosts (per
  sending device: frames, late, lost), for ``crosslinks``' judgement of a run.

Every answer is one line ``shoal-agent {json}`` on stdout naming the host, so that the
lines of all hosts, interleaved by srun or ssh, can be told apart from anything else; a
long one goes as short ``shoal-agent-part`` lines (srun splits and interleaves long lines
of its tasks), put together again by ``read_reports``.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import sys
import time

from shoal import __version__, proc
from shoal.cluster import (agentns, chrony, cpulimit, crosslinks, hostengine, hostspeed, linkemu, state,
                           sysns, userns)
from shoal.errors import ShoalError

PREFIX = "shoal-agent "
PART_PREFIX = "shoal-agent-part "
# Characters of a report per part: a part's line stays under 500 B even with its text escaped.
PART_CHARS = 200
# How long ``down`` waits for the agent holding a share to remove it itself.
STOP_WAIT_S = 15.0
# Probes answered by every other host's forwarder before the share is ready (its window).
PROBES_WANTED = 32
# How long a built share waits for the other hosts' forwarders (they may still be building).
PEERS_WAIT_S = 900.0
# How long the underlay is measured again while its windows are not quiet, and how long a
# new window takes to fill (32 probes, 2 ms apart, and the answer to the last). A host busy
# building its share answered late for longer than 5 s on a loaded 2-core machine (a 146 ms
# one-way "underlay" between two shares of one host), so windows are taken for up to 30 s.
SETTLE_S = 30.0
REPROBE_WAIT_S = 0.15


def host_name(given: str | None = None) -> str:
    """This host's name as the engine knows it: given (ssh), Slurm's node name, the hostname."""
    return given or os.environ.get(hostengine.SLURM_NODE_NAME) or socket.gethostname()


def say(host: str, **facts) -> None:
    """One report. srun interleaves long lines of its tasks (here 29 of 200 lines of 2 kB
    from two tasks at once, none of 500 B): a long report goes out in short parts."""
    text = json.dumps({"host": host, **facts})
    if len(text) <= PART_CHARS:
        print(PREFIX + text, flush=True)
        return
    seq = secrets.token_hex(4)
    parts = [text[i:i + PART_CHARS] for i in range(0, len(text), PART_CHARS)]
    for i, part in enumerate(parts):
        print(PART_PREFIX + json.dumps({"host": host, "seq": seq, "i": i, "n": len(parts), "text": part}),
              flush=True)


def read_reports(text: str) -> list[dict]:
    """The agents' reports in a command's output, each where its last part came (anything
    else is left out, as is a report a part of which is missing)."""
    reports, parts = [], {}
    for line in text.splitlines():
        try:
            if line.startswith(PREFIX):
                reports.append(json.loads(line[len(PREFIX):]))
            elif line.startswith(PART_PREFIX):
                part = json.loads(line[len(PART_PREFIX):])
                got = parts.setdefault((part["host"], part["seq"]), {})
                got[int(part["i"])] = part["text"]
                if len(got) == int(part["n"]):
                    reports.append(json.loads("".join(got[i] for i in range(len(got)))))
        except (ValueError, KeyError, TypeError):
            continue
    return reports


def capacity() -> float:
    """The CPUs the devices here may use: this command's (cpuset, cgroup quota), and under
    Slurm no more than the allocation gives this node."""
    usable = cpulimit.capacity()
    allocated = os.environ.get("SLURM_CPUS_ON_NODE", "")
    return min(usable, float(allocated)) if allocated.isdigit() and int(allocated) > 0 else usable


def slurm_step() -> str | None:
    """JOB.STEP of the Slurm step this agent runs in (None: not under Slurm)."""
    job, step = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_STEP_ID")
    return f"{job}.{step}" if job and step else None


def probe(host: str, host_speed: float | None) -> int:
    problems = []
    if agentns.needed():  # an ordinary user's share is built in a user namespace
        try:
            userns.check_allowed()
        except ShoalError as exc:
            problems.append(str(exc))
    for tool in ("tc", "unshare", "ip", "nsenter"):
        if proc.find(tool) is None:
            problems.append(f"{tool} is missing; install iproute2 and util-linux")
    try:
        speed = hostspeed.resolve(host_speed).describe()
    except ShoalError as exc:
        speed, problems = None, [*problems, str(exc)]
    say(host, shoal=__version__, python=sys.executable, cpus=capacity(), host_speed=speed,
        problems=problems, clock=chrony.tracking())
    return 0


def read_plan(stream, cluster_id: str | None) -> dict:
    """The plan ``multihost`` sends every agent on its stdin: one line of JSON, for the
    cluster its command line names (inside an ordinary user's namespace, as the agent
    outside read it)."""
    try:
        plan = agentns.read_plan() or json.loads(stream.readline())
    except ValueError as exc:
        raise ShoalError(f"cluster agent up reads its plan (JSON) on stdin: {exc}; it is started "
                         "by 'shoal cluster up --hosts'") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("hosts"), dict):
        raise ShoalError("cluster agent up: the plan on stdin names no hosts; it is started by "
                         "'shoal cluster up --hosts'")
    if plan.get("id") != cluster_id:
        raise ShoalError(f"cluster agent up --id {cluster_id}: the plan on stdin is for cluster "
                         f"{plan.get('id')}")
    return plan


def up(host: str, plan: dict, argv: list[str]) -> int:
    """Build this host's share, say so, and hold it until a stopping signal (an ordinary
    user's in a user namespace: ``agentns``; ``argv`` re-runs this command there)."""
    from shoal.cluster.emulated import EmulatedCluster, inventory_from_description

    if agentns.needed() and host in plan["hosts"]:
        try:
            return agentns.run(argv, plan, host)
        except ShoalError as exc:
            say(host, error=str(exc), down=True)
            return 1

    say(host, started=True, step=slurm_step())  # before anything is made: whom to stop
    share = plan["hosts"].get(host)
    if share is None:  # a host of the allocation that got no device
        say(host, idle=True)
        return 0
    try:
        inventory = inventory_from_description(share["inventory"], f"host {host}'s share")
        cluster = EmulatedCluster(inventory, share["id"], persistent=True,
                                  calibrate=plan["calibrate"], dilation=plan["dilation"],
                                  host=hostspeed.HostSpeed.from_record(share["host_speed"]))
        # Recorded from its first write, so that 'down' finds a share still coming up.
        cluster.part_of = {"cluster": plan["id"], "host": host}
        links = plan.get("links")
        if links:
            from shoal.cluster.emulated import mac_of

            cluster.links_across = crosslinks.ShareLinks.from_plan(links, host, mac_of, _links_of(plan),
                                                                   udp_fd=agentns.udp_fd())
        cluster.up()
    except ShoalError as exc:  # refused, or failed: up removed whatever it had made
        say(host, error=str(exc), down=True)
        return 1
    except BaseException:  # stopped while it built the share: up removed it
        say(host, down=True)
        raise
    try:
        launcher = _write_launcher(cluster, plan) if links else None
        say(host, built=True)
        try:
            underlay = _hear_peers(cluster, links, host) if links else {}
        except ShoalError as exc:  # the share goes (below) with the refusal
            say(host, error=str(exc))
            return 1
        record = state.read(cluster.id) or cluster.record
        say(host, ready=True, id=cluster.id, clock_s=time.time(), dilation=cluster.dilation,
            nodes=record.get("nodes", {}),
            emulation=record.get("emulation", {}), underlay=underlay, launcher=launcher,
            agent=_whom_to_stop())
        while True:  # a stopping signal raises (proc.install_signal_handlers)
            signal.pause()
    finally:
        with proc.signals_held():
            cluster.down()
            say(host, down=True)


def _whom_to_stop() -> dict:
    """This agent's process on the host (an ordinary user's: the one outside, which owns
    the user namespace)."""
    owner = state.host_owner()
    if owner is not None:
        return {"pid": owner[0], "start": owner[1]}
    return {"pid": os.getpid(), "start": sysns.process_start_time(os.getpid())}


def _links_of(plan: dict):
    """A device's link type, whichever host's share it is in (a split medium's owner runs
    the links of the other hosts' devices on it)."""
    from shoal.cluster.emulated import inventory_from_description

    links = {}
    for other, share in plan["hosts"].items():
        for node in inventory_from_description(share["inventory"], f"host {other}'s share").nodes:
            links[node.name] = node.link
    return links.__getitem__


def _write_launcher(cluster, plan: dict) -> str:
    """The launcher helper of the whole cluster in this share's directory (``spreadexec``):
    every device, by name and address, with its host and share; the engine that reaches them."""
    from shoal.cluster import spreadexec
    from shoal.cluster.emulated import address_of

    members = {}
    for other, entry in plan["links"]["hosts"].items():
        for name, index in entry["indices"].items():
            if name != "head":
                members[name] = members[address_of(index)] = {"host": other, "share": plan["hosts"][other]["id"]}
    return spreadexec.write(str(cluster.directory), cluster.id, plan["id"], plan["engine"], members,
                            relay=agentns.relay_path(), host_state=state.host_root())


def _forwarder_stats(cluster) -> dict:
    record = state.read(cluster.id) or cluster.record
    return linkemu.stats(record["forwarder"], cluster.directory / "forwarder.json")


def _hear_peers(cluster, links: dict, host: str) -> dict:
    """Wait until this host's forwarder has had its probes answered by every other host's
    (a full window each); what it measured of each: {host: Underlay.describe()}. A window
    that is not quiet (``Underlay.quiet``: a host was busy, building its share) is measured
    afresh, for up to ``SETTLE_S``; the quietest window seen is the one kept."""
    others = [h for h in links["hosts"] if h != host]
    deadline = time.monotonic() + PEERS_WAIT_S
    settled_by = None
    best: dict[str, crosslinks.Underlay] = {}
    windows = 1
    while True:
        views = crosslinks.underlay_views(_forwarder_stats(cluster), links, host)
        if all(h in views and views[h].probes >= PROBES_WANTED for h in others):
            for h in others:
                if h not in best or views[h].rtt_median_s < best[h].rtt_median_s:
                    best[h] = views[h]
            settled_by = settled_by or time.monotonic() + SETTLE_S
            if all(best[h].quiet for h in others) or time.monotonic() > settled_by:
                return {h: {**best[h].describe(), "windows": windows} for h in others}
            forwarder = (state.read(cluster.id) or cluster.record)["forwarder"]["pid"]
            os.kill(forwarder, signal.SIGUSR2)  # the forwarder probes a new window
            windows += 1
            time.sleep(REPROBE_WAIT_S)
            continue
        if time.monotonic() > deadline:
            silent = [h for h in others if h not in views]
            raise ShoalError(f"the forwarders of {', '.join(silent)} did not answer over UDP port "
                             f"{links['port']} within {PEERS_WAIT_S:.0f} s; open it between the hosts")
        time.sleep(0.05)


def links(host: str, cluster_id: str) -> int:
    """Say what this host's forwarder counted of the frames from other hosts."""
    for record in state.records():
        part = record.get("part_of") or {}
        if part.get("cluster") != cluster_id or part.get("host") != host:
            continue
        if record.get("in_user_namespace") and not userns.inside():  # where the forwarder is
            userns.enter(record, ["cluster", "agent", "links", "--id", cluster_id, "--host", host])
        if record.get("forwarder"):
            counted = linkemu.stats(record["forwarder"], state.cluster_dir(record["id"]) / "forwarder.json")
            say(host, links=crosslinks.counted(counted))
            return 0
    say(host, links=None)
    return 0


def down(host: str, cluster_id: str) -> int:
    """Remove this host's share of ``cluster_id``: its agent removes it, else it is reaped."""
    removed = []
    for record in state.records():
        part = record.get("part_of") or {}
        if part.get("cluster") != cluster_id or part.get("host") != host:
            continue
        if state.owner_alive(record) and record["owner_pid"] != os.getpid():
            try:
                os.kill(record["owner_pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + STOP_WAIT_S
            while state.owner_alive(record) and time.monotonic() < deadline:
                time.sleep(0.05)  # until the agent has removed its share and ended
        left = state.read(record["id"])
        if left is not None:  # the agent was gone or stuck: remove what its record names
            if state.owner_alive(left):
                os.kill(left["owner_pid"], signal.SIGKILL)
            state.remove(left)
        removed.append(record["id"])
    say(host, removed=removed)
    return 0
