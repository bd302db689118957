"""`shoal pallex lab`: seed 004's scenarios, baseline against Pallex, on a device profile.

Each scenario's stages really run here (the runner, the boot profile's unit
times, scaled by ``time_scale``); uploads go to a loopback HTTP server. Each
measured cycle is checked (bytes identical on every edge, AES known answers,
KNN label = the frame's digit, uploaded SHA-256 = captured) and carried over
to the device (project.py). Gains are the seed's: duration and energy of the
post-kernel part, lifetime from the whole cycle's energy (eq. 3).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from shoal.errors import ShoalError
from shoal.model import lifetime
from shoal.pallex import project, seedtables, stagefile
from shoal.profiles import BootPhases, DeviceProfile
from shoal.pallex.cloud import Cloud
from shoal.pallex.runner import CycleResult, Runner

CYCLE_RATES = (1, 2, 5, 10, 12, 20, 30, 40, 50, 60)
NETWORK_INDEPENDENT = ("ic", "ice", "icc")
NETWORK_DEPENDENT = ("icu1", "icu2", "icu3")


@dataclass
class ScenarioOutcome:
    scenario: str
    cycles: list[dict] = field(default_factory=list)  # one row per measured cycle
    stages: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def check(scenario: str, result: CycleResult, cloud: Cloud | None, uploads_before: int) -> list[str]:
    """What is wrong with one measured cycle (empty when every check passed)."""
    bad = [f"outcome {result.outcome}"] if result.outcome != "done" else []
    bad += result.problems
    bad += [f"edge {e['from']} -> {e['to']}: bytes not identical" for e in result.edges if not e["identical"]]
    sink = {r["stage"]: r.get("result", {}) for r in result.done_reports}
    if scenario == "ice" and sink.get("capenc", {}).get("self_test") != "passed":
        bad.append("AES-256 known-answer tests did not pass")
    if scenario == "icc":
        frame = result.stages["cap"].report.get("result", {}).get("frames", [{}])[0]
        if sink.get("clas", {}).get("labels") != [frame.get("digit")]:
            bad.append(f"KNN label {sink.get('clas', {}).get('labels')} != digit {frame.get('digit')}")
    if scenario.startswith("icu") and cloud is not None:
        sent = [f["sha256"] for f in result.stages["cap"].report.get("result", {}).get("frames", [])]
        got = [r["sha256"] for r in cloud.received[uploads_before:]]
        if sorted(sent) != sorted(got) or len(sent) != int(scenario[3:]):
            bad.append(f"uploaded {len(got)} frame(s), captured {len(sent)}; SHA-256 differ" if sent != got else
                       f"expected {scenario[3:]} frames")
    return bad


def run_scenario(scenario: str, boot: BootPhases, device: DeviceProfile, *, rounds: int = 1,
                 time_scale: float = 1.0, host_speed: float = 1.0, battery_J: float = 43200.0,
                 sleep_W: float = 0.0, link_bps: float | None = None, on_cycle=None) -> ScenarioOutcome:
    app = stagefile.resolve(scenario)
    out = ScenarioOutcome(scenario)
    timeline = {u: boot.unit_ready_s(u) * time_scale for u in app.units()}
    t_u = project.userspace_end_s(app, boot)
    with Cloud() as cloud:
        for k in range(rounds):
            for mode in ("baseline", "pallex"):  # interleaved, so machine load hits both alike
                before = len(cloud.received)
                runner = Runner(app, timeline, systemd_ready_s=boot.systemd_ready_s * time_scale,
                                not_before_s=t_u * time_scale if mode == "baseline" else 0.0, mode=mode,
                                params={"upload_url": cloud.url})
                result = runner.run()
                problems = check(scenario, result, cloud, before)
                row = {"scenario": scenario, "round": k, "mode": mode, "device": device.name,
                       "host_end_s": result.end_s, "outcome": result.outcome, "ok": not problems,
                       "problems": "; ".join(problems)}
                if not problems:
                    dem = project.demands(result)
                    row["demands"] = {k: [v.work_s, v.cpu_s, v.network_B, v.loaded] for k, v in dem.items()}
                    fill_projection(row, app, boot, device, host_speed, battery_J, sleep_W, link_bps)
                else:
                    out.problems.extend(f"{scenario} {mode} round {k}: {p}" for p in problems)
                out.cycles.append(row)
                for rec in result.stages.values():
                    out.stages.append({"scenario": scenario, "round": k, "mode": mode, "stage": rec.name,
                                       "status": rec.status, "ready_s": rec.ready_s, "trigger_s": rec.trigger_s,
                                       "start_s": rec.start_s, "end_s": rec.end_s, "cpu_s": rec.cpu_s,
                                       "reason": rec.reason})
                if on_cycle:
                    on_cycle(row)
    return out


def fill_projection(row: dict, app, boot: BootPhases, device: DeviceProfile, host_speed: float,
                    battery_J: float, sleep_W: float, link_bps: float | None = None) -> dict:
    """The device columns of one measured cycle, from its stages' demands."""
    dem = {k: project.StageDemand(*v) for k, v in row["demands"].items()}
    proj = project.project(app, dem, boot, device, row["mode"], host_speed, link_bps)
    row.update(host_speed=host_speed, device_duration_s=proj.duration_s, device_post_kernel_s=proj.post_kernel_s,
               device_energy_J=proj.energy_J, device_post_kernel_J=proj.post_kernel_J,
               userspace_end_s=proj.userspace_end_s)
    for n in (1, 12, 60):
        row[f"lifetime_h_at_{n}"] = lifetime.lifetime_h(battery_J, proj.energy_J, n, sleep_W, proj.duration_s)
    return row


def pair_gains(cycles: list[dict], pair_key: str, post_s: str, post_J: str, whole_J: str) -> dict[str, list[float]]:
    """Pallex's gains over the baseline, one per pair of good cycles (same ``pair_key``): duration
    and energy of the post-kernel part (``post_s``, ``post_J``), lifetime from the whole cycle's
    energy (``whole_J``, eq. 3)."""
    pairs: dict = {}
    for c in cycles:
        if c["ok"]:
            pairs.setdefault(c[pair_key], {})[c["mode"]] = c
    gains: dict[str, list[float]] = {"duration": [], "energy": [], "lifetime": []}
    for pair in pairs.values():
        if len(pair) == 2:
            b, p = pair["baseline"], pair["pallex"]
            gains["duration"].append(1 - p[post_s] / b[post_s])
            gains["energy"].append(1 - p[post_J] / b[post_J])
            gains["lifetime"].append(lifetime.gain(1 / b[whole_J], 1 / p[whole_J]))
    return gains


def summarise(outcomes: list[ScenarioOutcome], board: str) -> list[dict]:
    """Median gains per scenario (over rounds) next to the seed's, with their ratios."""
    rows = []
    for o in outcomes:
        gains = pair_gains(o.cycles, "round", "device_post_kernel_s", "device_post_kernel_J", "device_energy_J")
        seed = seedtables.GAINS.get(board, {}).get(o.scenario, (None, None, None))
        row = {"scenario": o.scenario, "rounds": len(gains["lifetime"])}
        for (what, values), paper in zip(gains.items(), seed):
            med = statistics.median(values) if values else None
            row[f"{what}_gain"] = med
            row[f"{what}_gain_min"] = min(values) if values else None
            row[f"{what}_gain_max"] = max(values) if values else None
            row[f"paper_{what}_gain"] = None if paper is None else paper / 100.0
            row[f"{what}_ratio"] = None if med is None or not paper else med / (paper / 100.0)
        base = [c for c in o.cycles if c["ok"] and c["mode"] == "baseline"]
        pal = [c for c in o.cycles if c["ok"] and c["mode"] == "pallex"]
        for label, group in (("baseline", base), ("pallex", pal)):
            for key in ("device_duration_s", "device_energy_J", "lifetime_h_at_1", "lifetime_h_at_12",
                        "lifetime_h_at_60"):
                row[f"{label}_{key}"] = statistics.median(c[key] for c in group) if group else None
        rows.append(row)
    return rows


def ordering(summary: list[dict]) -> dict:
    """The seed's ordering: IC&U3 gains most; IC&C least of the networking-independent scenarios."""
    gain = {r["scenario"]: r["lifetime_gain"] for r in summary if r["lifetime_gain"] is not None}
    out = {"all_ahead": bool(gain) and all(g > 0 for g in gain.values())}
    if "icu3" in gain:
        out["icu3_gains_most"] = gain["icu3"] == max(gain.values())
    independent = {s: gain[s] for s in NETWORK_INDEPENDENT if s in gain}
    if "icc" in independent and len(independent) > 1:
        out["icc_least_of_independent"] = independent["icc"] == min(independent.values())
    return out


@dataclass
class LabRequest:
    """The scenarios to compare, on which device, and the battery their lifetimes drain."""

    profile: str = "rpi3"               # a device's boot profile, or a file
    scenarios: tuple[str, ...] = stagefile.SCENARIOS
    rounds: int = 3
    time_scale: float = 1.0
    # This machine's core in reference cores (None: measured on the device profile's kernel,
    # shoal.cluster.hostspeed): the stages' CPU time scales by host speed / device speed.
    host_speed: float | None = None
    link: str = "wifi-n"
    capacity_mAh: float = 2400.0
    voltage: float = 5.0
    usable: float = 1.0
    sleep_W: float = 0.0
    out: Path | None = None
    # The scenarios also on the virtual board (vmlab), ``rounds`` cycles of each mode: ``spec_for(image)``
    # gives the board (cli._pallex_board), ``board_speed`` "profile" holds it to the device's core.
    vm: bool = False
    spec_for: Callable | None = None
    board_speed: str = "profile"
    vm_timeout_s: float = 240.0
    vm_deadline_s: float | None = None   # the applications' deadline on the board (None: the stage files')


@dataclass
class LabResult:
    """The lab's summary per scenario, the seed's ordering checked, what went wrong, where it is kept."""

    device: str
    summary: list[dict]
    ordering: dict
    problems: list[str]
    run: Path
    vm: list[dict] | None = None   # the virtual board's summary per scenario (vmlab), when asked

    def to_json(self) -> dict:
        return {"summary": self.summary, "ordering": self.ordering, "problems": self.problems,
                "run": str(self.run), "vm": self.vm}


def run(request: LabRequest, argv: list[str],
        on_scenario: Callable[[str, int], None] | None = None,
        on_note: Callable[[str], None] = lambda note: None,
        on_vm_cycle: Callable[[dict], None] = lambda row: None) -> LabResult:
    """Every scenario, baseline against Pallex, kept as a run (``cycles``, ``stages``, ``summary``
    tables and the lifetime figure); ``on_scenario(name, rounds)`` hears each scenario start. With
    ``request.vm`` the same scenarios then boot on the virtual board (``vm_cycles``, ``vm_summary``)."""
    from shoal import hostfacts
    from shoal import profiles as device_profiles
    from shoal.pallex import boot, figures
    from shoal.runs.store import Run

    profile = boot.load(request.profile)
    devices = device_profiles.load()
    if profile.device not in devices:
        raise ShoalError(f"no device profile {profile.device!r} for the boot profile; add [profiles.{profile.device}]")
    device = devices[profile.device]
    for s in request.scenarios:
        if s not in stagefile.SCENARIOS:
            raise ShoalError(f"unknown scenario {s!r} (known: {', '.join(stagefile.SCENARIOS)})")
    rounds, scale = request.rounds, request.time_scale
    if rounds < 1 or scale <= 0 or (request.host_speed is not None and request.host_speed <= 0):
        raise ShoalError("--rounds must be >= 1, --time-scale and --host-speed above 0")
    from shoal.cluster import hostspeed

    host = hostspeed.resolve(request.host_speed)
    host_speed = host.of(device.speed_kernel)
    battery = lifetime.battery_J(request.capacity_mAh, request.voltage, request.usable)
    links = device_profiles.load_links()
    if request.link not in links:
        raise ShoalError(f"unknown link {request.link!r} (known: {', '.join(sorted(links))})")
    link = links[request.link]
    record = Run.create("pallex-lab", argv, request.out,
                        profile=profile.describe(), device=device.describe(), scenarios=list(request.scenarios),
                        rounds=rounds, time_scale=scale, host_speed=host.describe(), battery_J=battery,
                        sleep_W=request.sleep_W, link=link.describe(), host=hostfacts.collect())
    outcomes = []
    for s in request.scenarios:
        if on_scenario:
            on_scenario(s, rounds)
        o = run_scenario(s, profile, device, rounds=rounds, time_scale=scale, host_speed=host_speed,
                         battery_J=battery, sleep_W=request.sleep_W, link_bps=link.rate_bps)
        record.append("cycles", [{k: v for k, v in c.items() if k != "demands"} | {"demands": json.dumps(c.get("demands"))}
                                 for c in o.cycles])
        record.append("stages", o.stages)
        outcomes.append(o)
    summary = summarise(outcomes, profile.device)
    record.rewrite("summary", summary, list(summary[0].keys()))
    order = ordering(summary)
    cycles = {r["scenario"]: {m: (r[f"{m}_device_energy_J"], r[f"{m}_device_duration_s"]) for m in ("baseline", "pallex")}
              for r in summary if r["baseline_device_energy_J"] is not None}
    fig = figures.lifetime_figure(cycles, battery, request.sleep_W, [float(n) for n in range(1, 61)],
                                  f"{profile.device}: lifetime, baseline (dashed) and Pallex (solid)")
    fig.savefig(record.path / "lifetime.png", dpi=120)
    problems = [p for o in outcomes for p in o.problems]
    vm = None
    if request.vm:
        from shoal.pallex import vmlab

        rows = vmlab.run(list(request.scenarios), rounds, request.profile, request.spec_for, request.board_speed,
                         record, request.vm_timeout_s, on_note, on_vm_cycle, request.vm_deadline_s)
        vm = vmlab.beside(vmlab.summary(rows), summary)
        record.rewrite("vm_summary", vm, list(vm[0].keys()))
        problems += [f"virtual board {r['scenario']} {r['mode']} cycle {r['cycle']}: {r['reason']}"
                     for r in rows if not r["ok"]]
    record.finish("complete" if not problems else "problems", ordering=order, problems=problems)
    return LabResult(profile.device, summary, order, problems, record.path, vm)
