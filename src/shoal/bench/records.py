"""Turn the native program's point records into rows of the results tables.

``results.csv`` holds one row per measured point; ``samples.csv`` one row per
repetition (time per operation, seconds). Columns are documented in
docs/runs.md; every unit is SI (s, B, B/s, Hz, W, J).
"""

from __future__ import annotations

import json
import math
from typing import Any

from shoal.bench.stats import summarize
from shoal.execute.session import DeviceClock
from shoal.power import efficiency

RESULT_COLUMNS = [
    "point_id", "config", "nodes", "ranks", "suite", "test", "size_B", "metric",
    "bytes_per_op_B", "inner", "ops_per_rep", "reps", "converged", "stop", "ci_rel",
    "time_median_s", "time_mean_s", "time_min_s", "time_max_s", "time_p90_s",
    "time_ci_low_s", "time_ci_high_s",
    "bandwidth_median_Bps", "rate_median_Hz",
    "check", "check_errors", "t_start_mono_s", "t_end_mono_s", "wait_mode",
    "rank_mean_s",
    # Power columns stay empty when power is not measured.
    "power_source", "power_kind", "power_mean_W", "energy_J", "idle_power_W",
    "energy_net_J", "energy_partial", "energy_per_op_J", "energy_per_B_J",
    "bandwidth_per_W", "rate_per_W",
    # Emulated clusters: the time dilation the point ran at (its times are already divided by it).
    "dilation",
    # Emulated clusters: "ok", or "short" when a device got less CPU than its budget during the
    # point (why in the note); the devices' throttled time, throttled and elapsed quota periods,
    # and the largest share of its budget a device core was short of while it wanted to run.
    "host_slack", "host_slack_note", "cpu_throttled_s", "cpu_throttled_periods", "cpu_periods",
    "cpu_shortfall",
    # Emulated devices with a background (--background): "ok", or "short" when the ranks on a
    # core it shares got less of the budget than they wanted (which devices in the note); the
    # largest share of a core's budget a background took during the point.
    "background_slack", "background_note", "background_cpu_share",
]
SAMPLE_COLUMNS = ["point_id", "rep", "time_s"]
FAILURE_COLUMNS = ["point_id", "config", "nodes", "ranks", "test", "size_B", "reason", "detail"]


def point_id(config: str, nodes: int, ranks: int, test: str, size_B: int) -> str:
    return f"{config}/{nodes}/{ranks}/{test}/{size_B}"


# A point record's times, turned into device time by the session's clock (DeviceClock.record).
TIME_KEYS = ("samples_s", "rank_mean_s")


def result_row(record: dict[str, Any], config: str, nodes: int, wait_mode: str = "",
               dilation: float = 1.0) -> dict[str, Any]:
    """One results row from a ``point`` record; statistics recomputed from raw samples."""
    samples = record["samples_s"]
    stats = summarize(samples)
    bytes_per_op = record.get("bytes_per_op") or 0
    median = stats.median
    pid = point_id(config, nodes, record["ranks"], record["test"], record["size_B"])
    return {
        "point_id": pid,
        "config": config,
        "nodes": nodes,
        "ranks": record["ranks"],
        "suite": record["test"].split(".", 1)[0],
        "test": record["test"],
        "size_B": record["size_B"],
        "metric": record.get("metric", ""),
        "bytes_per_op_B": bytes_per_op,
        "inner": record.get("inner", ""),
        # Operations timed per repetition: inner, or 2 x inner for a ping-pong's half round trips.
        "ops_per_rep": record.get("ops_per_rep") or record.get("inner", 1),
        "reps": stats.n,
        "converged": bool(record.get("converged")),
        "stop": record.get("stop", ""),
        "ci_rel": stats.ci_halfwidth_rel if math.isfinite(stats.ci_halfwidth_rel) else "",
        "time_median_s": median,
        "time_mean_s": stats.mean,
        "time_min_s": stats.min,
        "time_max_s": stats.max,
        "time_p90_s": stats.p90,
        "time_ci_low_s": stats.ci_low,
        "time_ci_high_s": stats.ci_high,
        "bandwidth_median_Bps": bytes_per_op / median if median > 0 and bytes_per_op else "",
        "rate_median_Hz": 1.0 / median if median > 0 else "",
        "check": record.get("check", "off"),
        "check_errors": record.get("check_errors", 0),
        "t_start_mono_s": record.get("t_start_mono_s", ""),
        "t_end_mono_s": record.get("t_end_mono_s", ""),
        "wait_mode": wait_mode,
        "rank_mean_s": json.dumps(record.get("rank_mean_s") or []),
        "dilation": dilation,
    }


def sample_rows(pid: str, samples: list[float]) -> list[dict[str, Any]]:
    return [{"point_id": pid, "rep": i, "time_s": t} for i, t in enumerate(samples)]


def add_power(row: dict[str, Any], energy: dict[str, Any], duration_s: float) -> tuple[float, float]:
    """The power columns every measuring table shares (source, kind, mean power,
    energy, gaps, idle baseline and energy above it); returns (energy_J, power_W)."""
    energy_J = float(energy["energy_J"])
    power_W = float(energy["mean_power_W"])
    row["power_source"] = energy.get("source", "")
    row["power_kind"] = energy.get("kind", "")
    row["power_mean_W"] = power_W
    row["energy_J"] = energy_J
    row["energy_partial"] = bool(energy.get("partial", False))
    idle = energy.get("idle_power_W")
    if idle not in (None, ""):
        row["idle_power_W"] = float(idle)
        row["energy_net_J"] = max(0.0, efficiency.above_idle(energy_J, float(idle), duration_s))
    return energy_J, power_W


def add_energy(row: dict[str, Any], energy: dict[str, Any] | None, clock: DeviceClock = DeviceClock()) -> None:
    """Fill the power columns of a row from one energy measurement of its point.

    ``energy`` has energy_J, mean_power_W, source, kind, partial and
    optionally idle_power_W (the baseline measured before the run).
    Performance per watt uses the mean power over the point; with an idle
    baseline, energy_net_J is the energy above idle.
    """
    if not energy:
        return
    duration = clock.seconds(float(row["t_end_mono_s"]) - float(row["t_start_mono_s"]))
    energy = {**energy, "energy_J": clock.energy(float(energy["energy_J"]))}
    ops = float(row["reps"]) * float(row["ops_per_rep"] or 1)
    energy_J, power_W = add_power(row, energy, duration)
    if ops > 0:
        row["energy_per_op_J"] = efficiency.energy_per_op(energy_J, ops)
        if row["bytes_per_op_B"]:
            row["energy_per_B_J"] = efficiency.energy_per_byte(energy_J, ops * float(row["bytes_per_op_B"]))
    if power_W > 0:
        # Per watt of the point's mean power: (B/s)/W and (1/s)/W.
        if row["bandwidth_median_Bps"] != "":
            row["bandwidth_per_W"] = float(row["bandwidth_median_Bps"]) / power_W
        row["rate_per_W"] = float(row["rate_median_Hz"]) / power_W
