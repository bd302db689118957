"""Energy of any run's jobs: one power session per node, summed per configuration.

Where the power comes from, the cluster says (``Cluster.node_power``):

- this machine: the ``--power`` spec as given (``auto`` picks RAPL, hwmon or
  a battery, else the host model, labelled modelled);
- emulated devices: each device's profile model (idle/busy watts) driven by
  the CPU time it uses — modelled by construction, and labelled so;
- real hosts: a sampler process started on each host over the same ssh the
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
from typing import TYPE_CHECKING, Any, Iterator

from shoal import proc
from shoal.errors import ShoalError
from shoal.power import COLUMNS, open_session
from shoal.power.session import Session
from shoal.runs.store import Run

if TYPE_CHECKING:
    from shoal.execute.where import Where

DEFAULT_RATE_HZ = 10.0
# Sessions of what every configuration shares (an emulated cluster's switch) are named so.
SHARED_PREFIX = "switch:"


class Meter:
    """Energy of any time window on any set of nodes, and the samples as rows."""

    def __init__(self, sessions: dict[str, Session], run: Run, shared: tuple[str, ...] = (),
                 shared_of: dict[str, list[str]] | None = None) -> None:
        self.sessions = sessions
        self.run = run
        # Sessions every configuration draws on once (an emulated cluster's switch).
        self.shared = shared
        # Which of them each node's link goes through (None: every node uses them all).
        self.shared_of = shared_of
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

    def energy_between(self, t0: float, t1: float, nodes: list[str],
                       with_shared: bool = True) -> dict[str, Any] | None:
        """Energy of ``nodes`` over [t0, t1] on the monotonic clock, with the switches
        their links go through counted once (``with_shared``: a lone machine uses none)."""
        chosen = ([self.sessions[n] for n in nodes if n in self.sessions and n not in self.shared]
                  or [s for n, s in self.sessions.items() if n not in self.shared])
        shared = self._shared_for(nodes) if with_shared else []
        energy = power = shared_power = 0.0
        idle: float | None = 0.0
        kinds, sources, partial = set(), [], False
        for session in chosen + shared:
            for channel in session.energy_between(t0, t1):
                if channel["part_of"] or channel["energy_J"] is None:
                    partial = partial or channel["energy_J"] is None
                    continue
                energy += channel["energy_J"]
                power += channel["mean_power_W"] or 0.0
                if session in shared:
                    shared_power += channel["mean_power_W"] or 0.0
                kinds.add(channel["kind"])
                sources.append(f"{channel['node']}:{channel['source']}")
                partial = partial or bool(channel["partial"])
                idle = None if idle is None or channel["idle_W"] is None else idle + channel["idle_W"]
        self.flush()
        if not sources:
            return None
        return {"energy_J": energy, "mean_power_W": power, "partial": partial,
                "kind": kinds.pop() if len(kinds) == 1 else "mixed",
                "source": ",".join(sorted(set(sources))), "idle_power_W": idle,
                "shared_power_W": shared_power}

    def _shared_for(self, nodes: list[str]) -> list[Session]:
        names = set(self.shared)
        if self.shared_of is not None and nodes:
            names = {s for n in nodes for s in self.shared_of.get(n, [])}
        return [self.sessions[n] for n in self.shared if n in names and n in self.sessions]

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


def check_power(request: "Where") -> None:
    """Open the named power sources once (then close them): a missing sensor or a meter
    that does not answer is refused before the run starts, not found during it."""
    from shoal.power import spec

    items = spec.parse(request.power)
    if request.named_emulated:
        if request.power not in ("auto", "model"):
            raise ShoalError(f"--power {request.power}: emulated devices have no sensors of their "
                             "own; use --power model (each device's profile, driven by its CPU use)")
        return
    if request.on_cluster:
        return  # the sources are on the hosts; their samplers report what they find
    sources, _ = spec.build(items)
    for source in sources:
        source.close()


@contextlib.contextmanager
def energy_meter(request: Any, where: Any, run: Run) -> Iterator[Meter | None]:
    """A power meter for the request's runs (``power``, ``idle_s``), or None when
    power is not asked for."""
    if not request.power:
        yield None
        return
    with open_meter(request.power, where, run, idle_s=request.idle_s) as meter:
        yield meter


@contextlib.contextmanager
def open_meter(spec: str, where: Any, run: Run, idle_s: float = 0.0,
               rate_hz: float = DEFAULT_RATE_HZ) -> Iterator[Meter]:
    """Start sampling on every node of ``where`` for the duration of the block."""
    plans = where.node_power(spec)
    sessions: dict[str, Session] = {}
    processes: list[proc.Process] = []
    try:
        for plan in plans:
            if plan.remote:
                sessions[plan.node] = _remote_session(plan, rate_hz, processes)
            else:
                sessions[plan.node] = open_session(plan.spec, rate_hz,
                                                   node=plan.node if plan.named else None).start()
        shared_of = {node: [f"{SHARED_PREFIX}{switch}"] for node, switch in where.node_switches().items()}
        meter = Meter(sessions, run, tuple(n for n in sessions if n.startswith(SHARED_PREFIX)), shared_of)
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
            session.stop()
        for process in processes:
            process.stop()


def _remote_session(plan: Any, rate_hz: float, processes: list[proc.Process]) -> Session:
    """Start ``python -m shoal.power.sampler`` on a real host and stream it back."""
    node = plan.node
    # The pre-flight checked that shoal's Python sits at the same path on every host.
    remote_cmd = shlex.join([sys.executable, "-m", "shoal.power.sampler", "--source", plan.spec,
                             "--rate", str(rate_hz), "--node", node, "--control"])
    argv = [*plan.remote, remote_cmd]
    process = proc.start(argv, stdin=proc.PIPE, stdout=proc.PIPE, bufsize=1)
    processes.append(process)
    session = open_session("none", rate_hz, node=node).start()  # filled by the stream

    def send(text: str) -> None:
        process.stdin.write(text)
        process.stdin.flush()

    session.attach_remote(process.stdout, send)
    return session
