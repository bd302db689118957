"""Rows of a workload run's tables (docs/runs.md, "shoal work").

``results.csv`` holds one row per repetition of a workload at one rank
count; every unit is SI (s, J, W, B). Phase times: ``compute_s`` and
``comm_s`` are the largest over the ranks (the ones the run waited for),
``*_mean_s`` the mean; ``serial_s`` is rank 0's part that no other rank
shares (making frames, the guide tree, assembling the image).
"""

from __future__ import annotations

import json
from typing import Any

from shoal.bench.records import add_power
from shoal.execute.session import DeviceClock
from shoal.power import efficiency

RESULT_COLUMNS = [
    "point_id", "config", "nodes", "ranks", "workload", "size", "rep",
    "time_s", "compute_s", "comm_s", "serial_s", "compute_mean_s", "comm_mean_s",
    "work", "unit", "throughput_per_s", "data_B", "check", "check_detail", "digest",
    "t_start_mono_s", "t_end_mono_s", "wait_mode", "cpu_s", "rank_compute_s", "rank_comm_s",
    "rank_cpu_s", "extra", "dilation",
    # Emulated clusters: did the devices get their CPU budgets during the run (cluster.slack).
    "host_slack", "host_slack_note", "cpu_throttled_s", "cpu_throttled_periods", "cpu_periods",
    "cpu_shortfall",
    # Devices with a background (--background): did its ranks get their share (cluster.slack).
    "background_slack", "background_note", "background_cpu_share",
    # Power columns stay empty when power is not measured.
    "power_source", "power_kind", "power_mean_W", "energy_J", "idle_power_W", "energy_net_J",
    "energy_partial", "energy_per_unit_J", "energy_per_B_J", "throughput_per_W", "shared_power_W",
]
# Bytes of input data per unit of work, for the workloads whose units are data (J/B for offloading).
_BYTES_PER_UNIT = ("bytes_per_image_B", "frame_B")
FAILURE_COLUMNS = ["point_id", "config", "nodes", "ranks", "workload", "size", "rep", "reason", "detail"]
# Who talked to whom in one launch (libshoalwait's counts, shoal.wait.traffic): the launch's
# placement and repetition, the workloads it ran, then one matrix cell per row.
TRAFFIC_COLUMNS = ["config", "nodes", "ranks", "rep", "workloads", "src", "dst", "kind", "bytes",
                   "messages"]


def point_id(config: str, nodes: int, ranks: int, workload: str, size: str, rep: int) -> str:
    return f"{config}/{nodes}/{ranks}/{workload}/{size}/{rep}"


# A result record's times and rates, turned into device time by the session's clock
# (DeviceClock.record); CPU seconds stay as the host counted them (the same work at any D).
TIME_KEYS = ("time_s", "serial_s", "rank_compute_s", "rank_comm_s")
RATE_KEYS = ("throughput_per_s",)


def result_row(record: dict[str, Any], config: str, nodes: int, rep: int,
               wait_mode: str = "", dilation: float = 1.0) -> dict[str, Any]:
    """One results row from the program's ``result`` record."""
    compute = [float(x) for x in record["rank_compute_s"]]
    extra = record.get("extra") or {}
    per_unit = next((float(extra[k]) for k in _BYTES_PER_UNIT if k in extra), None)
    comm = [float(x) for x in record["rank_comm_s"]]
    return {
        "point_id": point_id(config, nodes, record["ranks"], record["workload"], record["size"], rep),
        "config": config,
        "nodes": nodes,
        "ranks": record["ranks"],
        "workload": record["workload"],
        "size": record["size"],
        "rep": rep,
        "time_s": float(record["time_s"]),
        "compute_s": max(compute),
        "comm_s": max(comm),
        "serial_s": float(record["serial_s"]),
        "compute_mean_s": sum(compute) / len(compute),
        "comm_mean_s": sum(comm) / len(comm),
        "work": float(record["work"]),
        "unit": record["unit"],
        "throughput_per_s": float(record["throughput_per_s"]),
        "data_B": float(record["work"]) * per_unit if per_unit else "",
        "check": record["check"],
        "check_detail": record.get("check_detail", ""),
        "digest": record.get("digest", ""),
        "t_start_mono_s": float(record["t_start_mono_s"]),
        "t_end_mono_s": float(record["t_end_mono_s"]),
        "wait_mode": wait_mode,
        "rank_compute_s": json.dumps(compute),
        "rank_comm_s": json.dumps(comm),
        # Rank 0's CPU seconds over the run (absent under --check, whose reference it would count).
        "cpu_s": float(record["rank_cpu_s"][0]) if record.get("rank_cpu_s") else "",
        "rank_cpu_s": json.dumps(record.get("rank_cpu_s") or []),
        "extra": json.dumps(extra, sort_keys=True),
        # The time dilation the run was measured at (its times are already divided by it).
        "dilation": dilation,
    }


def add_energy(row: dict[str, Any], energy: dict[str, Any] | None,
               clock: DeviceClock = DeviceClock()) -> None:
    """Fill the power columns from one energy measurement over the run's timed part."""
    if not energy:
        return
    energy = {**energy, "energy_J": clock.energy(float(energy["energy_J"]))}
    energy_J, power_W = add_power(row, energy, row["time_s"])
    row["shared_power_W"] = float(energy.get("shared_power_W") or 0.0)
    if row["work"] > 0:
        row["energy_per_unit_J"] = efficiency.energy_per_op(energy_J, row["work"])
    if row["data_B"]:
        row["energy_per_B_J"] = efficiency.energy_per_byte(energy_J, row["data_B"])
    if power_W > 0:
        row["throughput_per_W"] = row["throughput_per_s"] / power_W
