"""From a study's results table to its findings: perf/W per node count,
fitted scaling models, the optimum node count and the offload verdict.

Every number in the findings names the results rows it came from
(``point_id``), and every power figure carries ``power_kind``
(measured/modelled), so a report can trace and label each one.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd

from shoal import model
from shoal.errors import ShoalError
from shoal.runs.store import Run
from shoal.study import seed_compare, work_analysis
from shoal.study import workloads as study_workloads
from shoal.study.findings import (BenchmarkFit, BenchmarkPoint, BenchmarkResult, Findings, Headline, Offload,
                                  WorkFindings)
from shoal.study.reference import Reference
from shoal.study.request import saved_request
from shoal.study.run import REFERENCE

# A fit must explain at least this share of the variance of each curve it
# fits before its optimum is reported; below, the data says "cannot tell".
MIN_R2 = 0.5

# A test's performance: its own metric, "higher is better".
PERF_COLUMN = {"bandwidth": "bandwidth_median_Bps", "time": "rate_median_Hz", "rate": "rate_median_Hz"}
PERF_UNIT = {"bandwidth": "B/s", "time": "operations/s", "rate": "transactions/s"}


def _representative_size(frame: pd.DataFrame, metric: str) -> int | None:
    """Size shown over node counts: largest for bandwidth tests, smallest for latency/rate
    tests, among sizes measured in every configuration of the test."""
    groups = frame.groupby(["config", "nodes"])["size_B"].apply(set)
    common = set.intersection(*groups) if len(groups) else set()
    if not common:
        return None
    return max(common) if metric == "bandwidth" else min(common)


def _point(row: pd.Series, metric: str, spin_W: Any = None) -> BenchmarkPoint:
    perf = float(row[PERF_COLUMN[metric]])
    power = float(row["power_mean_W"]) if pd.notna(row.get("power_mean_W")) else math.nan
    bytes_per_op = float(row["bytes_per_op_B"]) if metric == "bandwidth" else 1.0
    spin = _spinning_W(row, spin_W)
    # CI of the performance from the CI of the median time (perf is monotone in time).
    return BenchmarkPoint(
        nodes=int(row["nodes"]), ranks=int(row["ranks"]), point_id=str(row["point_id"]), perf=perf,
        perf_ci=(bytes_per_op / float(row["time_ci_high_s"]), bytes_per_op / float(row["time_ci_low_s"])),
        converged=str(row["converged"]).lower() == "true", power_W=power,
        power_kind=row.get("power_kind") if pd.notna(row.get("power_kind")) else None,
        energy_partial=str(row.get("energy_partial")).lower() == "true",
        perf_per_W=perf / power if power and power > 0 else math.nan,
        power_spin_W=spin, perf_per_W_spin=perf / spin if spin else None)


def _spinning_W(row: pd.Series, spin_W: Any) -> float | None:
    """The point's power had its ranks spun while waiting (shoal.model.waiting)."""
    if spin_W is None:
        return None
    idle = pd.to_numeric(row.get("idle_power_W"), errors="coerce")
    if pd.isna(idle):
        return None
    return spin_W(int(row["nodes"]), int(row["ranks"])) + float(idle)


def _idle_fraction(manifest: dict[str, Any]) -> float | None:
    """Woo-Lee k of the cluster's devices: idle over busy watts of their profile."""
    p = work_analysis.device_profile(manifest)
    return float(p["idle_W"]) / float(p["busy_W"]) if p else None


def analyse_test(frame: pd.DataFrame, test: str, cluster_label: str, k: float | None,
                 spin: tuple[Any, Any] = (None, None)) -> BenchmarkResult:
    rows = frame[frame["test"] == test]
    metric = rows["metric"].iloc[0]
    size = _representative_size(rows, metric)
    out = BenchmarkResult(test=test, metric=metric, perf_unit=PERF_UNIT[metric], size_B=size)
    if size is None:
        out.status = "no size measured in every configuration"
        return out
    at = rows[rows["size_B"] == size]
    out.cluster = [_point(r, metric, spin[0])
                   for _, r in at[at["config"] == cluster_label].sort_values("nodes").iterrows()]
    reference = [_point(r, metric, spin[1]) for _, r in at[at["config"] == REFERENCE].iterrows()]
    out.reference = reference[0] if reference else None
    nodes = [p.nodes for p in out.cluster]
    perf = [p.perf for p in out.cluster]
    ppw = [p.perf_per_W for p in out.cluster]
    has_power = any(math.isfinite(x) for x in ppw)
    fit = model.fit_scaling(nodes, perf, ppw if has_power else None, idle_fraction=k)
    status, reason = fit.status, fit.reason
    optimum = model.optimal_nodes(fit)
    poor = [f"{name} R² = {r2:.2f}" for name, r2 in (("performance", fit.r2_perf), ("perf/W", fit.r2_ppw))
            if r2 is not None and r2 < MIN_R2]
    if fit.ok and poor:
        status = "poor_fit"
        reason = (f"the Amdahl/Woo-Lee model does not describe these measurements ({', '.join(poor)}, "
                  f"below {MIN_R2}); no optimum is inferred")
        optimum = dataclasses.replace(optimum, status="cannot_tell", reason=reason, n_recommended=None,
                                      n_recommended_range=None, n_best_efficiency=None,
                                      n_best_efficiency_range=None, closed_form_n=None, extrapolated=False)
    out.fit = BenchmarkFit(status=status, reason=reason, params=fit.params, stderr=fit.stderr,
                           n_points=fit.n_points, r2_perf=fit.r2_perf, r2_ppw=fit.r2_ppw,
                           rmse_rel=fit.rmse_rel)
    out.optimum = optimum
    if status == "ok":
        out.model_fit = fit
    ref = out.reference
    if ref and has_power and math.isfinite(ref.perf_per_W):
        out.beats_reference_at = [p.nodes for p in out.cluster if p.perf_per_W > ref.perf_per_W]
        out.ppw_vs_reference = {str(p.nodes): p.perf_per_W / ref.perf_per_W for p in out.cluster}
    if ref and ref.perf_per_W_spin:
        out.ppw_vs_reference_spin = {str(p.nodes): (p.perf_per_W_spin or math.nan) / ref.perf_per_W_spin
                                     for p in out.cluster}
    return out


def power_by_nodes(frame: pd.DataFrame, cluster_label: str, spin: tuple[Any, Any] = (None, None)
                   ) -> list[dict[str, Any]]:
    """Average power of each configuration over all its points (thesis Fig. 5.32), as
    measured or modelled (ranks asleep while waiting) and with its ranks spinning."""
    out = []
    if "power_mean_W" not in frame or frame["power_mean_W"].isna().all():
        return out
    for (config, nodes), group in frame.groupby(["config", "nodes"]):
        powered = group.dropna(subset=["power_mean_W"])
        if powered.empty:
            continue
        kinds = sorted(set(powered["power_kind"].dropna()))
        out.append({"config": config, "nodes": int(nodes), "power_mean_W": float(powered["power_mean_W"].mean()),
                    "power_min_W": float(powered["power_mean_W"].min()),
                    "power_max_W": float(powered["power_mean_W"].max()),
                    "power_kind": kinds[0] if len(kinds) == 1 else "mixed",
                    "points": int(len(powered)), "is_reference": config == REFERENCE,
                    "power_spin_W": _spin_mean(powered, spin[1] if config == REFERENCE else spin[0])})
    return sorted(out, key=lambda r: (r["is_reference"], r["nodes"]))


def _spin_mean(rows: pd.DataFrame, spin_W: Any) -> float | None:
    if spin_W is None:
        return None
    if "idle_power_W" not in rows:
        return None
    idle = pd.to_numeric(rows["idle_power_W"], errors="coerce")
    watts = np.array([spin_W(int(n), int(r)) for n, r in zip(rows["nodes"], rows["ranks"])]) + idle.to_numpy()
    return float(np.nanmean(watts)) if np.isfinite(watts).any() else None


def offload_scenario(manifest: dict[str, Any], nodes: int, overrides: dict[str, Any],
                     stream: dict[str, Any] | None = None,
                     nodes_from: str = "the study's node count") -> model.OffloadScenario:
    """The offload inputs: model defaults, the study's device and reference watts, what a
    data-stream workload measured (``stream``, see measured_stream), user overrides."""
    base = model.OffloadScenario()
    device, server, device_s_per_B = base.device, base.server, base.device_s_per_B
    profiled = None
    sources = dict(base.sources)
    profiles: dict[str, dict] = {}
    for described in manifest.get("clusters", {}).values():
        profiles.update(described.get("profiles", {}))
    reference = Reference.parse(manifest.get("reference")).profile
    cluster_profiles = [p for name, p in profiles.items() if name != reference]
    if cluster_profiles:
        p = cluster_profiles[0]
        device = dataclasses.replace(device, name=p["name"], idle_W=float(p["idle_W"]), busy_W=float(p["busy_W"]))
        sources["device"] = f"profile {p['name']}: idle/busy watts from {p.get('sources', {}).get('idle', 'profile')}"
    if reference in profiles:
        p = profiles[reference]
        server = dataclasses.replace(server, name=p["name"], idle_W=float(p["idle_W"]), busy_W=float(p["busy_W"]))
        sources["server"] = f"profile {p['name']} (the study's reference system)"
        dev = cluster_profiles[0] if cluster_profiles else None
        if dev and p.get("speed") and dev.get("speed"):
            # The devices process a byte as much slower than the server as their cores are.
            ratio = profiled = float(p["speed"]) / float(dev["speed"])
            device_s_per_B = base.server_s_per_B * ratio
            sources["device_s_per_B"] = (f"server cost per byte x speed ratio {ratio:.3g} of the profiles "
                                         f"({p['name']} {p['speed']} vs {dev['name']} {dev['speed']})")
    sources["nodes"] = nodes_from
    scenario = dataclasses.replace(base, device=device, server=server, device_s_per_B=device_s_per_B,
                                   nodes=int(nodes), sources=sources)
    if stream:
        scenario = _measured(scenario, stream, profiled)
    for key, value in overrides.items():
        if key == "uplink":
            if value not in model.UPLINKS:
                raise ShoalError(f"--uplink {value}: use one of {', '.join(model.UPLINKS)}")
            scenario = dataclasses.replace(scenario, uplink=model.UPLINKS[value])
        elif key in ("rate_Bps", "parallel_fraction"):
            scenario = dataclasses.replace(scenario, **{key: float(value)})
            scenario.sources[key] = "given on the command line"
        else:
            raise ShoalError(f"unknown offload input '{key}'")
    scenario.validate()
    return scenario


# seed 004 §VI: one 2.5 MB camera image per second per device.
SEED004_RATE_Bps = 2.5e6


def _measured(scenario: model.OffloadScenario, stream: dict[str, Any],
              profiled: float | None = None) -> model.OffloadScenario:
    """The scenario with the device's (and server's) cost per byte and f as a workload measured them."""
    what = f"measured: {stream['workload']} {stream['size']}"
    sources = dict(scenario.sources)
    changes: dict[str, Any] = {"device_s_per_B": stream["device_s_per_B"], "rate_Bps": SEED004_RATE_Bps}
    joules = stream.get("device_J_per_B")
    sources["device_s_per_B"] = (f"{what} on one device, {stream['device_s_per_B']:.3g} s/B"
                                 + (f" ({joules:.3g} J/B with the switch)" if joules else ""))
    sources["rate_Bps"] = "seed 004 §VI: one 2.5 MB camera image per second per device"
    if stream.get("server_s_per_B"):
        changes["server_s_per_B"] = stream["server_s_per_B"]
        # The measured slowdown beside the profiles' speed ratio and seed 001's whole-board 8.
        beside = [f"profiles: {profiled:.3g}"] if profiled else []
        beside.append("seed 001: 8, a whole MinnowBoard against the NUC under MPI benchmarks")
        sources["server_s_per_B"] = (f"{what} on the reference, {stream['server_s_per_B']:.3g} s/B: one device "
                                     f"took {stream['device_s_per_B'] / stream['server_s_per_B']:.3g} times "
                                     f"as long ({'; '.join(beside)})")
    if stream.get("parallel_fraction") is not None:
        changes["parallel_fraction"] = stream["parallel_fraction"]
        sources["parallel_fraction"] = f"{what}: Amdahl f fitted over the node counts"
    return dataclasses.replace(scenario, sources=sources, **changes)


def analyse(run: Run) -> Findings:
    """The findings of one study run (``Findings.to_json`` is its entry in findings.json)."""
    manifest = run.manifest
    frame = run.read("results")
    work_frame = run.read("work")
    if frame.empty and work_frame.empty:
        raise ShoalError(f"{run.path} has no measured points yet; run or resume the study first")
    label = manifest.get("cluster_label") or (frame if not frame.empty else work_frame)["config"].iloc[0]
    k = _idle_fraction(manifest)
    spin = (work_analysis.spinning_watts(work_analysis.device_profile(manifest)),
            work_analysis.spinning_watts(work_analysis.reference_profile(manifest)))
    tests = ([analyse_test(frame, t, label, k, spin) for t in sorted(frame["test"].unique())]
             if not frame.empty else [])
    fits = {t.test: t.model_fit for t in tests if t.model_fit is not None}
    overall = model.overall_optimum(fits).to_dict() if fits else _no_overall(tests)
    request = saved_request(manifest)
    work = work_analysis.analyse(work_frame, manifest, label, REFERENCE,
                                 request.weights if request else None,
                                 study_workloads.Precision.of(request) if request else None)
    layouts = request.layouts(label, REFERENCE) if request else {}
    _name_layouts(work, layouts, label)
    measured_nodes = sorted((frame if not frame.empty else work_frame).query("config == @label")["nodes"].unique())
    n_offload, nodes_from = offload_size(work.headline.get(work_analysis.SLEEPING), measured_nodes)
    overrides = manifest.get("study", {}).get("offload", {})
    scenario = offload_scenario(manifest, n_offload, overrides, measured_stream(work),
                                f"this study's answer: {nodes_from}")
    verdict = model.decide(scenario)
    rates = np.geomspace(1e3, 1e8, 26)
    nodes_grid = list(range(1, max(8, 2 * n_offload) + 1))
    return Findings(
        run=str(run.path), cluster_label=label, reference=str(Reference.parse(manifest.get("reference"))),
        idle_fraction_k=k, work=work, tests=tests,
        power=power_by_nodes(frame, label, spin) if not frame.empty else [],
        overall_optimum=overall,
        offload=Offload(n_offload, nodes_from, verdict.to_dict(),
                        model.decision_map(scenario, rates, nodes_grid)),
        measured_points=int(len(frame) + len(work_frame)),
        modelled_power=any(bool((f.get("power_kind") == "modelled").any())
                           for f in (frame, work_frame) if "power_kind" in f),
        unconverged_points=int((frame["converged"].astype(str).str.lower() != "true").sum())
        if not frame.empty else 0,
        device_speed=device_speed(manifest), host_speed=host_speed(manifest),
        beside_seed=seed_compare.seed_rows(run), not_run=seed_compare.not_run_rows(run), launch=layouts)


def _name_layouts(work: WorkFindings, layouts: dict[str, str], label: str) -> None:
    """Every workload point names the launch layout it ran under (its configuration's)."""
    for w in work.workloads:
        for p in w.cluster:
            p["launch"] = layouts.get(label)
        if w.reference is not None:
            w.reference["launch"] = layouts.get(REFERENCE)


def offload_size(head: Headline | None, measured_nodes: list) -> tuple[int, str]:
    """The cluster size the offload decision is taken at, and why: the workloads' measured best
    (the best of a range whose sizes tie), else the largest measured node count."""
    if head is None or head.size is None:
        return int(max(measured_nodes) if measured_nodes else 1), "largest measured node count"
    span = head.best_range
    if span is not None and span.tied:
        return head.size, (f"the measured best size of the workloads, of the range {span.low}–{span.high} "
                           f"whose perf/W lies within {span.within:.1%}")
    return head.size, "the measured best size of the workloads"


def host_speed(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """This host's measured speed as the run's manifest holds it (None: not recorded)."""
    speed = manifest.get("host_speed")
    return speed if isinstance(speed, dict) else None


def device_speed(manifest: dict[str, Any]) -> str:
    """How fast the study's devices computed: "profile" (emulated and held to their profiles'
    speed), "host" (emulated but nothing could hold them: the host's speed, which says
    nothing about the devices) or "device" (real devices, or this machine itself)."""
    # Only emulated clusters describe an emulation.
    emulations = [c["emulation"] for c in manifest.get("clusters", {}).values()
                  if isinstance(c, dict) and isinstance(c.get("emulation"), dict)]
    if any((e or {}).get("device_speed") == "host" for e in emulations):
        return "host"
    return "profile" if emulations else "device"


def measured_stream(work: WorkFindings) -> dict[str, Any] | None:
    """Seconds and joules per byte of a data-stream workload (the first of the study's
    workloads whose runs report the bytes of input they processed), measured on one device
    and on the reference, with its fitted parallel fraction: the offload decision's inputs."""
    for w in work.workloads:
        if not w.cluster or not w.data_B_per_run:
            continue
        one = w.cluster[0]
        data = w.data_B_per_run
        out = {"workload": w.workload, "size": w.size, "device_s_per_B": one["time_median_s"] / data,
               "device_J_per_B": one["energy_J"] / data if one["energy_J"] else None,
               "parallel_fraction": w.fit.f if w.fit.status == "ok" else None}
        ref = w.reference
        if ref:
            out["server_s_per_B"] = ref["time_median_s"] / data
        return out
    return None


def _no_overall(tests: list[BenchmarkResult]) -> dict[str, Any]:
    """The overall answer when no test's fit can be trusted: the measured best, said plainly."""
    best = [t.optimum.n_best_measured for t in tests if t.optimum and t.optimum.n_best_measured]
    common = max(set(best), key=best.count) if best else None
    return {"status": "cannot_tell", "n_recommended": None, "n_best_measured": common,
            "reason": "no test's measurements follow the Amdahl/Woo-Lee model closely enough to "
                      "predict an optimum" + (f" (the measured best below is the most common over "
                                               f"{len(tests)} tests: {best.count(common)} agree)"
                                               if common else "")}

