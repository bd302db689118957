"""Energy per benchmark point: one power session per node, summed per configuration.

Where the power comes from depends on where ranks run:

- this machine: the ``--power`` spec as given (``auto`` picks RAPL, hwmon or
  a battery, else the host model, labelled modelled);
- emulated devices: each device's profile model (idle/busy watts) driven by
  the CPU time its cgroup counts — modelled by construction, and labelled so;
- ssh hosts: a sampler process started on each host over the same ssh the
  launcher uses, streamed back, its clock offset measured over the stream.

A point's energy is the sum over the devices its ranks ran on of their
top-level channels (sub-zones such as RAPL's dram are parts of a package
and are not added again).
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import threading
from typing import Any, Iterator

from shoal import proc
from shoal.errors import ShoalError
from shoal.power import COLUMNS, open_session
from shoal.power.session import Session
from shoal.runs.store import Run

DEFAULT_RATE_HZ = 10.0
# Sessions of what every configuration shares (an emulated cluster's switch) are named so.
SHARED_PREFIX = "switch:"


class Meter:
    """Energy of any time window on any set of nodes, and the samples as rows."""

    def __init__(self, sessions: dict[str, Session], run: Run, shared: tuple[str, ...] = ()) -> None:
        self.sessions = sessions
        self.run = run
        # Sessions every configuration draws on once (an emulated cluster's switch).
        self.shared = shared
        self._lock = threading.Lock()

    def measure_idle(self, seconds: float) -> dict[str, float]:
        """Idle baseline of every node, measured at the same time (W per node)."""
        if seconds <= 0:
            return {}
        results: dict[str, float] = {}
        threads = []

        def measure(node: str, session: Session) -> None:
            idle = session.measure_idle(seconds)
            results[node] = sum(w for key, w in idle.items() if not _is_part(session, key))

        for node, session in self.sessions.items():
            thread = threading.Thread(target=measure, args=(node, session))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        return results

    def energy_between(self, t0: float, t1: float, nodes: list[str]) -> dict[str, Any] | None:
        chosen = ([self.sessions[n] for n in nodes if n in self.sessions and n not in self.shared]
                  or [s for n, s in self.sessions.items() if n not in self.shared])
        chosen += [self.sessions[n] for n in self.shared if n in self.sessions]
        energy = power = 0.0
        idle: float | None = 0.0
        kinds, sources, partial = set(), [], False
        for session in chosen:
            for channel in session.energy_between(t0, t1):
                if channel["part_of"] or channel["energy_J"] is None:
                    partial = partial or channel["energy_J"] is None
                    continue
                energy += channel["energy_J"]
                power += channel["mean_power_W"] or 0.0
                kinds.add(channel["kind"])
                sources.append(f"{channel['node']}:{channel['source']}")
                partial = partial or bool(channel["partial"])
                idle = None if idle is None or channel["idle_W"] is None else idle + channel["idle_W"]
        self.flush()
        if not sources:
            return None
        return {"energy_J": energy, "mean_power_W": power, "partial": partial,
                "kind": kinds.pop() if len(kinds) == 1 else "mixed",
                "source": ",".join(sorted(set(sources))), "idle_power_W": idle}

    def flush(self) -> None:
        """Append the samples not yet written to the run's power table."""
        with self._lock:
            for session in self.sessions.values():
                rows = session.new_samples()
                if rows:
                    self.run.append("power", rows, columns=COLUMNS)

    def notes(self) -> list[str]:
        return [note for s in self.sessions.values() for note in s.notes]


def _is_part(session: Session, key: str) -> bool:
    return any(ch.key == key and ch.part_of for ch in session.channels)


@contextlib.contextmanager
def open_meter(spec: str, where: Any, run: Run, idle_s: float = 0.0,
               rate_hz: float = DEFAULT_RATE_HZ) -> Iterator[Meter]:
    """Start sampling on every node of ``where`` for the duration of the block."""
    sessions = _sessions(spec, where, rate_hz)
    processes: list[proc.Process] = []
    try:
        for node, session in sessions.items():
            if session is None:
                sessions[node] = _remote_session(node, where, spec, rate_hz, processes)
            else:
                session.start()
        meter = Meter(sessions, run, tuple(n for n in sessions if n.startswith(SHARED_PREFIX)))
        idle = meter.measure_idle(idle_s)
        run.update_manifest(power={"spec": spec, "rate_hz": rate_hz, "nodes": sorted(sessions),
                                   "idle_W": idle or None, "notes": meter.notes()})
        for note in meter.notes():
            print(f"shoal: power: {note}", file=sys.stderr)
        yield meter
        meter.flush()
        faults = [f for s in sessions.values() for f in s.faults()]
        if faults:
            run.update_manifest(power_faults=faults)
            for fault in faults:  # energy over the gaps is flagged partial: say why
                print(f"shoal: warning: power: {fault}", file=sys.stderr)
    finally:
        for session in sessions.values():
            if session is not None:
                session.stop()
        for process in processes:
            process.stop()


def _sessions(spec: str, where: Any, rate_hz: float) -> dict[str, Session | None]:
    """A session per node; None marks a node whose session is remote (opened later)."""
    kind = getattr(where, "kind", "local")
    if kind == "local":
        return {"local": open_session(spec, rate_hz)}
    if kind == "emulated":
        if spec not in ("auto", "model"):
            raise ShoalError(f"--power {spec}: emulated devices have no sensors of their own; "
                             "use --power model (each device's profile, driven by its CPU use)")
        sessions: dict[str, Session | None] = {}
        for node in where.inventory.nodes:
            usage = where.emulated.usage_cgroup(node.name)
            if usage is None:
                raise ShoalError(f"no cgroup counts {node.name}'s CPU time, so its power cannot be "
                                 "modelled; run as root with a cpu (v2) or cpuacct (v1) controller")
            group, budget_cpus = usage
            item = (f"model:{node.profile.idle_W},{node.profile.busy_W},cores={budget_cpus:.6g},"
                    f"cgroup={group}")
            sessions[node.name] = open_session(item, rate_hz, node=node.name)
        # The switch (access point, gateway) the devices' links name, once each: a
        # constant draw (idle_W = busy_W in the model), charged to every configuration.
        for switch in where.switches():
            name = f"{SHARED_PREFIX}{switch.name}"
            sessions[name] = open_session(f"model:{switch.idle_W},{switch.idle_W}", rate_hz, node=name)
        return sessions
    return {node.name: None for node in where.inventory.nodes}


def _remote_session(node: str, where: Any, spec: str, rate_hz: float,
                    processes: list[proc.Process]) -> Session:
    """Start ``python -m shoal.power.sampler`` on a real host and stream it back."""
    from shoal.cluster import remote

    host = next(n.address for n in where.inventory.nodes if n.name == node)
    # The pre-flight checked that shoal's Python sits at the same path on every host.
    remote_cmd = shlex.join([sys.executable, "-m", "shoal.power.sampler", "--source", spec,
                             "--rate", str(rate_hz), "--node", node, "--control"])
    argv = [remote.ssh_program(), "-o", "BatchMode=yes", host, remote_cmd]
    process = proc.start(argv, stdin=proc.PIPE, stdout=proc.PIPE, bufsize=1)
    processes.append(process)
    session = open_session("none", rate_hz, node=node).start()  # filled by the stream

    def send(text: str) -> None:
        process.stdin.write(text)
        process.stdin.flush()

    session.attach_remote(process.stdout, send)
    return session
