"""The study's answer from its workloads: per workload the numbers per node count,
Amdahl's f, n* with a bootstrap interval, under two waiting conditions; then one
answer over the workloads whose fits hold, and the headline that says it.

Units: perf is the workload's work per second (pixels/s, alignments/s, ...);
perf/W is work per joule over the timed core phase. "Gross" counts every
watt of the devices in use and of the switch their links go through; "net"
counts only the watts above their idle draw (the energy the work itself adds).

Two waiting conditions (shoal.model.waiting): ``sleeping``, the energy the
run's power source gave (on emulated devices modelled from the CPU time the
ranks used, waiting ranks asleep under libshoalwait), and ``spinning``, every
core that holds a rank drawing busy watts for the whole run, as under the MPI
libraries' default busy polling (seed 000's condition).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np
import pandas as pd

from shoal import model
from shoal.model import mix, resample, waiting
from shoal.study import workloads as study_workloads
from shoal.study.findings import (Combined, ConditionResult, FitSummary, Headline, PrecisionSummary,
                                  SizeRange, WorkFindings, WorkloadResult)
from shoal.study.reference import Reference

# Below this speed-up at the largest node count a workload is reported as not scaling.
NOT_SCALING_SPEEDUP = 1.5
# Fitted f this far below the measured one-device parallel share: something other than
# the serial part (communication growing with n) limits the speed-up.
F_DISAGREE = 0.05
MIN_R2 = 0.9  # below it the model does not describe the workload well enough to combine it
# n* beyond this many times the largest measured count is reported as unbounded.
N_STAR_LIMIT = 4
# Switch watts tried for the sensitivity of n*: these multiples of the profile's figure.
SWITCH_FACTORS = (0.0, 0.5, 1.0, 2.0)
SLEEPING, SPINNING = waiting.SLEEPING, waiting.SPINNING


def _per_nodes(rows: pd.DataFrame, spin_W: Any = None, precision: study_workloads.Precision | None = None
               ) -> tuple[list[dict[str, Any]], dict[str, dict[int, list[float]]]]:
    """The numbers of each node count (median over its repetitions), and under each waiting
    condition the energy per unit of work of every repetition by node count. ``spin_W(nodes,
    ranks)``: the devices' power with every rank spinning, for the spinning condition."""
    out = []
    samples: dict[str, dict[int, list[float]]] = {SLEEPING: {}, SPINNING: {}}
    for nodes, group in rows.groupby("nodes"):
        times = group["time_s"].astype(float)
        median = float(times.median())
        work_each = group["work"].astype(float)
        work = float(work_each.median())
        energy = _column(group, "energy_J")
        net = _column(group, "energy_net_J")
        power = _column(group, "power_mean_W")
        shared = _column(group, "shared_power_W")
        serial = (group["serial_s"].astype(float) / times).median()
        ranks = int(group["ranks"].iloc[0])
        host_s = float((times * pd.to_numeric(group.get("dilation", 1.0), errors="coerce").fillna(1.0)).sum())
        point = {
            "nodes": int(nodes), "ranks": ranks, "reps": int(len(group)),
            "time_median_s": median,
            "time_spread": float((times.max() - times.min()) / median) if median > 0 else None,
            "ci_rel": _finite_or_none(study_workloads.ci_rel(times.tolist())),
            "precision": precision.state(times.tolist(), host_s) if precision else None,
            "perf": work / median if median > 0 else None,
            "serial_share": float(serial),
            "comm_share": float((group["comm_s"].astype(float) / times).median()),
            "energy_J": _median(energy), "energy_net_J": _median(net),
            "power_W": _median(power), "shared_power_W": _median(shared),
            "checks": "/".join(sorted(set(group["check"].astype(str)))),
            "point_ids": list(group["point_id"]),
        }
        e, en = point["energy_J"], point["energy_net_J"]
        point["perf_per_W"] = work / e if e else None  # work per joule = (work/s)/W
        point["perf_per_W_net"] = work / en if en else None
        point["energy_per_unit_J"] = _median(energy / work_each) if e else None
        if e:
            samples[SLEEPING][int(nodes)] = [float(x) for x in (energy / work_each).dropna()]
        idle_W = _median(_column(group, "idle_power_W"))
        if spin_W is not None and idle_W is not None:
            watts = spin_W(int(nodes), ranks) + idle_W
            point["power_spin_W"] = watts
            point["energy_spin_J"] = watts * median
            point["perf_per_W_spin"] = work / (watts * median) if median > 0 else None
            point["energy_per_unit_spin_J"] = _median(watts * times / work_each)
            samples[SPINNING][int(nodes)] = [float(x) for x in (watts * times / work_each).dropna()]
        out.append(point)
    return out, samples


def _column(group: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(group[name], errors="coerce") if name in group else pd.Series(dtype=float)


def _median(series: pd.Series) -> float | None:
    values = [v for v in series.dropna() if math.isfinite(v)]
    return float(statistics.median(values)) if values else None


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _profiles(manifest: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The nodes (cluster first, an emulated reference last) and profiles of the study's cluster."""
    for described in manifest.get("clusters", {}).values():
        return described.get("nodes", []), described.get("profiles", {})
    return [], {}


def device_profile(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The cluster devices' profile (idle and busy watts) from the run's manifest: an
    emulated reference is the last node of the cluster it was emulated in."""
    nodes, profiles = _profiles(manifest)
    names = [n["profile"] for n in nodes]
    if Reference.parse(manifest.get("reference")).emulated:
        names = names[:-1]
    for name in names:
        p = profiles.get(name)
        if p and p.get("busy_W"):
            return p
    return None


def reference_profile(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The emulated reference's profile (None for this machine or no reference)."""
    reference = Reference.parse(manifest.get("reference"))
    if not reference.emulated:
        return None
    return _profiles(manifest)[1].get(reference.profile)


def spinning_watts(profile: dict[str, Any] | None):
    """``(nodes, ranks) -> W`` that many devices of the profile draw above their idle power
    with every rank spinning; a row's idle power (devices and switch) comes on top."""
    if not profile or not profile.get("busy_W"):
        return None
    idle, busy, cores = float(profile["idle_W"]), float(profile["busy_W"]), int(profile.get("cores") or 1)
    return lambda nodes, ranks: nodes * (waiting.spinning_power_W(idle, busy, cores, math.ceil(ranks / nodes))
                                         - idle)


def analyse_one(rows: pd.DataFrame, label: str, reference_label: str,
                device: dict[str, Any] | None, reference: dict[str, Any] | None = None,
                precision: study_workloads.Precision | None = None) -> WorkloadResult:
    """One workload at one size: the numbers per node count, the fit, n* and its checks,
    under both waiting conditions."""
    workload, size = rows["workload"].iloc[0], rows["size"].iloc[0]
    cluster_rows = rows[rows["config"] == label]
    points, samples = _per_nodes(cluster_rows, spinning_watts(device), precision)
    ref_points, _ = _per_nodes(rows[rows["config"] == reference_label], spinning_watts(reference), precision)
    data = pd.to_numeric(rows["data_B"], errors="coerce").dropna() if "data_B" in rows else pd.Series()
    out = WorkloadResult(workload, size, rows["unit"].iloc[0], points, ref_points[0] if ref_points else None,
                         float(data.median()) if len(data) else None)
    if not points:
        out.status = "no runs on the cluster finished"
        return out
    base = points[0]
    for p in points:
        p["speedup"] = base["time_median_s"] / p["time_median_s"] if p["time_median_s"] > 0 else None
        if p.get("energy_spin_J") and p.get("energy_J"):
            p["energy_saved"] = 1.0 - p["energy_J"] / p["energy_spin_J"]
    k = float(device["idle_W"]) / float(device["busy_W"]) if device else None
    busy = float(device["busy_W"]) if device else None
    shared_W = statistics.median([p["shared_power_W"] for p in points if p["shared_power_W"] is not None]
                                 or [0.0])
    c = shared_W / busy if busy else 0.0
    out.k, out.shared_power_W, out.c = k, shared_W, c
    out.device, out.device_busy_W = device.get("name") if device else None, busy

    per_rep = cluster_rows.astype({"time_s": float, "work": float})
    nodes = per_rep["nodes"].astype(int).to_numpy()
    perf = (per_rep["work"] / per_rep["time_s"]).to_numpy()
    # f from the speed-up alone: a property of the program, the same under both conditions.
    fit = model.fit_scaling(nodes, perf, idle_fraction=k, shared_power_fraction=c)
    r2_medians = _r2_medians(points, fit)
    out.fit = FitSummary(fit.status, fit.reason, fit.params.get("f"), fit.stderr.get("f"), fit.r2_perf,
                         r2_medians, fit.n_points, bool(fit.ok and (r2_medians or 0) >= MIN_R2))
    largest = points[-1]
    out.scaling = ("not_scaling" if (largest["speedup"] or 0) < NOT_SCALING_SPEEDUP and largest["nodes"] > 1
                   else "scaling")
    out.f_serial = 1.0 - base["serial_share"]
    out.f_boot = resample.f_samples(nodes, perf) if fit.ok else []
    out.conditions = {cond: _condition(points, fit, out.f_boot, kk, c, samples[cond])
                      for cond, kk in ((SLEEPING, k), (SPINNING, waiting.spinning_idle_fraction()))
                      if kk is not None}
    limit = N_STAR_LIMIT * largest["nodes"]
    out.n_star, out.n_star_range_se, out.n_star_by_switch_W = _n_star(fit, k, c, shared_W, busy, limit)
    sleeping = out.conditions.get(SLEEPING)
    out.n_best_measured = sleeping.best_measured if sleeping else None
    if sleeping is not None and out.n_best_measured is not None:
        vs_best = resample.mix_ppw_intervals({out.name: sleeping.energy_samples}, {out.name: 1.0},
                                             over=out.n_best_measured)
        out.best_range = size_range(vs_best, out.n_best_measured)
    out.n_best_measured_net = _best(points, "perf_per_W_net")
    out.cross_check = _cross_check(out, fit)
    out.verdict = _verdict(out, fit, limit)
    if out.reference and out.reference["perf_per_W"]:
        ref = out.reference["perf_per_W"]
        out.ppw_vs_reference = {str(p["nodes"]): (p["perf_per_W"] or 0) / ref for p in points}
    if out.reference and out.reference.get("perf_per_W_spin"):
        ref = out.reference["perf_per_W_spin"]
        out.ppw_vs_reference_spin = {str(p["nodes"]): (p.get("perf_per_W_spin") or 0) / ref for p in points}
    if fit.ok:
        out.model_fit = fit
    return out


def _r2_medians(points: list[dict[str, Any]], fit: model.ScalingFit) -> float | None:
    """Share of the variance of the median performance over node counts that the fitted
    Amdahl curve explains: whether the model describes the workload. (The scatter of single
    repetitions around their median is noise, which the bootstrap interval of n* carries.)"""
    if not fit.ok:
        return None
    n = np.array([p["nodes"] for p in points], dtype=float)
    y = np.array([p["perf"] or np.nan for p in points], dtype=float)
    predicted = fit.params["perf_scale"] * model.amdahl_speedup(n, fit.params["f"])
    total = float(np.nansum((y - np.nanmean(y)) ** 2))
    return 1.0 - float(np.nansum((y - predicted) ** 2)) / total if total > 0 else None


def _best(points: list[dict[str, Any]], key: str) -> int | None:
    measured = [p for p in points if p.get(key)]
    return max(measured, key=lambda p: p[key])["nodes"] if measured else None


def _condition(points: list[dict[str, Any]], fit: model.ScalingFit, f_boot: list, k: float,
               c: float, samples: dict[int, list[float]] | None = None) -> ConditionResult:
    """One waiting condition: measured perf/W per node count, its best, and n* with its interval."""
    key = "perf_per_W" if k != waiting.spinning_idle_fraction() else "perf_per_W_spin"
    energy_key = "energy_per_unit_J" if key == "perf_per_W" else "energy_per_unit_spin_J"
    base = points[0].get(energy_key)
    star = (resample.n_star_interval(fit.params["f"], f_boot, k, c) if fit.ok
            else resample.Interval(None, None, None, 0, 0))
    return ConditionResult(k, {str(p["nodes"]): p.get(key) for p in points},
                           {str(p["nodes"]): (p[energy_key] / base if base and p.get(energy_key) else None)
                            for p in points},
                           _best(points, key), star, samples or {})


def _n_star(fit: model.ScalingFit, k: float | None, c: float, shared_W: float, busy: float | None,
            limit: float) -> tuple[float | None, list[float | None] | None, list[dict[str, float | None]]]:
    """n* = sqrt(c f / (k (1 - f))) with a one-standard-error range in f (the cross-check of
    the bootstrap interval), and its sensitivity to the switch's watts; beyond ``limit``
    devices it is unbounded (None)."""
    if not fit.ok or k is None:
        return None, None, []
    f, se = fit.params["f"], fit.stderr.get("f") or 0.0
    star = model.best_nodes_closed_form(f, k, c)
    lo = model.best_nodes_closed_form(max(0.0, f - se), k, c)
    hi = model.best_nodes_closed_form(min(1.0, f + se), k, c)
    sensitivity = []
    for factor in SWITCH_FACTORS:
        watts = shared_W * factor
        cc = watts / busy if busy else 0.0
        sensitivity.append({"switch_W": watts,
                            "n_star": _finite(model.best_nodes_closed_form(f, k, cc), limit)})
    return _finite(star, limit), [_finite(lo, limit), _finite(hi, limit)], sensitivity


def _finite(x: float, limit: float = math.inf) -> float | None:
    return float(x) if math.isfinite(x) and x <= limit else None


def _cross_check(out: WorkloadResult, fit: model.ScalingFit) -> str:
    if not fit.ok:
        return ""
    f, f_serial = fit.params["f"], out.f_serial
    if f < f_serial - F_DISAGREE:
        return (f"the fitted f = {f:.3f} is below the {f_serial:.3f} that the measured serial part "
                f"allows: what limits the speed-up grows with n (communication, load imbalance), "
                "not the serial work alone")
    return f"the fitted f = {f:.3f} agrees with the measured serial part (1 - serial share = {f_serial:.3f})"


def _verdict(out: WorkloadResult, fit: model.ScalingFit, limit: float) -> str:
    if out.scaling == "not_scaling":
        return not_scaling_verdict(out.cluster[0]["nodes"], out.cluster[-1]["nodes"], out.cluster[-1]["speedup"])
    if not fit.ok:
        return f"cannot tell: {fit.reason}"
    if out.c <= 0:
        return ("best perf/W at n = 1: no power is shared by the devices (no switch or gateway in "
                "their links' profiles), and with only per-device power Woo-Lee perf/W falls with "
                "every device added")
    measured = out.n_best_measured
    largest = out.cluster[-1]["nodes"]
    star = out.n_star
    model_text = (f"model n* = {star:.2f}" if star is not None
                  else f"model n* beyond {limit:g} (f = {fit.params['f']:.3f})")
    span = out.best_range
    if span is not None and span.tied:
        return (f"best measured perf/W at n = {measured}, tied with n = {span.low}–{span.high} within "
                f"{span.within:.1%} (within the points' 95 % uncertainty); {model_text}")
    if measured == largest and largest > 1:
        return f"perf/W still rising at n = {largest} (measured); {model_text}"
    return f"best measured perf/W at n = {measured}; {model_text}"


def not_scaling_verdict(smallest: int, largest: int, speedup: float) -> str:
    """The verdict of a workload that does not scale, in the node counts measured: the
    speed-up is over the fewest devices that ran it, which need not be one."""
    if smallest == 1:
        return f"does not scale: {speedup:.2f}x from 1 to {largest} devices; run it on one device (or offload it)"
    return (f"does not scale from {smallest} to {largest} devices: {speedup:.2f}x; {smallest} devices do it "
            f"nearly as fast (fewer were not measured), or offload it")


def _combined(results: list[WorkloadResult], weights: dict[str, float], condition: str) -> Combined | None:
    """The mix of the workloads whose fits hold, under one condition (None: no member)."""
    members: dict[str, tuple[float, WorkloadResult]] = {}
    left_out = {}
    for r in results:
        name = r.name
        w = weights.get(r.workload, 0.0)
        if r.model_fit is None or not r.fit.describes:
            left_out[name] = (r.verdict or r.status or "no fit") if r.model_fit is None else \
                (f"the model explains too little of its median speed-up "
                 f"(R² = {r.fit.r2_medians or 0:.2f} < {MIN_R2})")
        elif r.scaling != "scaling":
            left_out[name] = r.verdict
        elif condition not in r.conditions:
            left_out[name] = "no device profile to model its power"
        elif w <= 0:
            left_out[name] = "weight 0 in --mix"
        else:
            members[name] = (w, r)
    if not members:
        return None
    total = sum(w for w, _ in members.values())
    weights_used = {name: w / total for name, (w, _) in members.items()}

    def member(name: str, f: float) -> mix.Member:
        r = members[name][1]
        return mix.Member(name, weights_used[name], f, r.conditions[condition].k, r.c)

    value = mix.mix_best([member(n, r.model_fit.params["f"]) for n, (_, r) in members.items()])
    boot = []
    draws = min(len(r.f_boot) for _, r in members.values())
    for b in range(draws):
        fs = {n: r.f_boot[b] for n, (_, r) in members.items()}
        boot.append(None if None in fs.values() else mix.mix_best([member(n, f) for n, f in fs.items()]))
    star = resample.interval(value if math.isfinite(value) else None, boot)
    if not math.isfinite(value):
        star = resample.Interval(None, star.lo, star.hi, star.resamples, star.failed)
    relative = {name: {int(n): e for n, e in r.conditions[condition].relative_energy.items()
                       if e is not None} for name, (_, r) in members.items()}
    measured = mix.measured_mix(relative, weights_used)
    best = mix.best_measured(measured)
    disagree = []
    for name, (_, r) in members.items():
        own = r.conditions[condition].n_star
        if star.value is not None and own.lo is not None and not own.contains(star.value):
            hi = "∞" if own.hi is None else f"{own.hi:.2f}"
            disagree.append(f"{name}: its n* interval {own.lo:.2f}..{hi} excludes the mix's {star.value:.2f}")
        own_best = r.conditions[condition].best_measured
        if best is not None and own_best is not None and abs(own_best - best) > 1:
            disagree.append(f"{name}: measured best at n = {own_best}, the mix's at n = {best}")
    rows = [pid for _, r in members.values() for p in r.cluster for pid in p["point_ids"]]
    energies = {name: r.conditions[condition].energy_samples for name, (_, r) in members.items()}
    intervals = resample.mix_ppw_intervals(energies, weights_used)
    vs_best = resample.mix_ppw_intervals(energies, weights_used, over=best) if best is not None else {}
    return Combined(condition, weights_used, left_out, measured, best, star, disagree, rows,
                    {n: i for n, i in intervals.items() if n in measured},
                    {n: i for n, i in vs_best.items() if n in measured})


def headline(combined: Combined, results: list[WorkloadResult]) -> Headline:
    """The first line: the measured best size of the mix; the sizes next to it that the
    measurements cannot tell apart from it, as a range ("3–4 devices: within 2 % of each
    other"); or "≥ N" when its perf/W at the largest measured N stands clear above the next
    smaller N's. The model's n* beside it, never in its place."""
    energy = combined.measured_energy
    largest = max(energy) if energy else 0
    # Node counts need not start at 1 nor be contiguous (a preset's 8, 16, 32).
    smallest = min(energy) if energy else 0
    best = combined.best_measured
    gain = energy[smallest] / energy[best] if best is not None and energy.get(best) else None
    star = combined.n_star
    model_text = ("the model sets no bound" if star.value is None
                  else f"model suggests ~{star.value:.1f}" + (
                      f" ({star.lo:.1f}..{'∞' if star.hi is None else format(star.hi, '.1f')})"
                      if star.lo is not None else ""))
    cond = "sleeping (libshoalwait)" if combined.condition == SLEEPING else "spinning (MPI default)"
    rows_at = {n: [pid for r in results if r.name in combined.weights
                   for p in r.cluster if p["nodes"] == n for pid in p["point_ids"]]
               for n in energy}
    if best is None:
        return Headline(combined.condition, None, False, largest, None, None, star,
                        f"{cond}: cannot tell, no node count measured for every workload of the mix")
    span = size_range(combined.ppw_vs_best, best)
    previous = max((n for n in energy if n < largest), default=None)
    at_least = best == largest and previous is not None and not span.holds(previous)
    rising = energy[previous] / energy[largest] - 1.0 if at_least else None
    base = "one device's" if smallest == 1 else f"{smallest} devices'"
    if span.tied:
        text = (f"{cond}: {span.text()} of {smallest}..{largest} measured: perf/W within {span.within:.1%} "
                f"of each other, within the points' 95 % uncertainty (best measured at {best}, {gain:.2f}x "
                f"{base}); {model_text}")
    elif at_least:
        text = (f"{cond}: ≥ {largest} devices: perf/W still rising at N = {largest} (measured, "
                f"{rising:+.1%} over N = {previous}); {model_text}")
    else:
        text = (f"{cond}: best perf/W at {best} device(s) of {smallest}..{largest} measured "
                f"({gain:.2f}x {base}); {model_text}")
    behind = [n for n in energy if span.holds(n) or n == smallest or (at_least and n == previous)]
    rows = sorted({pid for n in behind for pid in rows_at.get(n, [])})
    return Headline(combined.condition, best, at_least, largest, gain, rising, star, text, rows, span,
                    smallest)


def size_range(vs_best: dict[int, resample.Interval], best: int) -> SizeRange:
    """The sizes next to the measured best whose perf/W over the best's has an interval that
    holds 1 (``vs_best``: shoal.model.resample.mix_ppw_intervals over the best), and how far
    apart their measured perf/W lies (without intervals: the best alone)."""
    if best not in vs_best:
        return SizeRange(best, best, 0.0)
    low, high = mix.tied_range(vs_best, best)
    lowest = min(vs_best[n].value for n in vs_best if low <= n <= high)
    return SizeRange(low, high, 1.0 / lowest - 1.0)


def precision_summary(results: list[WorkloadResult], precision: study_workloads.Precision | None
                      ) -> PrecisionSummary:
    """How many workload points reached the CI target, and which did not and why."""
    points = [(r, p, cfg) for r in results for cfg, ps in (("cluster", r.cluster),
                                                          ("reference", [r.reference] if r.reference else []))
              for p in ps]
    missed = [{"workload": r.name, "config": cfg, "nodes": p["nodes"], "reps": p["reps"],
               "ci_rel": p["ci_rel"], "why": p["precision"]}
              for r, p, cfg in points if p.get("precision") != study_workloads.CONVERGED]
    return PrecisionSummary(precision.ci if precision else None, len(points), len(points) - len(missed), missed)


def analyse(frame: pd.DataFrame, manifest: dict[str, Any], label: str, reference_label: str,
            weights: dict[str, float] | None = None,
            precision: study_workloads.Precision | None = None) -> WorkFindings:
    """Every workload (and size), one answer per waiting condition over those whose fits
    hold (weighted by ``weights``, default equal), and the headline."""
    if precision is not None and not frame.empty:
        frame = precision.counted(frame)
    if frame.empty:
        return WorkFindings()
    device = device_profile(manifest)
    reference = reference_profile(manifest)
    results = [analyse_one(rows, label, reference_label, device, reference, precision)
               for _, rows in frame.groupby(["workload", "size"], sort=False)]
    names = list(dict.fromkeys(r.workload for r in results))
    weights = weights or {n: 1.0 / len(names) for n in names}
    combined = {cond: c for cond in (SLEEPING, SPINNING)
                if (c := _combined(results, weights, cond)) is not None}
    heads = {cond: headline(c, results) for cond, c in combined.items()}
    if not combined:
        heads[SLEEPING] = _no_headline(results)
    return WorkFindings(results, combined, heads, precision_summary(results, precision))


def _no_headline(results: list[WorkloadResult]) -> Headline:
    """No workload's fit holds: say so, with each one's reason and measured best."""
    largest = max((p["nodes"] for r in results for p in r.cluster), default=0)
    why = "; ".join(f"{r.name}: {r.verdict or r.status}"
                    + (f" (measured best n = {r.n_best_measured})" if r.n_best_measured else "")
                    for r in results)
    return Headline(SLEEPING, None, False, largest, None, None, resample.Interval(None, None, None, 0, 0),
                    f"cannot tell from the workloads, none of whose fits holds: {why}")

