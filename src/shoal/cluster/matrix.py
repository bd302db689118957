"""Heterogeneity view: all-pairs latency/bandwidth, and which node slows collectives."""

from __future__ import annotations

import json
from typing import Sequence

from shoal import proc
from shoal.errors import ShoalError
from shoal.mpi import build
from shoal.mpi.discover import MPIInstall


def measure(cluster, mpi: MPIInstall, lat_size_B: int = 8, bw_size_B: int = 1 << 20,
            bw_total_B: int = 8 << 20, lat_iters: int = 100, timeout_s: float = 600) -> list[dict]:
    """Run shoal-pairs with one rank per node; return one row per node pair."""
    exe = build.build("pairs", mpi)
    job = cluster.job(mpi, nodes=cluster.size, ranks_per_node=1,
                      argv=[str(exe), str(lat_size_B), str(bw_size_B), str(bw_total_B), str(lat_iters)])
    argv, env = job.command()
    try:
        done = proc.run(argv, env=job.popen_env(), show_env=env, timeout=timeout_s, leaves=job.leaves)
    except proc.CommandTimeout:
        raise ShoalError(f"the pair matrix did not finish within {timeout_s:.0f} s; "
                         "use a smaller --bytes or fewer nodes") from None
    if not done.ok:
        raise ShoalError(f"shoal-pairs failed with {mpi.name}: {done.tail(1) or 'no message'} "
                         "(rerun with --verbose)")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    nodes = cluster.node_names(cluster.size) or ["localhost"]
    for row in rows:
        row["node_a"], row["node_b"] = nodes[row["a"]], nodes[row["b"]]
        row["lat_size_B"], row["bw_size_B"] = lat_size_B, bw_size_B
    return rows


def as_tables(rows: list[dict]):
    """Two symmetric node x node tables (pandas): latency_s and bandwidth_Bps."""
    import pandas as pd

    nodes = sorted({r["node_a"] for r in rows} | {r["node_b"] for r in rows},
                   key=lambda n: min([r["a"] for r in rows if r["node_a"] == n]
                                     + [r["b"] for r in rows if r["node_b"] == n]))
    lat = pd.DataFrame(float("nan"), index=nodes, columns=nodes)
    bw = pd.DataFrame(float("nan"), index=nodes, columns=nodes)
    for r in rows:
        for x, y in ((r["node_a"], r["node_b"]), (r["node_b"], r["node_a"])):
            lat.loc[x, y] = r["latency_s"]
            bw.loc[x, y] = r["bandwidth_Bps"]
    return lat, bw


# A node stands out when its median to the others is this many times worse
# than the median of the other nodes' medians.
STANDS_OUT = 2.0


def slow_nodes(rows: list[dict]) -> list[dict]:
    """Nodes whose links to every other node are clearly slower than the rest's.

    For each node, the median latency and bandwidth of its pairs; a node
    whose median bandwidth is below 1/STANDS_OUT, or whose median latency is
    above STANDS_OUT times, the typical node's is reported with both numbers.
    """
    import statistics

    lat, bw = as_tables(rows)
    if len(lat) < 3:
        return []  # with two nodes there is no "rest" to compare with
    med_lat = {n: statistics.median(lat.loc[n].dropna()) for n in lat.index}
    med_bw = {n: statistics.median(bw.loc[n].dropna()) for n in bw.index}
    out = []
    for n in lat.index:
        others_lat = statistics.median(v for m, v in med_lat.items() if m != n)
        others_bw = statistics.median(v for m, v in med_bw.items() if m != n)
        if med_bw[n] * STANDS_OUT < others_bw or med_lat[n] > STANDS_OUT * others_lat:
            out.append({"node": n, "latency_s": med_lat[n], "others_latency_s": others_lat,
                        "bandwidth_Bps": med_bw[n], "others_bandwidth_Bps": others_bw})
    return out


def collective_share(rank_time_s: Sequence[float], rank_node: Sequence[str]) -> dict[str, dict]:
    """Per-node share of a collective's time, from each rank's mean time in it.

    In a collective every rank waits for the slowest, so the ranks of a slow
    device spend *less* time inside the call than the others (they arrive
    last). For each node: its mean time, its share of the total, and how much
    earlier than the slowest-arriving node its ranks entered (``wait_s``);
    ``slowest`` marks the node the others waited for.
    """
    if len(rank_time_s) != len(rank_node) or not rank_time_s:
        raise ShoalError("collective_share needs one time per rank and one node per rank")
    per_node: dict[str, list[float]] = {}
    for t, node in zip(rank_time_s, rank_node):
        per_node.setdefault(node, []).append(float(t))
    means = {n: sum(v) / len(v) for n, v in per_node.items()}
    total = sum(means.values()) or 1.0
    least = min(means.values())
    slowest = min(means, key=means.get)
    return {n: {"mean_s": m, "share": m / total, "wait_s": m - least, "slowest": n == slowest}
            for n, m in means.items()}
