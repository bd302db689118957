"""`shoal pallex run` as a library call: one cycle of a stage file here, on a boot profile's
timeline, measured and kept as a run.

The run directory holds each stage's times (``stages.csv``), the data edges
(``edges.csv``), the samples of this machine's power (``power.csv``) and each
stage's log; its manifest holds the outcome, the energy and the upload sinks
started for the cycle.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from shoal.errors import ShoalError
from shoal.pallex.runner import CycleResult
from shoal.pallex.stagefile import App
from shoal.profiles import BootPhases


@dataclass
class CycleRequest:
    """What to run and on which timeline."""

    stages: str                         # a stage file or a scenario name
    profile: str = "rpi3"               # a device's boot profile, or a file
    mode: str = "pallex"                # pallex | baseline
    eager: bool = False
    time_scale: float = 1.0
    params: dict[str, str] = field(default_factory=dict)
    power: str = "auto"                 # a power spec; "none" measures nothing
    out: Path | None = None


@dataclass
class CycleRun:
    """One measured cycle: the runner's result, this machine's energy, the sinks started."""

    app: App
    profile: BootPhases
    mode: str
    result: CycleResult
    energy: list[dict[str, Any]] | None
    upload_sinks: list[dict[str, Any]]
    run: Path

    @property
    def ok(self) -> bool:
        return self.result.outcome == "done"

    def to_json(self) -> dict[str, Any]:
        return {**self.result.describe(), "energy": self.energy, "upload_sinks": self.upload_sinks,
                "run": str(self.run)}


def power_spec(spec: str, device: str) -> str:
    """``auto``: a sensor where this machine has one, else the model with the device profile's watts."""
    if spec != "auto":
        return spec
    from shoal import profiles as device_profiles
    from shoal.power import spec as power_spec_grammar

    found, _ = power_spec_grammar.detect()
    for source in found:
        source.close()
    profile = device_profiles.load().get(device)
    if found or profile is None:
        return "auto"
    return f"model:{profile.idle_W},{profile.busy_W},cores={profile.cores}"


def run(request: CycleRequest, argv: list[str],
        on_note: Callable[[str], None] | None = None) -> CycleRun:
    """Run the stages once and keep the run; ``on_note`` hears of upload sinks started here."""
    from shoal import hostfacts
    from shoal.pallex import boot, cloud, project, runner, stagefile
    from shoal.runs.store import Run

    tell = on_note or (lambda note: None)
    app = stagefile.resolve(request.stages)
    profile = boot.load(request.profile)
    if request.time_scale <= 0:
        raise ShoalError("--time-scale must be above 0")
    s = request.time_scale
    timeline = {u: profile.unit_ready_s(u) * s for u in app.units()}
    not_before = project.userspace_end_s(app, profile) * s if request.mode == "baseline" else 0.0
    session = None
    if request.power != "none":
        from shoal import power

        session = power.open_session(power_spec(request.power, profile.device)).start()
    record = Run.create("pallex-run", argv, request.out, app=app.name, stage_file=app.path,
                        profile=profile.describe(), mode=request.mode, time_scale=s,
                        host=hostfacts.collect())
    params = request.params
    with contextlib.ExitStack() as stack:
        sinks = cloud.sinks_for({**app.params, **params}, stack)
        for sink in sinks:
            tell(f"nothing listened at {sink.url}: started shoal's loopback upload sink there for this run")
        try:
            result = runner.Runner(app, timeline, systemd_ready_s=profile.systemd_ready_s * s,
                                   not_before_s=not_before, mode=request.mode, eager=request.eager,
                                   params=params).run()
        finally:
            if session is not None:
                session.stop()
        sinks = [{"url": c.url, "uploads": len(c.received), "bytes": sum(r["bytes"] for r in c.received)}
                 for c in sinks]
    rows = [{"stage": r.name, "status": r.status, "ready_s": r.ready_s, "trigger_s": r.trigger_s,
             "start_s": r.start_s, "end_s": r.end_s, "cpu_s": r.cpu_s, "exit_code": r.exit_code,
             "reason": r.reason} for r in result.stages.values()]
    record.append("stages", rows)
    record.append("edges", result.edges)
    energy = None
    if session is not None:
        from shoal.power import COLUMNS

        record.append("power", session.samples(), columns=COLUMNS)
        energy = [{k: e[k] for k in ("key", "kind", "energy_J", "mean_power_W", "coverage")}
                  for e in session.energy_between(result.t0_mono, result.t0_mono + max(result.end_s, 1e-3),
                                                  wait=False)]
    for rec in result.stages.values():
        (record.path / f"{rec.name}.log").write_text(rec.log)
    record.finish("complete" if result.outcome == "done" else result.outcome, outcome=result.outcome,
                  end_s=result.end_s, problems=result.problems, done_reports=result.done_reports, energy=energy,
                  upload_sinks=sinks)
    return CycleRun(app, profile, request.mode, result, energy, sinks, record.path)
