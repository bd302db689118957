"""`shoal study --freqs F1,F2,...`: the study at every clock, and the energy-optimal
(node count, clock) pair with its interval beside the model's.

The sweep is one run directory (kind "study", its request holding ``freqs``) with one whole
study per clock inside it (``f500mhz/``, ``f1333mhz/``...: the same devices held at that
P-state, each with its own report), so an interrupted sweep keeps every finished clock and
every finished point of the one it stopped in, and ``--resume`` goes on from there. When all
have run, the workloads' energy per unit of work at every (n, clock) pair is mixed as the study
mixes node counts (shoal.model.clockpair) and written to ``freq_sweep.json`` and
``freq_sweep.csv`` (one row per pair, columns in docs/study.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from shoal.errors import ShoalError
from shoal.runs.store import Run
from shoal.study.request import StudyRequest

SWEEP_JSON = "freq_sweep.json"
SWEEP_CSV = "freq_sweep.csv"
CSV_COLUMNS = ("nodes", "clock_Hz", "perf_per_W_rel", "perf_per_W_rel_lo", "perf_per_W_rel_hi",
               "vs_best", "vs_best_lo", "vs_best_hi", "tied_with_best", "model_perf_per_W_rel")


def clock_dir(hz: float) -> str:
    return f"f{hz / 1e6:.0f}mhz"


def sub_request(request: StudyRequest, hz: float) -> StudyRequest:
    """The study at one clock: the same request, its devices held at ``hz``."""
    from shoal.profiles import clock

    return dataclasses.replace(request, emulate=clock.with_clock(request.emulate, clock.text(hz)),
                               freqs=None)


def validate(request: StudyRequest) -> None:
    """A sweep needs emulated devices with a P-state at every clock (checked for each, before
    anything starts)."""
    if request.cluster or request.attach or not request.emulate:
        raise ShoalError("--freqs sweeps the clock of emulated devices: use --emulate SPEC (real "
                         "devices: run one study per --governor setting)")
    if "@" in request.emulate:
        raise ShoalError(f"--freqs sets every device's clock: drop @CLOCK from --emulate {request.emulate}")
    if len(request.freqs or []) < 2:
        raise ShoalError("--freqs needs at least two clocks to compare, e.g. --freqs 500M,1.33G")
    from shoal.cluster import inventory
    from shoal.profiles import clock

    devices = {n.profile.name: n.profile for n in inventory.from_emulate(request.emulate, request.link).nodes}
    for hz in request.freqs:
        for profile in devices.values():
            clock.state(profile, hz, "--freqs")


@dataclass
class Sweep:
    run: Run
    request: StudyRequest

    def path_of(self, hz: float) -> Path:
        return self.run.path / clock_dir(hz)


def start(request: StudyRequest, command: list[str], out: Path | None) -> Sweep:
    validate(request)
    from shoal.study import run as study_run

    for hz in request.freqs:  # every clock's study planned (and refused) before anything runs
        study_run.plan(sub_request(request, hz))
    run = Run.create("study", command, out, study=request.to_manifest(),
                     clocks={clock_dir(hz): hz for hz in request.freqs})
    return Sweep(run, request)


def resume(path: Path) -> Sweep:
    run = Run.open(path)
    request = StudyRequest.from_manifest(run.manifest["study"])
    run.update_manifest(status="running", resumed=run.manifest.get("resumed", 0) + 1)
    return Sweep(run, request)


def is_sweep(path: Path) -> bool:
    from shoal.study.run import saved_request

    saved = saved_request(path)
    return bool(saved and saved.freqs)


def measure(sweep: Sweep, one: Callable[[Run, Any], Any]) -> dict[float, Any]:
    """Every clock's study, started or resumed; ``one(run, plan)`` measures and analyses a
    study and returns its findings. Clocks whose study is complete are only analysed again."""
    from shoal.study import analysis
    from shoal.study import run as study_run

    found = {}
    for hz in sweep.request.freqs:
        path = sweep.path_of(hz)
        if (path / "manifest.json").exists():
            status = json.loads((path / "manifest.json").read_text()).get("status")
            if status in ("complete", "complete-with-failures"):
                found[hz] = analysis.analyse(Run.open(path))
                continue
            run, study = study_run.resume(path)
        else:
            command = [*sweep.run.manifest.get("command", ["shoal", "study"])]
            run, study = study_run.start(sub_request(sweep.request, hz), command, path)
        found[hz] = one(run, study)
    return found


def answer(sweep: Sweep, findings: dict[float, Any]) -> dict[str, Any]:
    """The best pair, measured and modelled, written beside the clocks' studies."""
    from shoal.cluster import inventory
    from shoal.model import clockpair
    from shoal.profiles import clock

    request = sweep.request
    freqs = sorted(findings, reverse=True)
    # The devices' profile (the first term's, at its nominal clock) and the states swept.
    base = inventory.from_emulate(request.emulate, request.link).nodes[0].profile
    chosen = {hz: clock.state(base, hz) for hz in freqs}
    model_states = chosen
    counts = sorted(set.intersection(*(_counts(f) for f in findings.values()))) if findings else []
    pairs = [(n, hz) for hz in freqs for n in counts]
    samples, fractions, shared_W = _samples(findings, pairs)
    weights = {name: request.weights.get(name.split(" ")[0], 0.0) for name in samples}
    if not any(weights.values()):
        weights = {name: 1.0 for name in samples}
    measured = clockpair.measured_best(pairs, samples, weights)
    modelled = (clockpair.predicted_ppw(pairs, fractions, {n: weights[n] for n in fractions},
                                        model_states, shared_W) if fractions else [])
    model_best = pairs[max(range(len(modelled)), key=modelled.__getitem__)] if modelled else None
    rows = []
    for i, pair in enumerate(pairs):
        ppw, vs = measured.ppw.get(pair), measured.vs_best.get(pair)
        rows.append({"nodes": pair[0], "clock_Hz": pair[1],
                     "perf_per_W_rel": ppw.value if ppw else None, "perf_per_W_rel_lo": ppw.lo if ppw else None,
                     "perf_per_W_rel_hi": ppw.hi if ppw else None, "vs_best": vs.value if vs else None,
                     "vs_best_lo": vs.lo if vs else None, "vs_best_hi": vs.hi if vs else None,
                     "tied_with_best": pair in measured.tied,
                     "model_perf_per_W_rel": modelled[i] if modelled else None})
    out = {
        "clocks_Hz": freqs, "nodes": counts, "baseline": {"nodes": pairs[0][0], "clock_Hz": pairs[0][1]} if pairs else None,
        "workloads": sorted(samples), "weights": weights,
        "best": _pair(measured.best), "best_perf_per_W_rel": measured.best_ppw.to_dict() if measured.best_ppw else None,
        "tied": [_pair(p) for p in measured.tied],
        "model": {"best": _pair(model_best), "f": fractions, "shared_power_W": shared_W,
                  "reason": "" if fractions else ("no workload's scaling fit holds at the highest clock "
                                                  "(a fit needs at least 3 node counts)"),
                  "states": {str(hz): dataclasses.asdict(s) for hz, s in model_states.items()}},
        "pairs": rows, "runs": {str(hz): str(sweep.path_of(hz)) for hz in freqs},
    }
    from shoal.runs import jsonout

    (sweep.run.path / SWEEP_JSON).write_text(jsonout.dumps(out, indent=1))
    _write_csv(sweep.run.path / SWEEP_CSV, rows)
    sweep.run.finish("complete")
    return out


def _pair(pair: tuple[int, float] | None) -> dict[str, Any] | None:
    return None if pair is None else {"nodes": pair[0], "clock_Hz": pair[1]}


def _counts(findings: Any) -> set[int]:
    """The node counts at which some workload of one clock's study has energy samples."""
    from shoal.model.waiting import SLEEPING

    return {n for w in findings.workloads if (c := w.conditions.get(SLEEPING)) is not None
            for n in c.energy_samples}


def _samples(findings: dict[float, Any], pairs: list[tuple[int, float]]
             ) -> tuple[dict[str, dict[int, list[float]]], dict[str, float], float]:
    """Each workload's energy per unit of work per pair index; the parallel fraction its study
    fitted at the highest clock (the model's f); the switch's watts."""
    from shoal.model.waiting import SLEEPING

    samples: dict[str, dict[int, list[float]]] = {}
    fractions: dict[str, float] = {}
    shared_W = 0.0
    top = max(findings)
    for i, (n, hz) in enumerate(pairs):
        for w in findings[hz].workloads:
            condition = w.conditions.get(SLEEPING)
            values = condition.energy_samples.get(n) if condition is not None else None
            if values:
                samples.setdefault(w.name, {})[i] = list(values)
            if hz == top:
                shared_W = max(shared_W, float(w.shared_power_W or 0.0))
                if w.fit is not None and w.fit.f is not None and w.fit.describes:
                    fractions[w.name] = float(w.fit.f)
    everywhere = set(range(len(pairs)))
    samples = {name: by_i for name, by_i in samples.items() if set(by_i) == everywhere}
    return samples, {k: v for k, v in fractions.items() if k in samples}, shared_W


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    import csv

    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None or (isinstance(v, float) and not math.isfinite(v)) else v)
                             for k, v in row.items()})
