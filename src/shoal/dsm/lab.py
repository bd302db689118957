"""`shoal dsm lab`: seed 003's Experiments E, F and G on libshoalsdsm.

E   the Full, Burst and Lock patterns (1 server, 2 clients): wall time,
    server CPU load over the run and inside the quiet windows (Burst: while
    every client pauses; Lock: while a client holds the lock asleep)
F   Hough and Videostream (7 ranks each): wall time, frames per second
G   Videostream on Table 1's RECS placement: Table 2's columns (time, FPS,
    W, kJ, FPS/W) plus J per frame, from the measured run and the modelled
    power of each device (labelled "modelled"); and Fig. 10: each node's
    power every 180 ms (modelled from its ranks' CPU samples), its spread,
    peak and energy (shoal.dsm.nodepower)

Contenders follow seed 003's Table 3: busy (Aggressive), degraded (the
MPI's own first wait knob without libshoalwait, from its module in
shoal.mpi.kinds), linear:0,1000,1 (the seed's adaptive receive: Adaptive
Aggressive), degraded+linear:0,1000,1 (the same with the Degraded knob set: Adaptive
Degraded), static sleeps of 0 and 100 us, backoff and auto. Rounds interleave the contenders so a slow
moment of a shared machine hits all of them alike.

Here every rank shares this machine's cores; on a cluster (``LabRequest.where``: emulated devices
or hosts) G's placement puts its devices on the first nodes, each rank with its device's own CPU,
and E and F fill the nodes in equal blocks. Times are then the devices' and CPU seconds those of
the devices' cores (``apps.run_on_cluster``), so Fig. 10's busy shares are the devices' own.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from shoal import environment
from shoal.dsm import apps, placement
from shoal.errors import ShoalError
from shoal.mpi.base import MPIInstall
from shoal.runs.store import Run
from shoal.wait import lab as wait_lab

if TYPE_CHECKING:
    from shoal.execute.session import Session
    from shoal.execute.where import Where

EXPERIMENTS = ("E", "F", "G")
DEFAULT_MODES = ("busy", "degraded", "linear:0,1000,1", "degraded+linear:0,1000,1", "sleep:0",
                 "sleep:100", "backoff", "auto")
# A first look (--quick): Aggressive, Degraded, the seed's Adaptive as it ran (seed003: its
# linear receive under the kernel's default timer slack) and libshoalwait's backoff, one
# round, short runs. Each 7-rank launch costs 1-2 s here. (Under the default MPI on two crowded
# cores the same linear receive with 1 ns slack took 41 s for the quick Hough, 1.0 s with
# the default slack.)
QUICK_MODES = ("busy", "degraded", "seed003", "degraded+seed003", "backoff")
ADAPTIVE = ("seed003", "linear:0,1000,1")   # the seed's Adaptive in Table 2's ratios, first found
QUICK_ROUNDS = 1
SEED_TABLE2 = {   # seed 003 Table 2 (RECS, 1730 frames)
    "Aggressive": {"time_s": 772, "fps": 2.23, "power_W": 60, "energy_kJ": 44.39, "fps_per_W": 0.037},
    "Degraded": {"time_s": 760, "fps": 2.26, "power_W": 66, "energy_kJ": 47.68, "fps_per_W": 0.034},
    "Adaptive Aggressive": {"time_s": 733, "fps": 2.35, "power_W": 52, "energy_kJ": 36.98,
                            "fps_per_W": 0.045},
    "Adaptive Degraded": {"time_s": 762, "fps": 2.26, "power_W": 52, "energy_kJ": 38.16,
                          "fps_per_W": 0.043},
}

# The seed's RECS answered a power reading "roughly every 180ms" (§6).
FIG10_PERIOD_S = 0.18

RESULT_COLUMNS = [
    "experiment", "app", "mpi", "contender", "round", "status", "wall_s", "server_cpu_load",
    "server_quiet_load", "quiet_s", "messages", "seed_messages", "frames", "fps", "time_s",
    "power_W", "energy_J", "fps_per_W", "J_per_frame", "power_kind", "hash",
    "user_s", "sdsm_s", "mpi_wait_s", "sleep_s", "compute_s",
]


@dataclass(frozen=True)
class Contender:
    label: str
    mode: str | None
    env: dict[str, str] = field(default_factory=dict)


def contender(label: str, mpi: MPIInstall) -> Contender:
    """``degraded`` is the MPI's own first way to wait less, without the library
    (the first of its module's ``wait_knobs``: the seed's Degraded); ``seed003`` is
    waitlab's (its mode, and the kernel's timer slack left alone)."""
    if label.startswith(wait_lab.DEGRADED_PLUS):   # seed 003's Adaptive Degraded, for one
        inner = contender(label[len(wait_lab.DEGRADED_PLUS):], mpi)
        return Contender(label, inner.mode, {**inner.env, **wait_lab.degraded_env(mpi)})
    if label in wait_lab.NAMED:
        named = wait_lab.NAMED[label]
        return Contender(label, named.mode, {environment.WAIT_SLACK_NS.name: str(named.slack_ns)})
    if label == "degraded":
        knobs = wait_lab.degraded_env(mpi)
        return Contender(label, None, knobs) if knobs else Contender(label, "yield")
    return Contender(label, label)


@dataclass(frozen=True)
class Scenario:
    experiment: str
    app: str
    ranks: int
    args: tuple[str, ...]
    preset: str | None = None


def scenarios(experiment: str, quick: bool) -> list[Scenario]:
    if experiment == "E":
        return [
            Scenario("E", "full", 3, ("--writes", "500" if quick else "10000", "--sample", "0")),
            Scenario("E", "burst", 3, ("--cycles", "2" if quick else "10", "--writes",
                                       "200" if quick else "1000", "--pause",
                                       "0.2" if quick else "1", "--sample", "0.02")),
            Scenario("E", "lock", 3, ("--cycles", "2" if quick else "5", "--hold",
                                      "0.2" if quick else "1", "--sample", "0.02")),
        ]
    if experiment == "F":
        return [
            Scenario("F", "hough", 7, ("--size", "64" if quick else "256", "--thetas",
                                       "180" if quick else "1800", "--sample", "0")),
            Scenario("F", "video", 7, ("--frames", "8" if quick else "40", "--thetas",
                                       "180" if quick else "900", "--sample", "0")),
        ]
    if experiment == "G":   # CPU sampled as often as the seed's RECS read its nodes' power (Fig. 10)
        return [Scenario("G", "video", 7, ("--frames", "8" if quick else "40", "--thetas",
                                           "180" if quick else "900", "--sample", str(FIG10_PERIOD_S)),
                         "video-recs")]
    raise ShoalError(f"unknown experiment '{experiment}'; use E, F or G")


# ---------------------------------------------------------------- measures

def quiet_windows(result: apps.Result) -> list[tuple[float, float]]:
    """Burst: times every client pauses; Lock: times a client holds the lock."""
    clients = result.role("client")
    spans = [[tuple(q) for q in c["quiet"]] for c in clients]
    if result.app == "lock":
        return sorted(w for s in spans for w in s)
    if not spans:
        return []
    windows = spans[0]
    for other in spans[1:]:
        windows = [(max(a, c), min(b, d)) for a, b in windows for c, d in other
                   if min(b, d) > max(a, c)]
    return windows


def load_inside(timeline: dict[str, Any], windows: list[tuple[float, float]]) -> tuple[float, float]:
    """(CPU load, seconds covered) of one rank over the samples inside the windows."""
    t, c = timeline["t_s"], timeline["cpu_s"]
    busy = span = 0.0
    for i in range(len(t) - 1):
        if any(a <= t[i] and t[i + 1] <= b for a, b in windows):
            busy += c[i + 1] - c[i]
            span += t[i + 1] - t[i]
    return (busy / span if span > 0 else float("nan")), span


def fps_of(result: apps.Result) -> tuple[float, float]:
    out = [r for r in result.ranks if r["frames"] > 0]
    if not out:
        raise ShoalError(f"{result.app}: no rank reported frames")
    return out[0]["frames"], out[0]["frames"] / out[0]["wall_s"]


def run_wall(result: apps.Result) -> float:
    """The run's time: its slowest client (servers wait for the last goodbye)."""
    return max(r["wall_s"] for r in result.ranks if r["role"] != "server")


def measure(sc: Scenario, result: apps.Result) -> dict[str, Any]:
    rep = result.report
    row: dict[str, Any] = {"hash": result.output_hash()}
    servers = result.role("server")
    wall = run_wall(result)
    row["wall_s"] = wall
    if servers:
        row["server_cpu_load"] = sum(s["cpu_s"] for s in servers) / sum(s["wall_s"] for s in servers)
    if sc.app in ("full", "burst", "lock"):
        row["messages"] = rep["messages"]
        row["seed_messages"] = rep["seed_messages"]
        if sc.app in ("burst", "lock"):
            windows = quiet_windows(result)
            timeline = next(t for t in rep["timeline"] if t["rank"] == 0)
            row["server_quiet_load"], row["quiet_s"] = load_inside(timeline, windows)
    if sc.app == "video":
        row["frames"], row["fps"] = fps_of(result)
    split = result.time_split()
    for key in ("user_s", "sdsm_s", "mpi_wait_s", "sleep_s", "compute_s"):
        row[key] = sum(r[key] for r in split)
    if sc.preset:
        p = placement.preset(sc.preset)
        time_s = wall
        devices = placement.modelled_power(p, result.time_split(), time_s)
        power = sum(d["power_W"] for d in devices)
        row.update({"time_s": time_s, "power_W": power, "energy_J": power * time_s,
                    "fps_per_W": row["fps"] / power, "J_per_frame": power * time_s / row["frames"],
                    "power_kind": "modelled"})
    return row


key_names = ("experiment", "app", "mpi", "contender", "round")


def _keep_details(run: Run, sc: Scenario, result: apps.Result, tag: dict[str, Any]) -> None:
    """Per-rank time split, CPU timelines and (with a placement) power per device."""
    run.append("split", [{**tag, **r} for r in result.time_split()])
    samples = []
    for t in result.report.get("timeline", []):
        start = t["t_s"][0] if t["t_s"] else 0.0
        samples += [{**tag, "rank": t["rank"], "t_s": a - start, "cpu_s": b}
                    for a, b in zip(t["t_s"], t["cpu_s"])]
    if samples:
        run.append("timeline", samples)
    if sc.preset:
        wall = run_wall(result)
        run.append("devices", [{**tag, **d} for d in
                               placement.modelled_power(placement.preset(sc.preset),
                                                        result.time_split(), wall)])
        if "--sample" in sc.args and float(sc.args[sc.args.index("--sample") + 1]) > 0:
            period = float(sc.args[sc.args.index("--sample") + 1])
            from shoal.dsm import nodepower

            run.append("node_power", [{**tag, **r} for r in nodepower.summary(
                placement.preset(sc.preset), result.report.get("timeline", []), period)])


def _launch(sc: Scenario, mpi: MPIInstall, c: Contender, session: "Session | None") -> apps.Result:
    """One launch of a scenario under a contender: here (a placement's ranks each as if with a
    core of their own), or on a cluster that is up (a placement's devices on its first nodes,
    else the ranks in equal blocks: ``placement.on_nodes``)."""
    if session is None:
        return apps.run(mpi, sc.app, list(sc.args), sc.ranks, c.mode, env=c.env,
                        own_cores=sc.preset is not None)
    chosen = placement.preset(sc.preset) if sc.preset else None
    blocks = placement.on_nodes(chosen, sc.ranks, [n.name for n in session.cluster.nodes])
    return apps.run_on_cluster(session, mpi, sc.app, list(sc.args), blocks, c.mode, env=c.env)


def run_lab(run: Run, mpis: list[MPIInstall], experiments: tuple[str, ...],
            modes: tuple[str, ...] = DEFAULT_MODES, rounds: int = 3, quick: bool = False,
            on_done: Callable[[dict[str, Any]], None] | None = None,
            session: "Session | None" = None) -> list[dict[str, Any]]:
    """Every scenario under every contender, ``rounds`` interleaved rounds (on ``session``'s
    cluster when one is given)."""
    plan = [sc for e in experiments for sc in scenarios(e, quick)]
    done = {(r["experiment"], r["app"], r["mpi"], r["contender"], str(r["round"]))
            for r in run.rows("results")}
    rows = []
    for rnd in range(rounds):
        for sc in plan:
            for mpi in mpis:
                for label in modes:
                    key = (sc.experiment, sc.app, mpi.name, label, str(rnd))
                    if key in done:
                        continue
                    c = contender(label, mpi)
                    row: dict[str, Any] = {"experiment": sc.experiment, "app": sc.app,
                                           "mpi": mpi.name, "contender": label, "round": rnd,
                                           "status": "ok"}
                    try:
                        result = _launch(sc, mpi, c, session)
                        row.update(measure(sc, result))
                    except ShoalError as exc:
                        row["status"] = f"failed: {exc}"
                    else:
                        _keep_details(run, sc, result, {k: row[k] for k in key_names})
                    run.append("results", [row], columns=RESULT_COLUMNS)
                    rows.append(row)
                    if on_done:
                        on_done(row)
    return rows


def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if x != x else x


def summarize(rows: list[dict[str, Any]], metric: str) -> dict[tuple, tuple[float, float, float, int]]:
    """(experiment, app, mpi, contender) -> (median, min, max, n) of a metric."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        v = _num(r.get(metric))
        if r.get("status") == "ok" and v is not None:
            groups.setdefault((r["experiment"], r["app"], r["mpi"], r["contender"]), []).append(v)
    return {k: (statistics.median(v), min(v), max(v), len(v)) for k, v in groups.items()}


def table2(rows: list[dict[str, Any]], mpi: str, adaptive: str = "linear:0,1000,1",
           reference: str = "busy") -> list[dict[str, Any]]:
    """Table 2's columns per contender (medians over rounds) and the ratios
    adaptive vs busy beside the seed's (Adaptive Aggressive vs Aggressive)."""
    out = []
    metrics = ("time_s", "fps", "power_W", "energy_J", "fps_per_W", "J_per_frame")
    med = {m: summarize([r for r in rows if r["experiment"] == "G" and r["mpi"] == mpi], m)
           for m in metrics}
    contenders = sorted({k[3] for k in med["fps"]})
    for c in contenders:
        key = ("G", "video", mpi, c)
        out.append({"contender": c, "kind": "measured time and FPS, modelled power",
                    **{m: med[m][key][0] for m in metrics if key in med[m]}})
    return out


# Table 2's columns: ours (SI) and the seed's key in SEED_TABLE2, with its factor to SI.
TABLE2_METRICS = (("time_s", "time_s", 1.0), ("fps", "fps", 1.0), ("power_W", "power_W", 1.0),
                  ("energy_J", "energy_kJ", 1e3), ("fps_per_W", "fps_per_W", 1.0))


def fig10(run: Run, mpi: str) -> list[dict[str, Any]]:
    """Fig. 10's readings per contender and node (and the platform): medians over rounds of
    the modelled power's spread, peak and mean and of the energy (``node_power`` rows)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in run.rows("node_power"):
        if r["mpi"] == mpi:
            groups.setdefault((r["contender"], r["device"]), []).append(r)
    out = []
    for (contender, device), rows in groups.items():
        out.append({"contender": contender, "device": device, "kind": "modelled",
                    **{k: statistics.median(float(r[k]) for r in rows)
                       for k in ("std_W", "peak_W", "mean_W", "energy_J")}})
    return out


def seed_modes(rows_t2: list[dict[str, Any]]) -> dict[str, str]:
    """The contender that stands for each of Table 2's four modes: busy, degraded, the
    seed's adaptive receive (seed003 where the lab ran it, else linear:0,1000,1) and the
    same under the Degraded knob."""
    ran = {r["contender"] for r in rows_t2}
    adaptive = next((a for a in ADAPTIVE if a in ran), ADAPTIVE[-1])
    return {"Aggressive": "busy", "Degraded": "degraded", "Adaptive Aggressive": adaptive,
            "Adaptive Degraded": wait_lab.DEGRADED_PLUS + adaptive}


def beside_seed(rows_t2: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table 2's four rows, ours beside the seed's: each column, and each column relative
    to Aggressive (``<metric>_vs_aggressive``: 0.05 is 5 % more); ours are missing for a
    mode the lab did not run."""
    by_name = {r["contender"]: r for r in rows_t2}
    base = by_name.get("busy", {})
    out = []
    for mode, name in seed_modes(rows_t2).items():
        ours = by_name.get(name)
        row: dict[str, Any] = {"mode": mode, "contender": name, "ran": ours is not None}
        for metric, seed_key, to_si in TABLE2_METRICS:
            seed = SEED_TABLE2[mode][seed_key]
            row[f"seed_{metric}"] = seed * to_si
            row[f"seed_{metric}_vs_aggressive"] = seed / SEED_TABLE2["Aggressive"][seed_key] - 1
            if ours is not None and ours.get(metric) is not None:
                row[metric] = ours[metric]
                if base.get(metric):
                    row[f"{metric}_vs_aggressive"] = ours[metric] / base[metric] - 1
        out.append(row)
    return out


def seed_ratio(metric: str) -> float:
    key = {"power_W": "power_W", "fps": "fps", "fps_per_W": "fps_per_W",
           "energy_J": "energy_kJ", "time_s": "time_s"}[metric]
    return SEED_TABLE2["Adaptive Aggressive"][key] / SEED_TABLE2["Aggressive"][key] - 1


# ---------------------------------------------------------------- the command as a call
@dataclass
class LabRequest:
    """Which experiments, contenders and MPIs; ``modes`` as given (None: the defaults)."""

    experiments: tuple[str, ...] = EXPERIMENTS
    modes: str | None = None            # a semicolon list of contenders
    mpis: tuple[str, ...] = ()          # MPI names or paths
    rounds: int | None = None           # None: 3, or 1 with ``quick``
    quick: bool = False
    out: Path | None = None
    where: "Where | None" = None        # a cluster to run on (None: this machine)


@dataclass
class LabPlan:
    """A request checked: its MPIs found, its contenders and rounds decided; nothing run yet."""

    request: LabRequest
    mpis: list[MPIInstall]
    modes: tuple[str, ...]
    rounds: int

    @property
    def total(self) -> int:
        """Launches the lab makes."""
        return self.rounds * len(self.mpis) * len(self.modes) * sum(
            len(scenarios(e, self.request.quick)) for e in self.request.experiments)


@dataclass
class LabResult:
    """The rows of every launch, Table 2 per MPI (when G ran), and where the run is kept."""

    run: Path
    results: list[dict[str, Any]]
    table2: dict[str, list[dict[str, Any]]]
    table2_beside_seed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    fig10: dict[str, list[dict[str, Any]]] = field(default_factory=dict)   # per MPI (when G ran)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["status"] != "ok"]

    def to_json(self) -> dict[str, Any]:
        return {"run": str(self.run), "results": self.results, "table2": self.table2,
                "table2_beside_seed": self.table2_beside_seed, "fig10": self.fig10}


def parse_contenders(text: str | None) -> tuple[str, ...]:
    """A semicolon list of wait modes, ``degraded`` and the named contenders (``seed003``)."""
    if not text:
        return DEFAULT_MODES
    items = [m for m in text.split(";") if m]
    return tuple(m if m == "degraded" else wait_lab.contender_names(m) for m in items)


def plan(request: LabRequest) -> LabPlan:
    """Check every input: experiments, rounds, contenders, MPIs."""
    from shoal.mpi import discover

    for e in request.experiments:
        scenarios(e, request.quick)
    rounds = request.rounds
    if rounds is None:
        rounds = QUICK_ROUNDS if request.quick else 3
    if rounds < 1:
        raise ShoalError(f"--rounds {rounds}: need at least 1")
    modes = parse_contenders(request.modes) if request.modes or not request.quick else QUICK_MODES
    mpis = discover.resolve_each(request.mpis)
    if request.where is not None:
        request.where.validate()
    if request.where is not None and request.where.on_cluster:
        nodes = [n.name for n in request.where.inventory().nodes]
        for sc in (sc for e in request.experiments for sc in scenarios(e, request.quick)):
            placement.on_nodes(placement.preset(sc.preset) if sc.preset else None, sc.ranks, nodes)
    return LabPlan(request, mpis, modes, rounds)


def run(lab: LabPlan, argv: list[str],
        on_done: Callable[[dict[str, Any]], None] | None = None) -> LabResult:
    """Run the planned lab and keep it as a run; an interrupted lab keeps the rows it finished."""
    from shoal import hostfacts, proc
    from shoal.errors import Interrupted

    request = lab.request
    record = Run.create("dsm-lab", argv, request.out,
                        mpis=[m.describe() for m in lab.mpis], modes=list(lab.modes),
                        experiments=list(request.experiments), rounds=lab.rounds, quick=request.quick,
                        host=hostfacts.collect())
    try:
        if request.where is not None and request.where.on_cluster:
            with request.where.open(record) as session:
                record.update_manifest(cluster={**session.describe(), "dilation": session.dilation})
                run_lab(record, lab.mpis, request.experiments, lab.modes, lab.rounds, request.quick,
                        on_done=on_done, session=session)
        else:
            run_lab(record, lab.mpis, request.experiments, lab.modes, lab.rounds, request.quick,
                    on_done=on_done)
    except KeyboardInterrupt:
        record.finish("interrupted", reason=proc.stop_reason())
        raise Interrupted(f"interrupted; finished runs are in {record.path}") from None
    rows = record.rows("results")
    failed = [r for r in rows if r["status"] != "ok"]
    tables = {m.name: table2(rows, m.name) for m in lab.mpis} if "G" in request.experiments else {}
    nodes = {m.name: fig10(record, m.name) for m in lab.mpis} if "G" in request.experiments else {}
    record.finish("complete" if not failed else "partial", failed=len(failed))
    return LabResult(record.path, rows, tables, {m: beside_seed(t) for m, t in tables.items()}, nodes)
