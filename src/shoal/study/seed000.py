"""Shoal's numbers beside seed 000's readings of its six-board cluster (§5.5-5.6), for a study of
preset ``seed000``.

The thesis reads its figures in words a user can check; each becomes rows of the same quantity
measured here, the thesis's number (where it gives one) and their ratio:

- "only up to 85 % of the performance" of the NUC "for some tests" (§5.6): the highest
  performance of the cluster at its most boards over the reference's, over tests and sizes;
- "at 218MB the performance became unstable, with similar performance from four, five and six
  platforms" (Figs. 5.27-5.28, bandwidth and bidirectional bandwidth): MPBench's sizes stop at
  32 MiB, so "218MB" is read as 2^18 B (256 KiB, a superscript lost: "27MB" beside it is 2^7 B);
  shoal gives the spread of the bandwidth over 4-6 boards and the widest 95 % interval there;
- cluster power "starting from one MinnowBoard MAX platform with 5 watts until six ... up to
  30 watts" (Fig. 5.32): the mean power over the tests at one and at six boards;
- "with three or four platforms the cluster ... present a higher power efficiency than the
  desktop system" (Figs. 5.35-5.36, all to all and bidirectional bandwidth): perf/W over the
  reference's at 3 and 4 boards, the best size;
- Table 5.6: one board's average and MAX watts under each test beside the study's one-board
  points (two ranks on its two cores), modelled from the profile's idle and busy watts.
"""

from __future__ import annotations

import statistics
from typing import Any

import pandas as pd

from shoal.runs.store import Run

REFERENCE = "reference"
# The thesis's "218MB" and "27MB", read as 2^18 and 2^7 bytes (see the module docstring).
UNSTABLE_B = 2 ** 18
SOURCE_85 = "seed 000 §5.6: 'only up to 85% of the performance for some tests'"
SOURCE_POWER = "seed 000 §5.6, Fig. 5.32: 'from one MinnowBoard MAX platform with 5 watts until six ... up to 30 watts'"
SOURCE_UNSTABLE = ("seed 000 §5.5.1, Figs. 5.27-5.28: 'At 218MB the performance became unstable, with similar "
                   "performance from four, five and six platforms' (218MB read as 2^18 B)")
SOURCE_PPW = "seed 000 §5.6, Figs. 5.35-5.36: 'with three or four platforms ... a higher power efficiency than the desktop system'"


def _row(quantity: str, config: str, shoal: float | None, seed: float | None, unit: str, source: str,
         seed_high: float | None = None) -> dict[str, Any]:
    middle = (seed + seed_high) / 2 if seed is not None and seed_high is not None else seed
    ratio = shoal / middle if shoal is not None and middle else None
    return {"quantity": quantity, "configuration": config, "shoal": shoal, "seed": seed,
            "seed_high": seed_high, "ratio": ratio, "unit": unit, "source": source}


def _points(frame: pd.DataFrame, config: str, test: str | None = None, nodes: int | None = None) -> pd.DataFrame:
    at = frame[frame["config"] == config]
    if test is not None:
        at = at[at["test"] == test]
    if nodes is not None:
        at = at[at["nodes"].astype(int) == nodes]
    return at


def _speed_over_reference(frame: pd.DataFrame, label: str, nodes: int) -> tuple[float, str] | None:
    """The cluster's highest performance over the reference's (same test and size: the ratio of
    their times), at ``nodes`` boards, over the tests the thesis plots in bytes per second
    (Figs. 5.24-5.29; latency and round trip are times)."""
    best: tuple[float, str] | None = None
    points = _points(frame, label, nodes=nodes)
    for _, row in points[points["metric"] == "bandwidth"].iterrows():
        ref = _points(frame, REFERENCE, row["test"])
        ref = ref[ref["size_B"].astype(int) == int(row["size_B"])]
        if ref.empty or not float(row["time_median_s"]) > 0:
            continue
        ratio = float(ref["time_median_s"].iloc[0]) / float(row["time_median_s"])
        if best is None or ratio > best[0]:
            best = (ratio, f"{row['test']} at {int(row['size_B'])} B")
    return best


def _ppw_over_reference(frame: pd.DataFrame, label: str, test: str, nodes: int) -> tuple[float, int] | None:
    """perf/W at ``nodes`` boards over the reference's (the ratio of their energies per call),
    at the size where it is highest."""
    best = None
    for _, row in _points(frame, label, test, nodes).iterrows():
        ref = _points(frame, REFERENCE, test)
        ref = ref[ref["size_B"].astype(int) == int(row["size_B"])]
        if ref.empty or pd.isna(row.get("power_mean_W")) or pd.isna(ref["power_mean_W"].iloc[0]):
            continue
        mine = float(row["time_median_s"]) * float(row["power_mean_W"])
        theirs = float(ref["time_median_s"].iloc[0]) * float(ref["power_mean_W"].iloc[0])
        if mine > 0 and (best is None or theirs / mine > best[0]):
            best = (theirs / mine, int(row["size_B"]))
    return best


def rows(run: Run, label: str) -> list[dict[str, Any]]:
    from shoal import profiles

    frame = run.read("results")
    if frame.empty:
        return []
    out: list[dict[str, Any]] = []
    counts = sorted({int(n) for n in _points(frame, label)["nodes"]})
    most = counts[-1] if counts else None
    if most is not None:
        speed = _speed_over_reference(frame, label, most)
        if speed is not None:
            out.append(_row("highest performance over the NUC's", f"{most} boards, {speed[1]}", speed[0],
                            0.85, "1", SOURCE_85))
    powered = "power_mean_W" in frame and not frame["power_mean_W"].isna().all()
    # A configuration's power holds the switch's; the thesis's meter read the boards alone.
    board = profiles.builtin("minnowboard")
    switch = profiles.switch_of(profiles.load_links()[board.link])
    switch_W = switch.idle_W if switch is not None else 0.0
    alone = f"boards alone (the switch's {switch_W:g} W taken off)"
    for n, seed_W in ((1, 5.0), (6, 30.0)):
        at = _points(frame, label, nodes=n)
        if powered and not at.empty:
            out.append(_row(f"cluster power, mean over the tests' points, {alone}", f"{n} board(s)",
                            float(at["power_mean_W"].mean()) - switch_W, seed_W, "W", SOURCE_POWER))
    for test in ("mpbench.bandwidth", "mpbench.bibw"):
        bandwidths, widths = [], []
        for n in (4, 5, 6):
            at = _points(frame, label, test, n)
            at = at[at["size_B"].astype(int) == UNSTABLE_B]
            if not at.empty:
                bandwidths.append(float(at["bandwidth_median_Bps"].iloc[0]))
                median = float(at["time_median_s"].iloc[0])
                if int(at["reps"].iloc[0]) >= 3:  # fewer repetitions give no interval
                    widths.append((float(at["time_ci_high_s"].iloc[0]) - float(at["time_ci_low_s"].iloc[0])) / median)
        if len(bandwidths) >= 2:
            out.append(_row(f"{test} at 2^18 B: highest over lowest bandwidth, 4-6 boards", "4-6 boards",
                            max(bandwidths) / min(bandwidths), None, "1", SOURCE_UNSTABLE))
        if widths:
            out.append(_row(f"{test} at 2^18 B: widest 95 % interval of the time over its median",
                            "4-6 boards", max(widths), None, "1", SOURCE_UNSTABLE))
    if powered:
        for test in ("mpbench.alltoall", "mpbench.bibw"):
            for n in (3, 4):
                ppw = _ppw_over_reference(frame, label, test, n)
                if ppw is not None:
                    out.append(_row(f"{test} perf/W over the NUC's, best size", f"{n} boards, {ppw[1]} B",
                                    ppw[0], 1.0, "1", SOURCE_PPW + " (above: more than 1)"))
    per_test = board.per_test
    for test in sorted(per_test.average_W if per_test else []):
        at = _points(frame, label, f"mpbench.{test}", 1)
        if not powered or at.empty:
            continue
        watts = at["power_mean_W"].astype(float) - switch_W
        out.append(_row(f"one board under {test}: average W, the switch's taken off", "1 board (2 ranks)",
                        statistics.mean(watts), per_test.average_W[test], "W", f"{per_test.source}, average"))
        out.append(_row(f"one board under {test}: highest point's W, the switch's taken off", "1 board (2 ranks)",
                        max(watts), per_test.max_W[test], "W", f"{per_test.source}, MAX"))
    return out
