"""Spot a slow device in a mixed cluster from the collectives' per-rank times.

For every collective point measured on two or more nodes, each node's share
of the time inside the collective is computed
(shoal.cluster.matrix.collective_share) from its ranks' own mean times
(``rank_mean_s``) and the host each rank ran on (the manifest's job facts).
On identical devices every node holds an equal share and which node holds
the largest changes from point to point; a node whose share is
consistently off shows where a mixed cluster is uneven. In a loop of
collectives a slow device can hold either the smallest share (the others
wait inside the call for it) or the largest (its own stalls are inside the
call), so the table is descriptive; the pair matrix (``shoal cluster
matrix``) names slow links and devices.
"""

from __future__ import annotations

import json
from typing import Any

from shoal.bench.sweep import job_key
from shoal.cluster.matrix import collective_share
from shoal.runs.store import Run

POINT_TO_POINT = {"mpbench.bandwidth", "mpbench.latency", "mpbench.roundtrip", "mpbench.bibw",
                  "imb.PingPong", "imb.Sendrecv", "imb.Exchange"}
COLUMNS = ["config", "nodes", "ranks", "node", "points", "largest_share_in", "mean_share",
           "share_vs_equal", "mean_time_s"]


def analyse(run: Run) -> list[dict[str, Any]]:
    """One row per (configuration, node): how often the others waited for it, and how long."""
    jobs = run.manifest.get("jobs", {})
    totals: dict[tuple[str, int, int, str], dict[str, float]] = {}
    for row in run.rows("results"):
        if row["test"] in POINT_TO_POINT or int(row["nodes"]) < 2:
            continue
        hosts = (jobs.get(job_key(row["config"], int(row["nodes"]), int(row["ranks"]))) or {}).get("hosts")
        times = json.loads(row["rank_mean_s"] or "[]")
        if not hosts or len(hosts) != len(times) or len(set(hosts)) < 2:
            continue
        shares = collective_share(times, hosts)
        largest = max(shares, key=lambda node: shares[node]["share"])
        for node, share in shares.items():
            key = (row["config"], int(row["nodes"]), int(row["ranks"]), node)
            acc = totals.setdefault(key, {"points": 0, "largest": 0, "share": 0.0, "time": 0.0})
            acc["points"] += 1
            acc["largest"] += node == largest
            acc["share"] += share["share"]
            acc["time"] += share["mean_s"]
    return [{"config": c, "nodes": n, "ranks": r, "node": node, "points": int(a["points"]),
             "largest_share_in": int(a["largest"]), "mean_share": a["share"] / a["points"],
             "share_vs_equal": n * a["share"] / a["points"], "mean_time_s": a["time"] / a["points"]}
            for (c, n, r, node), a in sorted(totals.items())]


def write(run: Run) -> list[dict[str, Any]]:
    """(Re)write heterogeneity.csv from all results so far: it is derived, not appended."""
    rows = analyse(run)
    run.rewrite("heterogeneity", rows, columns=COLUMNS)
    return rows
