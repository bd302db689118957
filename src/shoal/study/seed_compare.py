"""Shoal's numbers beside a seed's printed numbers, and the points a study planned not to run.

For preset ``seed000``, seed 000's readings of its six boards and Table 5.6 (shoal.study.seed000).

For a study of preset ``seed002`` every number seed 002 prints for its experiments
(``shoal/data/seed002.csv``: §V's IMB text, Fig. 8's ray-tracing times, Table I) stands beside
the same quantity measured here: the median of the counted repetitions (workloads) or of the
point (IMB), the seed's value, their ratio and where the seed prints it. Table I's sets ran
scaled (``shoal.study.presets``): their times stand beside the seed's divided by the work's
scale (N² L²), their speed-ups beside the seed's as printed. shoal.report.study_seed renders them.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

import pandas as pd

from shoal.inputs import grammar
from shoal.runs.store import Run
from shoal.study import presets, seed002, workloads
from shoal.study.request import StudyRequest, saved_request

SEED002_SIZES = tuple(grammar.sizes(presets.SEED002_SIZES))


def _row(quantity: str, config: str, shoal: float | None, seed: seed002.SeedValue | None,
         scale: float = 1.0, unit: str = "s", note: str = "") -> dict[str, Any]:
    value = seed.value / scale if seed else None
    high = seed.value_high / scale if seed and seed.value_high else None
    ratio = shoal / ((value + high) / 2 if high else value) if shoal is not None and value else None
    return {"quantity": quantity, "configuration": config, "shoal": shoal, "seed": value,
            "seed_high": high, "ratio": ratio, "unit": unit,
            "source": (seed.source + (f"; {note}" if note else "")) if seed else note}


def _median(values: Any) -> float | None:
    values = [float(v) for v in values]
    return statistics.median(values) if values else None


def _work_rows(run: Run, request: StudyRequest, label: str) -> list[dict[str, Any]]:
    frame = run.read("work")
    if frame.empty:
        return []
    frame = workloads.Precision.of(request).counted(frame)
    rows: list[dict[str, Any]] = []

    def times(workload: str, size: str, config: str, nodes: int | None) -> float | None:
        at = frame[(frame["workload"] == workload) & (frame["size"].astype(str) == size)
                   & (frame["config"] == config)]
        if nodes is not None:
            at = at[at["nodes"].astype(int) == nodes]
        return _median(at["time_s"])

    counts = sorted({int(n) for n in frame[frame["config"] == label]["nodes"]})
    for size in sorted({str(s) for s in frame[frame["workload"] == "raytrace"]["size"]}, key=int):
        base = times("raytrace", size, label, 8)
        for n in counts:
            t = times("raytrace", size, label, n)
            rows.append(_row(f"raytrace {size}² time", f"{n} boxes", t,
                             seed002.find("raytrace_time", "stb", n, size)))
            if n != 8 and base is not None and t:
                rows.append(_row(f"raytrace {size}² speed-up from 8 boxes", f"{n} boxes", base / t,
                                 seed002.find("raytrace_speedup_from_8", "stb", n, size), unit="1"))
        ref = times("raytrace", size, "reference", None)
        if ref is not None:
            rows.append(_row(f"raytrace {size}² time", "reference: 8 blade ranks", ref,
                             seed002.find("raytrace_time", "xeon-blade", 8, size)))
    for size in sorted({str(s) for s in frame[frame["workload"] == "msa"]["size"]}):
        seed_set, scale = _seed_set(size)
        if seed_set is None:
            continue
        low, high = (min(counts), max(counts)) if counts else (None, None)
        t_low, t_high = times("msa", size, label, low), times("msa", size, label, high)
        note = f"as {size}: the seed's {seed_set} / {scale:g}"
        rows.append(_row(f"msa {size} time", f"{low} boxes", t_low,
                         seed002.find("msa_time", "stb", low, seed_set), scale, note=note))
        rows.append(_row(f"msa {size} time", f"{high} boxes", t_high,
                         seed002.find("msa_time", "stb", high, seed_set), scale, note=note))
        s8, s128 = seed002.find("msa_time", "stb", 8, seed_set), seed002.find("msa_time", "stb", 128, seed_set)
        if t_low and t_high and s8 and s128 and (low, high) == (8, 128):
            rows.append(_row(f"msa {size} speed-up 8 -> 128 boxes", "8 -> 128 boxes", t_low / t_high,
                             seed002.SeedValue("msa_speedup", "stb", 128, seed_set, None, s8.value / s128.value,
                                               None, "1", s8.source, ""), unit="1"))
    return rows


def _seed_set(scaled: str) -> tuple[str | None, float]:
    """The Table I set a scaled set stands for, and the factor its work was divided by."""
    match = re.fullmatch(r"S(\d+)-L(\d+)", scaled)
    if not match:
        return None, 1.0
    k = presets.SEED002_MSA_SCALE
    name = f"S{int(match[1]) * k}-L{int(match[2]) * k}"
    return (name, float(k ** 4)) if seed002.find("msa_time", "stb", 8, name) else (None, 1.0)


def _imb_rows(run: Run, label: str) -> list[dict[str, Any]]:
    frame = run.read("results")
    if frame.empty:
        return []
    rows: list[dict[str, Any]] = []

    def point(test: str, config: str, nodes: int | None = None) -> pd.DataFrame:
        at = frame[(frame["test"] == test) & (frame["config"] == config)]
        return at if nodes is None else at[at["nodes"].astype(int) == nodes]

    def over_sizes(at: pd.DataFrame, field: str) -> tuple[float | None, str]:
        sizes = [s for s in SEED002_SIZES if s in set(at["size_B"].astype(int))]
        if not sizes:
            return None, ""
        value = statistics.mean(float(at[at["size_B"].astype(int) == s][field].iloc[0]) for s in sizes)
        return value, ("" if len(sizes) == len(SEED002_SIZES) else f"shoal: mean of {len(sizes)} of the 6 sizes")

    counts = sorted({int(n) for n in frame[frame["config"] == label]["nodes"]})
    pp = point("imb.PingPong", label, counts[0] if counts else None)
    for config, machine, at in ((f"{counts[0] if counts else '?'} boxes (2 ranks)", "stb", pp),
                                ("reference: 2 blade ranks", "xeon-blade", point("imb.PingPong", "reference"))):
        t, note = over_sizes(at, "time_median_s")
        if t is not None:
            rows.append(_row("PingPong time, mean of the sizes", config, t,
                             seed002.find("pingpong_time_mean_sizes", machine, 2), note=note))
            bw, _ = over_sizes(at, "bandwidth_median_Bps")
            rows.append(_row("PingPong bandwidth, mean of the sizes", config, bw,
                             seed002.find("pingpong_bandwidth_mean_sizes", machine, 2), unit="B/s", note=note))
    for n in counts:
        t, note = over_sizes(point("imb.Bcast", label, n), "time_median_s")
        if t is not None:
            rows.append(_row("Bcast time, mean of the sizes", f"{n} boxes", t,
                             seed002.find("bcast_time_mean_sizes", "stb", n), note=note))
    bcast = point("imb.Bcast", label)
    for size in (64, 262144):
        at = bcast[bcast["size_B"].astype(int) == size]
        if not at.empty:
            note = f"shoal: mean over {len(at)} node counts ({', '.join(str(int(n)) for n in at['nodes'])})"
            rows.append(_row(f"Bcast {size} B time, mean of the node counts", "boxes",
                             statistics.mean(at["time_median_s"].astype(float)),
                             seed002.find("bcast_time_mean_nodes", "stb", None, "", size), note=note))
    return rows


def seed_rows(run: Run) -> list[dict[str, Any]] | None:
    """Shoal's numbers beside the seed's, for a study of preset seed002 or seed000 (else None)."""
    request = saved_request(run.manifest)
    if request is None or request.preset not in ("seed002", "seed000"):
        return None
    label = run.manifest.get("cluster_label") or ""
    if request.preset == "seed000":
        from shoal.study import seed000

        return seed000.rows(run, label)
    return _work_rows(run, request, label) + _imb_rows(run, label)


def not_run_rows(run: Run) -> list[dict[str, Any]]:
    """Benchmark points the study planned not to run, with why."""
    frame = run.read("skipped")
    if frame.empty:
        return []
    frame = frame[frame["reason"].astype(str).str.startswith("not run")]
    return [{"test": r["test"], "size_B": int(r["size_B"]), "nodes": int(r["nodes"]), "reason": r["reason"]}
            for _, r in frame.iterrows()]
