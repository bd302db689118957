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
from shoal.study import blades, presets, seed002, workloads
from shoal.study.request import StudyRequest, saved_request
from shoal.study.run import REFERENCE

SEED002_SIZES = tuple(grammar.sizes(presets.SEED002_SIZES))
# The box counts the seed's means over node counts run over (§V, Fig. 7), which the full preset runs.
SEED002_BOXES = tuple(int(n) for n in presets.PRESETS["seed002"]["nodes"].split(","))


def _row(quantity: str, config: str, shoal: float | None, seed: seed002.SeedValue | None,
         scale: float = 1.0, unit: str = "s", note: str = "", like: bool = True) -> dict[str, Any]:
    """One row; ``like`` False: shoal's number averages over other sizes or node counts than
    the seed's, so the two stand side by side with no ratio (``note`` says over what)."""
    value = seed.value / scale if seed else None
    high = seed.value_high / scale if seed and seed.value_high else None
    ratio = shoal / ((value + high) / 2 if high else value) if shoal is not None and value and like else None
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
        rows += _blade_raytrace(frame, size) + _two_blades(frame, "raytrace", size, label, f"raytrace {size}²")
    for size in sorted({str(s) for s in frame[frame["workload"] == "msa"]["size"]}):
        seed_set, scale = _seed_set(size)
        if seed_set is None:
            continue
        low, high = (min(counts), max(counts)) if counts else (None, None)
        t_low, t_high = times("msa", size, label, low), times("msa", size, label, high)
        note = f"as {size}: the seed's {seed_set} / {scale:g}"
        for n, t in dict.fromkeys(((low, t_low), (high, t_high))):  # one row where one count ran
            rows.append(_row(f"msa {size} time", f"{n} boxes", t, seed002.find("msa_time", "stb", n, seed_set),
                             scale, note=note))
        s8, s128 = seed002.find("msa_time", "stb", 8, seed_set), seed002.find("msa_time", "stb", 128, seed_set)
        boxes = t_low / t_high if t_low and t_high and (low, high) == (8, 128) else None
        if boxes is not None and s8 and s128:
            rows.append(_row(f"msa {size} speed-up 8 -> 128 boxes", "8 -> 128 boxes", boxes,
                             seed002.SeedValue("msa_speedup", "stb", 128, seed_set, None, s8.value / s128.value,
                                               None, "1", s8.source, ""), unit="1"))
        rows += _blade_msa(frame, size, seed_set, scale, boxes) + _two_blades(frame, "msa", size, label, f"msa {size}")
    return rows


def _blade_points(frame: pd.DataFrame, workload: str, size: str) -> dict[int, tuple[str, float, int]]:
    """Ranks -> (where they ran, median time, blades) of a workload on the reference's blades
    (``reference`` and ``blades``, shoal.study.blades), counted repetitions only."""
    at = frame[(frame["workload"] == workload) & (frame["size"].astype(str) == size)
               & frame["config"].isin([REFERENCE, blades.BLADES])]
    out = {}
    for ranks, group in at.groupby(at["ranks"].astype(int)):
        n = int(group["nodes"].iloc[0])
        out[int(ranks)] = (f"blades: {ranks} rank{'s' if ranks > 1 else ''} on {n} blade{'s' if n > 1 else ''}",
                           float(group["time_s"].astype(float).median()), n)
    return out


def _two_blades(frame: pd.DataFrame, workload: str, size: str, label: str, name: str) -> list[dict[str, Any]]:
    """Seed 002's claim that 128 boxes beat two blades (§V, Table I's note), measured: two blades'
    time with a rank on each core over 128 boxes' (above 1: the boxes are faster)."""
    two = [t for r, (_, t, n) in _blade_points(frame, workload, size).items() if n == 2 and r == 16]
    boxes = frame[(frame["workload"] == workload) & (frame["size"].astype(str) == size)
                  & (frame["config"] == label) & (frame["nodes"].astype(int) == 128)]
    if not two or boxes.empty:
        return []
    return [_row(f"{name} time, 2 blades over 128 boxes", "2 blades (16 ranks) / 128 boxes",
                 two[0] / float(boxes["time_s"].astype(float).median()), None, unit="1",
                 note="seed 002 §V, Table I's note: 128 boxes beat two blades (above 1 here: the boxes are faster)")]


def _blade_raytrace(frame: pd.DataFrame, size: str) -> list[dict[str, Any]]:
    """Fig. 8(b): the blades' times at 8 and 64 ranks and the speed-up between them."""
    points = _blade_points(frame, "raytrace", size)
    rows = [_row(f"raytrace {size}² time", where, t, seed002.find("raytrace_time", "xeon-blade", r, size))
            for r, (where, t, _) in sorted(points.items())]
    s8, s64 = seed002.find("raytrace_time", "xeon-blade", 8, size), seed002.find("raytrace_time", "xeon-blade", 64, size)
    if 8 in points and 64 in points and s8 and s64:
        rows.append(_row(f"raytrace {size}² speed-up 8 -> 64 blade ranks", "blades: 8 -> 64 ranks",
                         points[8][1] / points[64][1], _ratio_of(s8, s64, "raytrace_speedup"), unit="1"))
    return rows


def _blade_msa(frame: pd.DataFrame, size: str, seed_set: str, scale: float,
               boxes: float | None) -> list[dict[str, Any]]:
    """Table I's blade columns (1 and 64 processors), the speed-up between them, and the boxes'
    8 -> 128 speed-up over it: the seed's boxes are ahead (above 1) on S500-L200 and S1500-L100."""
    points = _blade_points(frame, "msa", size)
    note = f"as {size}: the seed's {seed_set} / {scale:g}"
    rows = [_row(f"msa {size} time", where, t, seed002.find("msa_time", "xeon-blade", r, seed_set),
                 scale, note=note) for r, (where, t, _) in sorted(points.items())]
    s1, s64 = seed002.find("msa_time", "xeon-blade", 1, seed_set), seed002.find("msa_time", "xeon-blade", 64, seed_set)
    if 1 in points and 64 in points and s1 and s64:
        speedup = points[1][1] / points[64][1]
        rows.append(_row(f"msa {size} speed-up 1 -> 64 blade processors", "blades: 1 -> 64 ranks", speedup,
                         _ratio_of(s1, s64, "msa_speedup"), unit="1"))
        b8, b128 = seed002.find("msa_time", "stb", 8, seed_set), seed002.find("msa_time", "stb", 128, seed_set)
        if boxes is not None and b8 and b128:
            seed = (b8.value / b128.value) / (s1.value / s64.value)
            rows.append(_row(f"msa {size} boxes' speed-up over the blades'", "8 -> 128 boxes / 1 -> 64 ranks",
                             boxes / speedup, seed002.SeedValue("msa_speedup_boxes_over_blades", "stb", None,
                                                                seed_set, None, seed, None, "1", b8.source, ""),
                             unit="1", note=("boxes ahead" if boxes > speedup else "blades ahead")
                             + (", as in the seed" if (boxes > speedup) == (seed > 1) else ", unlike the seed")))
    return rows


def _ratio_of(a: seed002.SeedValue, b: seed002.SeedValue, quantity: str) -> seed002.SeedValue:
    """The seed's speed-up from two of its printed times."""
    return seed002.SeedValue(quantity, a.machine, b.nodes, a.item, None, a.value / b.value, None, "1", a.source,
                             f"{a.value:g} / {b.value:g}")


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

    def over_sizes(at: pd.DataFrame, field: str) -> tuple[float | None, str, bool]:
        """The mean over the seed's sizes that ran, a note when not all six did, and whether
        it is the seed's quantity (the seed prints only its mean over all six)."""
        sizes = [s for s in SEED002_SIZES if s in set(at["size_B"].astype(int))]
        if not sizes:
            return None, "", False
        value = statistics.mean(float(at[at["size_B"].astype(int) == s][field].iloc[0]) for s in sizes)
        if len(sizes) == len(SEED002_SIZES):
            return value, "", True
        return value, (f"shoal: mean of {len(sizes)} of the 6 sizes ({', '.join(f'{s} B' for s in sizes)}), "
                       "the seed's of all six: no ratio"), False

    counts = sorted({int(n) for n in frame[frame["config"] == label]["nodes"]})
    pp = point("imb.PingPong", label, counts[0] if counts else None)
    for config, machine, at in ((f"{counts[0] if counts else '?'} boxes (2 ranks)", "stb", pp),
                                ("reference: 2 blade ranks", "xeon-blade", point("imb.PingPong", "reference"))):
        t, note, like = over_sizes(at, "time_median_s")
        if t is not None:
            rows.append(_row("PingPong time, mean of the sizes", config, t,
                             seed002.find("pingpong_time_mean_sizes", machine, 2), note=note, like=like))
            bw, _, _ = over_sizes(at, "bandwidth_median_Bps")
            rows.append(_row("PingPong bandwidth, mean of the sizes", config, bw,
                             seed002.find("pingpong_bandwidth_mean_sizes", machine, 2), unit="B/s", note=note,
                             like=like))
    for n in counts:
        t, note, like = over_sizes(point("imb.Bcast", label, n), "time_median_s")
        if t is not None:
            rows.append(_row("Bcast time, mean of the sizes", f"{n} boxes", t,
                             seed002.find("bcast_time_mean_sizes", "stb", n), note=note, like=like))
    bcast = point("imb.Bcast", label)
    for size in (64, 262144):
        at = bcast[bcast["size_B"].astype(int) == size]
        if not at.empty:
            ran = sorted(int(n) for n in at["nodes"])
            like = ran == list(SEED002_BOXES)
            note = (f"shoal: mean over {len(ran)} node counts ({', '.join(map(str, ran))})"
                    + ("" if like else f", the seed's over {', '.join(map(str, SEED002_BOXES))}: no ratio"))
            rows.append(_row(f"Bcast {size} B time, mean of the node counts", "boxes",
                             statistics.mean(at["time_median_s"].astype(float)),
                             seed002.find("bcast_time_mean_nodes", "stb", None, "", size), note=note, like=like))
    return rows + _blade_bcast(point("imb.Bcast", blades.BLADES), over_sizes)


def _blade_bcast(frame: pd.DataFrame, over_sizes: Any) -> list[dict[str, Any]]:
    """The blades' Bcast over 8..64 ranks (shoal.study.blades): the seed's is flat with N,
    averaging 3.7 ms over its sizes and rank counts, 0.07 ms at 64 B and 10 ms at 256 KB."""
    if frame.empty:
        return []
    ranks = sorted({int(r) for r in frame["ranks"]})
    every = ranks == [8, 16, 32, 64]
    rows, means = [], {}
    for r in ranks:
        at = frame[frame["ranks"].astype(int) == r]
        t, note, like = over_sizes(at, "time_median_s")
        if t is not None:
            means[r] = t
            rows.append(_row("Bcast time, mean of the sizes", f"blades: {r} ranks on {int(at['nodes'].iloc[0])} "
                             "blades", t, None, note=note or "the seed prints no time at one rank count"))
    sized = [over_sizes(frame[frame["ranks"].astype(int) == r], "time_median_s")[2] for r in means]
    if means:
        note = f"shoal: mean over {', '.join(map(str, means))} ranks" + (
            "" if every and all(sized) else ", the seed's over the six sizes at 8..64 ranks: no ratio")
        rows.append(_row("Bcast time, mean of the sizes and rank counts", "blades",
                         statistics.mean(means.values()), seed002.find("bcast_time_mean_sizes", "xeon-blade"),
                         note=note, like=every and all(sized)))
    if len(means) > 1:
        low, high = min(means), max(means)
        rows.append(_row(f"Bcast time, mean of the sizes, {high} over {low} ranks", "blades",
                         means[high] / means[low], None, unit="1",
                         note="the seed: flat with N (§V), 1 within its reading"))
    for size in (64, 262144):
        at = frame[frame["size_B"].astype(int) == size]
        if not at.empty:
            ran = sorted(int(r) for r in at["ranks"])
            like = ran == [8, 16, 32, 64]
            note = (f"shoal: mean over {', '.join(map(str, ran))} ranks"
                    + ("" if like else ", the seed's over 8..64 ranks: no ratio"))
            rows.append(_row(f"Bcast {size} B time, mean of the node counts", "blades",
                             statistics.mean(at["time_median_s"].astype(float)),
                             seed002.find("bcast_time_mean_nodes", "xeon-blade", None, "", size), note=note,
                             like=like))
    return rows


def seed_rows(run: Run) -> list[dict[str, Any]] | None:
    """Shoal's numbers beside the seed's, for a study of preset seed002 or seed000 (else None)."""
    request = saved_request(run.manifest)
    if request is None or request.preset not in ("seed002", "seed000"):
        return None
    label = run.manifest.get("cluster_label") or ""
    if request.preset == "seed000":
        from shoal.study import seed000

        rows = seed000.rows(run, label)
    else:
        rows = _work_rows(run, request, label) + _imb_rows(run, label)
    layouts = request.layouts(label, REFERENCE)
    for row in rows:  # the layout shoal's number was measured under
        row["launch"] = layouts.get(REFERENCE if row["configuration"].startswith("reference") else label)
    return rows


def not_run_rows(run: Run) -> list[dict[str, Any]]:
    """Benchmark points the study planned not to run, with why."""
    frame = run.read("skipped")
    if frame.empty:
        return []
    frame = frame[frame["reason"].astype(str).str.startswith("not run")]
    return [{"test": r["test"], "size_B": int(r["size_B"]), "nodes": int(r["nodes"]), "reason": r["reason"]}
            for _, r in frame.iterrows()]
