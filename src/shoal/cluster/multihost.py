"""One emulated cluster spread over several hosts (``shoal cluster up --hosts slurm|FILE``).

The hosts come from an engine (``hostengine``: a Slurm allocation, or an ssh inventory).
This module is the coordinator's side: it asks every host's agent (``agent``) what the host
offers, places the devices by their CPU budgets against each host's capacity, chooses one
dilation for all hosts (the largest any host needs), starts the agents that build and hold
each host's share, and records all of it so that ``cluster down`` removes it on every host.

Placement keeps the inventory's order: host 1 takes the first devices until it holds its
share of the whole budget (in proportion to the CPUs it has for devices), then host 2, and
so on, so that a run of alike devices (one plant) stays together where it can.

Devices on different hosts reach each other through their hosts' forwarders (``crosslinks``:
one address plan, a UDP port, the peers); once every agent is ready, the underlay's delays
they measured are checked against the links' latencies, and recorded with the hosts' clock
offsets (``time`` in the record).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from shoal import __version__, proc
from shoal.cluster import agent, crosslinks, dilation, hostengine, hostspeed, linkmodel, state, sysns
from shoal.cluster.inventory import Inventory, Node
from shoal.errors import ShoalError

PROBE_TIMEOUT_S = 600.0  # a host measures its core's speed once (then it is cached there)
UP_TIMEOUT_S = 900.0     # calibrating 512 devices' cores takes minutes
# Once every share is built, how long its forwarder may take to hear every other host's.
PEERS_TIMEOUT_S = 20.0
DOWN_TIMEOUT_S = 120.0
STOP_WAIT_S = 10.0


@dataclass(frozen=True)
class HostOffer:
    """What one host offers its share of devices: CPUs and its core's speed; its clock as
    chrony sees it (``chrony.tracking``)."""

    name: str
    cpus: float
    speed: hostspeed.HostSpeed
    clock: dict | None = None

    @property
    def room(self) -> float:
        """CPUs for device budgets at real time, once the host's reserve is kept."""
        return self.cpus - dilation.reserve(self.cpus)

    def budget(self, node: Node) -> float:
        """A device's CPUs on this host at real time (all its cores)."""
        return node.profile.cores * self.speed.core_share(node.profile)


def agent_argv(action: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "shoal", "cluster", "agent", action, *options]


def share_id(cluster_id: str, index: int) -> str:
    return f"{cluster_id}-{index}"


def check_id(cluster_id: str, hosts: int) -> None:
    """Each host's share is a cluster named ID-K, within the ids' 12 characters."""
    longest = len(share_id(cluster_id, hosts))
    if longest > 12:
        raise ShoalError(f"cluster id {cluster_id!r} is too long for {hosts} hosts (each host's share "
                         f"is named {share_id(cluster_id, hosts)}); give --name of at most "
                         f"{12 - (longest - len(cluster_id))} characters")


# -- asking the agents -------------------------------------------------------------------
def on_every_host(engine: hostengine.Engine, argv: list[str], timeout: float) -> dict[str, dict]:
    """Run an agent action on every host; its report per host. A host that gave none is
    refused in one line naming it, with what its command said."""
    def one(command: list[str]) -> tuple[list[dict], str]:
        try:
            done = proc.run(command, timeout=timeout)
        except proc.CommandTimeout:
            return [], f"no answer within {timeout:.0f} s"
        return agent.read_reports(done.stdout), (done.tail(1) or f"exit status {done.returncode}")

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, engine.commands(argv)))
    reports = {r["host"]: r for found, _ in results for r in found}
    missing = [h for h in engine.hosts if h not in reports]
    if missing:
        said = "; ".join(sorted({why for _, why in results}))
        raise ShoalError(f"host {', '.join(missing)}: its agent did not answer ({said}); check that "
                         f"the host is up and has shoal {__version__} at {sys.executable}")
    return reports


def probe(engine: hostengine.Engine, host_speed: float | None) -> list[HostOffer]:
    options = [] if host_speed is None else ["--host-speed", f"{host_speed:g}"]
    reports = on_every_host(engine, agent_argv("probe", *options), PROBE_TIMEOUT_S)
    problems = []
    for host in engine.hosts:
        report = reports[host]
        if report.get("shoal") != __version__:
            problems.append(f"host {host}: shoal {report.get('shoal') or 'missing'} there, "
                            f"{__version__} here; install shoal {__version__} there")
        problems += [f"host {host}: {p}" for p in report.get("problems", [])]
    if problems:
        raise ShoalError(" | ".join(problems))
    return [HostOffer(h, float(reports[h]["cpus"]), hostspeed.HostSpeed.from_record(reports[h]["host_speed"]),
                      reports[h].get("clock")) for h in engine.hosts]


# -- placement and dilation ----------------------------------------------------------------
def place(nodes: list[Node], offers: list[HostOffer]) -> dict[str, list[Node]]:
    """Devices in the inventory's order onto the hosts in turn, each host taking its share of
    the whole budget in proportion to its room (see the module's docstring)."""
    usable = [o for o in offers if o.room > 0]
    if not usable:
        raise ShoalError("no host has CPUs left for devices after its reserve; use larger hosts")
    mean_budget = {n.name: sum(o.budget(n) for o in usable) / len(usable) for n in nodes}
    ratio = sum(mean_budget.values()) / sum(o.room for o in usable)  # load per CPU of room, all alike
    placed: dict[str, list[Node]] = {o.name: [] for o in offers}
    i, load = 0, 0.0
    for node in nodes:
        offer = usable[i]
        budget = offer.budget(node)
        # On to the next host once this one would pass its share by more than half this device.
        if placed[offer.name] and load + budget / 2 > ratio * offer.room and i + 1 < len(usable):
            i, load = i + 1, 0.0
            offer = usable[i]
            budget = offer.budget(node)
        placed[offer.name].append(node)
        load += budget
    return placed


def dilations(placed: dict[str, list[Node]], offers: list[HostOffer]) -> dict[str, float]:
    """The smallest whole D at which each host's share fits it."""
    return {o.name: dilation.choose([o.budget(n) for n in placed[o.name]], o.cpus)
            for o in offers if placed[o.name]}


# -- up and down ---------------------------------------------------------------------------
def up(engine: hostengine.Engine, inventory: Inventory, cluster_id: str, host_speed: float | None,
       dilation_asked: float | None, calibrate: bool) -> dict:
    """Bring the cluster up on every host; return its record. Refused in one line naming the
    host and what to do; nothing is left on the hosts that did come up."""
    check_id(cluster_id, len(engine.hosts))
    state.reap()
    if state.read(cluster_id) is not None:
        raise ShoalError(f"an emulated cluster named {cluster_id} is already up; "
                         f"'shoal cluster down {cluster_id}' first or choose another name")
    offers = probe(engine, host_speed)
    placed = place(inventory.nodes, offers)
    fits = dilations(placed, offers)
    d = dilation.check(dilation_asked) if dilation_asked is not None else max(fits.values())
    described = inventory.describe()
    shares = _shares(cluster_id, engine.hosts, placed, offers, fits, described)
    links = None
    if len(shares) > 1:  # devices on several hosts: their forwarders are linked
        links = crosslinks.plan(cluster_id, {h: [n.name for n in placed[h]] for h in shares},
                                {h: crosslinks.underlay_address(h, engine.addresses.get(h)) for h in shares},
                                crosslinks.split_media({h: placed[h] for h in shares}, d))
    record = {"id": cluster_id, "owner_pid": os.getpid(), "owner_start": sysns.process_start_time(os.getpid()),
              "persistent": True, "created": time.time(), "dilation": d, "netns": [], "uts": [], "cgroups": [],
              "inventory": described, "nodes": {}, "hosts": engine.describe(), "launchers": [],
              "shares": {h: {k: v for k, v in s.items() if k != "inventory"} | {"devices": [
                  n.name for n in placed[h]]} for h, s in shares.items()},
              "emulation": {"dilation": d, "dilation_asked": dilation_asked,
                            "dilation_reason": _reason(d, dilation_asked, fits)},
              "time": {"hosts": {o.name: {"chrony": o.clock} for o in offers}}}
    if links:
        record["links"] = {k: v for k, v in links.items() if k != "key"}
    state.write(record)  # intent first: 'cluster down ID' reaches every host from here on
    try:
        _start_agents(engine, record, {"id": cluster_id, "dilation": d, "calibrate": calibrate,
                                       "hosts": shares, "engine": engine.describe(),
                                       **({"links": links} if links else {})})
        if links:
            _check_underlay(record, placed, d)
            state.write(record)
    except BaseException:
        with proc.signals_held():
            down(record)
        raise
    return record


def _shares(cluster_id: str, hosts: list[str], placed: dict[str, list[Node]], offers: list[HostOffer],
            fits: dict[str, float], described: dict) -> dict[str, dict]:
    """What each host with devices builds: its share's id (ID-K, K its place among the hosts),
    its CPUs and core speed as it said, and its devices as an inventory."""
    by_name = {o.name: o for o in offers}
    shares = {}
    for index, host in enumerate(hosts, start=1):
        names = {n.name for n in placed[host]}
        if names:
            shares[host] = {"id": share_id(cluster_id, index), "cpus": by_name[host].cpus,
                            "fits_at": fits[host], "host_speed": by_name[host].speed.describe(),
                            "inventory": {**described, "nodes": [n for n in described["nodes"]
                                                                 if n["name"] in names]}}
    return shares


def _reason(d: float, asked: float | None, fits: dict[str, float]) -> str:
    each = ", ".join(f"{h} at D = {f:g}" for h, f in fits.items())
    if asked is not None:
        return f"asked (--dilation {d:g}); the hosts' shares fit {each}"
    return f"the largest any host needs: {each}"


def _start_agents(engine: hostengine.Engine, record: dict, plan: dict) -> None:
    """Start the agents that hold the shares (outliving this command), and wait until every
    host with a share says it is ready, or one says why it cannot be."""
    import json

    directory = state.cluster_dir(record["id"])
    log, plan_file = directory / "agents.log", directory / "plan.json"
    # On the agents' stdin, not in their argv: a plan of thousands of devices would pass
    # the kernel's limit on one argument (128 KiB).
    plan_file.write_text(json.dumps(plan, separators=(",", ":")) + "\n")
    with open(log, "a") as out:
        # The id in its argv says, in ps, whose agent it is.
        for command in engine.commands(agent_argv("up", "--id", record["id"])):
            with open(plan_file) as plan_in:
                process = proc.start(command, stdin=plan_in, stdout=out, stderr=out)
            record["launchers"].append({"pid": process.pid, "start": sysns.process_start_time(process.pid)})
            state.write(record)
            process.detach()
    deadline = time.monotonic() + UP_TIMEOUT_S
    waiting = set(plan["hosts"])
    all_built = None  # when the last share was built
    while True:
        said = agent.read_reports(log.read_text(errors="replace"))
        reports = {r["host"]: r for r in said}
        failed = [f"host {h}: {r['error']}" for h, r in reports.items() if r.get("error")]
        if failed:
            raise ShoalError(" | ".join(failed) + " (nothing is left on the hosts that came up)")
        if all(reports.get(h, {}).get("ready") for h in waiting):
            break
        built = {r["host"] for r in said if r.get("built")}
        if all_built is None and built >= waiting:
            all_built = time.monotonic()
        if "links" in plan and all_built is not None and time.monotonic() - all_built > PEERS_TIMEOUT_S:
            deaf = sorted(h for h in waiting if not reports.get(h, {}).get("ready"))
            raise ShoalError(f"the forwarders on {', '.join(deaf)} heard nothing from the other hosts' over "
                             f"UDP port {plan['links']['port']} within {PEERS_TIMEOUT_S:.0f} s of every share "
                             "being built; open that port between the hosts (nothing is left on them)")
        if not any(_alive(a) for a in record["launchers"]):
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-2:])
            raise ShoalError(f"the agents on {', '.join(sorted(waiting - set(reports)))} ended without a word "
                             f"({tail or 'no output'}); check that shoal {__version__} runs there")
        if time.monotonic() > deadline:
            raise ShoalError(f"the agents on {', '.join(sorted(h for h in waiting if h not in reports))} "
                             f"were not ready within {UP_TIMEOUT_S:.0f} s")
        time.sleep(0.1)
    for host in waiting:
        report = reports[host]
        record["shares"][host]["agent"] = report["agent"]
        if report.get("launcher"):
            record["shares"][host]["launcher"] = report["launcher"]
        for name, node in report["nodes"].items():
            record["nodes"][name] = {**node, "host": host, "share": report["id"]}
        record["emulation"].setdefault("hosts", {})[host] = report.get("emulation", {})
        if report.get("underlay"):
            record["time"].setdefault("underlay", {})[host] = report["underlay"]
        if "clock_s" in report:  # when the share was ready, on its host's real-time clock
            record["time"].setdefault("ready_s", {})[host] = report["clock_s"]
        for fact in ("link_emulator", "cpu_limit"):  # alike on every host; said once
            if fact in report.get("emulation", {}):
                record["emulation"].setdefault(fact, report["emulation"][fact])
    order = [n["name"] for n in record["inventory"]["nodes"]]  # the inventory's, not the answers'
    record["nodes"] = {name: record["nodes"][name] for name in order if name in record["nodes"]}
    state.write(record)


def _check_underlay(record: dict, placed: dict[str, list[Node]], d: float) -> None:
    """Refuse a link between hosts whose latency is below the underlay's one-way delay over
    D (``crosslinks.check``), and a split medium whose lookahead is (``check_split``); record
    each host's clock offset against the first host."""
    underlay = record["time"].get("underlay", {})
    delays = {(a, b): view["one_way_s"] for a, views in underlay.items() for b, view in views.items()}
    hosts = [h for h in record["shares"]]
    pairs = []
    for i, host_a in enumerate(hosts):
        for host_b in hosts[i + 1:]:
            seen = set()
            for a in placed[host_a]:
                for b in placed[host_b]:
                    if (a.link.name, b.link.name) in seen:
                        continue
                    seen.add((a.link.name, b.link.name))
                    pairs.append((a.name, host_a, b.name, host_b, linkmodel.path(a.link, b.link).latency_s))
    first = hosts[0]
    record["time"]["clock_offset_s"] = {first: 0.0, **{h: v["clock_offset_s"]
                                                       for h, v in underlay.get(first, {}).items()}}
    record["time"]["underlay_one_way_s"] = max(delays.values(), default=0.0)
    # One start time for the whole cluster: when its last share was ready, on the first host's
    # clock (each host's ready time less its offset), and that instant on every host's clock;
    # what puts the hosts' logs and samples on one time line.
    offsets, ready = record["time"]["clock_offset_s"], record["time"].get("ready_s", {})
    if ready and all(h in offsets for h in ready):
        started = max(t - offsets[h] for h, t in ready.items())
        record["time"]["started"] = {"first_host_s": started,
                                     "by_host_s": {h: started + offsets[h] for h in offsets}}
    crosslinks.check(pairs, delays, d)
    crosslinks.check_split(record["links"].get("split", {}), delays, d)


def _alive(entry: dict) -> bool:
    """Whether a launcher (srun, ssh) still runs: one this command started is reaped once it
    ends, and a zombie counts as ended."""
    if not entry.get("pid"):
        return False
    try:
        os.waitpid(entry["pid"], os.WNOHANG)
    except ChildProcessError:
        pass
    info = proc.stat(entry["pid"])
    return info is not None and info.alive and info.start == entry.get("start")


def down(record: dict) -> list[str]:
    """Remove the cluster on every host, then its record here; return a line per host that
    could not be reached (what is left there goes with that host's next 'cluster down')."""
    engine = hostengine.from_record(record["hosts"])
    launchers = [a for a in record.get("launchers", []) if _alive(a)]
    steps = _started_steps(record, engine, launchers)
    if steps:
        # Every agent of the step is asked to stop, at whatever point of its start it is (one
        # that has recorded nothing yet then makes nothing); each removes its share itself.
        # (A stop to srun itself would have Slurm kill them at once, their shares left.)
        scancel = proc.tool("scancel", "stopping the agents' Slurm step", "slurm-client")
        for step in steps:
            proc.run([scancel, "--signal=TERM", step])
        deadline = time.monotonic() + STOP_WAIT_S
        while any(_alive(a) for a in launchers) and time.monotonic() < deadline:
            time.sleep(0.05)
    problems = []
    if not _all_down(record):
        try:  # every host removes what is still recorded there (an agent lost or stuck)
            on_every_host(engine, agent_argv("down", "--id", record["id"]), DOWN_TIMEOUT_S)
        except ShoalError as exc:
            problems.append(str(exc))
    _signal([a for a in launchers if _alive(a)], signal.SIGKILL)
    state.remove(record)
    return problems


def _all_down(record: dict) -> bool:
    """Whether the agent of every host with a share said it removed it."""
    log = state.cluster_dir(record["id"]) / "agents.log"
    reports = agent.read_reports(log.read_text(errors="replace")) if log.exists() else []
    return set(record.get("shares", {})) <= {r["host"] for r in reports if r.get("down")}


def _started_steps(record: dict, engine: hostengine.Engine, launchers: list[dict]) -> list[str]:
    """The Slurm steps the agents run in, once every agent has said it started (or its
    launcher has ended): an agent not started yet would miss the stop."""
    log = state.cluster_dir(record["id"]) / "agents.log"
    deadline = time.monotonic() + STOP_WAIT_S
    while True:
        reports = agent.read_reports(log.read_text(errors="replace")) if log.exists() else []
        started = {r["host"] for r in reports if r.get("started")}
        if started >= set(engine.hosts) or not any(_alive(a) for a in launchers) \
                or time.monotonic() > deadline:
            return sorted({r["step"] for r in reports if r.get("started") and r.get("step")})
        time.sleep(0.05)


def _signal(entries: list[dict], signum: int) -> None:
    for entry in entries:
        try:
            os.kill(entry["pid"], signum)
        except ProcessLookupError:
            pass


def is_spread(record: dict) -> bool:
    """Whether a record is a cluster spread over hosts (its devices are on them, not here)."""
    return "hosts" in record and "shares" in record
