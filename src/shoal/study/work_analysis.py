"""From a study's workload runs to its answer: speed-up and perf/W per node
count, Amdahl and Woo-Lee with the shared power of the switch, the best
cluster size n* with its uncertainty and its sensitivity to the switch's
watts, and a cross-check of the fitted f against the measured serial part.

Units: perf is the workload's work per second (pixels/s, alignments/s, ...);
perf/W is work per joule over the timed core phase. "Gross" counts every
watt of the devices in use and of the switch their links go through; "net"
counts only the watts above their idle draw (the energy the work itself adds).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np
import pandas as pd

from shoal import model
from shoal.model.optimum import UNBOUNDED

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


def _per_nodes(rows: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for nodes, group in rows.groupby("nodes"):
        times = group["time_s"].astype(float)
        median = float(times.median())
        energy = group["energy_J"].astype(float) if "energy_J" in group else pd.Series(dtype=float)
        net = group["energy_net_J"].astype(float) if "energy_net_J" in group else pd.Series(dtype=float)
        work = float(group["work"].astype(float).median())
        power = group["power_mean_W"].astype(float) if "power_mean_W" in group else pd.Series(dtype=float)
        shared = group["shared_power_W"].astype(float) if "shared_power_W" in group else pd.Series(dtype=float)
        serial = (group["serial_s"].astype(float) / times).median()
        point = {
            "nodes": int(nodes), "ranks": int(group["ranks"].iloc[0]), "reps": int(len(group)),
            "time_median_s": median,
            "time_spread": float((times.max() - times.min()) / median) if median > 0 else None,
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
        out.append(point)
    return out


def _median(series: pd.Series) -> float | None:
    values = [v for v in series.dropna() if math.isfinite(v)]
    return float(statistics.median(values)) if values else None


def device_profile(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The cluster devices' profile (idle and busy watts) from the run's manifest: an
    emulated reference is the last node of the cluster it was emulated in."""
    reference = manifest.get("reference")
    for described in manifest.get("clusters", {}).values():
        profiles = described.get("profiles", {})
        names = [n["profile"] for n in described.get("nodes", [])]
        for name in names[:-1] if reference not in (None, "host", "none") else names:
            p = profiles.get(name)
            if p and p.get("busy_W"):
                return p
    return None


def analyse_one(rows: pd.DataFrame, label: str, reference_label: str,
                device: dict[str, Any] | None) -> dict[str, Any]:
    """One workload at one size: the numbers per node count, the fit, n* and its checks."""
    workload, size = rows["workload"].iloc[0], rows["size"].iloc[0]
    cluster_rows = rows[rows["config"] == label]
    out: dict[str, Any] = {"workload": workload, "size": size, "unit": rows["unit"].iloc[0]}
    points = _per_nodes(cluster_rows)
    reference = _per_nodes(rows[rows["config"] == reference_label])
    out["cluster"] = points
    out["reference"] = reference[0] if reference else None
    data = pd.to_numeric(rows["data_B"], errors="coerce").dropna() if "data_B" in rows else pd.Series()
    out["data_B_per_run"] = float(data.median()) if len(data) else None
    if not points:
        out["status"] = "no runs on the cluster finished"
        return out
    base = points[0]
    for p in points:
        p["speedup"] = base["time_median_s"] / p["time_median_s"] if p["time_median_s"] > 0 else None
    k = float(device["idle_W"]) / float(device["busy_W"]) if device else None
    busy = float(device["busy_W"]) if device else None
    shared_W = statistics.median([p["shared_power_W"] for p in points if p["shared_power_W"] is not None]
                                 or [0.0])
    c = shared_W / busy if busy else 0.0
    out.update(k=k, shared_power_W=shared_W, c=c, device=device.get("name") if device else None,
               device_busy_W=busy)

    per_rep = cluster_rows.astype({"time_s": float, "work": float})
    nodes = per_rep["nodes"].astype(int).to_numpy()
    perf = (per_rep["work"] / per_rep["time_s"]).to_numpy()
    energy = per_rep["energy_J"].astype(float).to_numpy() if "energy_J" in per_rep else None
    ppw = per_rep["work"].to_numpy() / energy if energy is not None and np.isfinite(energy).any() else None
    fit = model.fit_scaling(nodes, perf, ppw, idle_fraction=k, shared_power_fraction=c)
    out["fit"] = {"status": fit.status, "reason": fit.reason, "f": fit.params.get("f"),
                  "f_stderr": fit.stderr.get("f"), "r2_perf": fit.r2_perf, "r2_ppw": fit.r2_ppw,
                  "n_points": fit.n_points, "describes": bool(fit.ok and (fit.r2_perf or 0) >= MIN_R2)}
    optimum = model.optimal_nodes(fit)
    out["optimum"] = optimum.to_dict()
    measured = [p for p in points if p["perf_per_W"]]
    out["n_best_measured"] = max(measured, key=lambda p: p["perf_per_W"])["nodes"] if measured else None
    out["n_best_measured_net"] = (max(measured, key=lambda p: p["perf_per_W_net"] or 0)["nodes"]
                                  if measured and any(p["perf_per_W_net"] for p in measured) else None)
    largest = points[-1]
    out["scaling"] = ("not_scaling" if (largest["speedup"] or 0) < NOT_SCALING_SPEEDUP and largest["nodes"] > 1
                      else "scaling")
    out["f_serial"] = 1.0 - base["serial_share"]
    out.update(_n_star(fit, k, c, shared_W, busy, N_STAR_LIMIT * largest["nodes"]))
    out["cross_check"] = _cross_check(out, fit)
    out["verdict"] = _verdict(out, fit, optimum)
    if out["reference"] and out["reference"]["perf_per_W"]:
        ref = out["reference"]["perf_per_W"]
        out["ppw_vs_reference"] = {str(p["nodes"]): (p["perf_per_W"] or 0) / ref for p in points}
    if fit.ok:
        out["_fit"] = fit
    return out


def _n_star(fit: model.ScalingFit, k: float | None, c: float, shared_W: float,
            busy: float | None, limit: float) -> dict[str, Any]:
    """n* = sqrt(c f / (k (1 - f))) with a one-standard-error range in f, and its
    sensitivity to the switch's watts; beyond ``limit`` devices it is unbounded (None)."""
    if not fit.ok or k is None:
        return {"n_star": None, "n_star_range": None, "n_star_by_switch_W": []}
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
    return {"n_star": _finite(star, limit), "n_star_range": [_finite(lo, limit), _finite(hi, limit)],
            "n_star_by_switch_W": sensitivity}


def _finite(x: float, limit: float = math.inf) -> float | None:
    return float(x) if math.isfinite(x) and x <= limit else None


def _cross_check(out: dict[str, Any], fit: model.ScalingFit) -> str:
    if not fit.ok:
        return ""
    f, f_serial = fit.params["f"], out["f_serial"]
    if f < f_serial - F_DISAGREE:
        return (f"the fitted f = {f:.3f} is below the {f_serial:.3f} that the measured serial part "
                f"allows: what limits the speed-up grows with n (communication, load imbalance), "
                "not the serial work alone")
    return f"the fitted f = {f:.3f} agrees with the measured serial part (1 - serial share = {f_serial:.3f})"


def _verdict(out: dict[str, Any], fit: model.ScalingFit, optimum: model.Optimum) -> str:
    if out["scaling"] == "not_scaling":
        top = out["cluster"][-1]
        return (f"does not scale: {top['speedup']:.2f}x on {top['nodes']} devices; "
                "run it on one device (or offload it)")
    if not fit.ok:
        return f"cannot tell: {fit.reason}"
    if out["c"] <= 0:
        return ("best perf/W at n = 1: no power is shared by the devices (no switch or gateway in "
                "their links' profiles), and with only per-device power Woo-Lee perf/W falls with "
                "every device added")
    if optimum.status == UNBOUNDED:
        return (f"more devices keep paying off: perf/W still within {optimum.tolerance:.0%} of its best "
                f"at n = {optimum.n_max} (f = {fit.params['f']:.3f})")
    star = out["n_star"]
    return (f"best perf/W at n = {optimum.n_best_efficiency} (n* = {star:.2f}); measured best at "
            f"n = {out['n_best_measured']}")


def analyse(frame: pd.DataFrame, manifest: dict[str, Any], label: str,
            reference_label: str) -> dict[str, Any]:
    """Every workload (and size) of a study, and one n* over those the model describes."""
    if frame.empty:
        return {"workloads": [], "overall": None}
    device = device_profile(manifest)
    results = [analyse_one(rows, label, reference_label, device)
               for _, rows in frame.groupby(["workload", "size"], sort=False)]
    fits = {f"{r['workload']} {r['size']}": r["_fit"] for r in results
            if "_fit" in r and r["scaling"] == "scaling" and r["fit"]["describes"]}
    overall = model.overall_optimum(fits).to_dict() if fits else None
    return {"workloads": results, "overall": overall}


def public(section: dict[str, Any]) -> dict[str, Any]:
    """The section without private objects, for JSON."""
    return {**section, "workloads": [{k: v for k, v in w.items() if not k.startswith("_")}
                                     for w in section["workloads"]]}
