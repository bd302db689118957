"""Launch and wire-up cost per emulated set-top box, against N: the MPI's default launch.

For each N (default 8, 16, 32) N set-top boxes on the docsis-27m plant come up, and
one rank per box runs launch_cost.c with the MPI's own launcher (Hydra proxies or
PRRTE daemons started in every box through shoal's launcher helper). Measured per
launch: the time from starting the launcher to the last rank's MPI_Init return (one
CLOCK_MONOTONIC for all namespaces), each rank's own MPI_Init time, the rank's and its
box daemon's resident memory (the daemons sampled from /proc every 0.1 s), the first
barrier (on-demand connections), MPI_Finalize, and the line bytes every box sent and
received through the forwarder from launch to exit (the wire-up's traffic). Times
are device times (divided by the cluster's dilation D). A straight line
cost = a + b*N is fitted per quantity over the N measured; b is the slope per box.
Run as root: .venv/bin/python benchmarks/launch_cost.py [--nodes 8,16,32] [--mpi mpich] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from entry import run_main
from mpicc import compile_program

from shoal import cluster, proc
from shoal.cluster import linkemu, state
from shoal.mpi import discover

DAEMONS = ("hydra_pmi_proxy", "prted")


def _daemon_rss(stop: threading.Event, peak: dict[int, int], cluster_id: str) -> None:
    """Peak resident bytes of every launcher daemon of cluster ``cluster_id`` (in its cgroups:
    other jobs on the host have daemons of the same name) seen (by pid) until ``stop``."""
    while not stop.is_set():
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/comm") as fh:
                    if fh.read().strip() not in DAEMONS:
                        continue
                with open(f"/proc/{entry.name}/cgroup") as fh:
                    if f"/{cluster_id}/" not in fh.read():
                        continue
                with open(f"/proc/{entry.name}/statm") as fh:
                    rss = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, IndexError):
                continue
            pid = int(entry.name)
            peak[pid] = max(peak.get(pid, 0), rss)
        stop.wait(0.1)


def _wire_bytes(record: dict, directory: Path) -> int:
    counters = linkemu.stats(record["forwarder"], directory / "forwarder.json")
    return sum(p["up"]["wire_bytes"] + p["down"]["wire_bytes"] for p in counters["ports"][1:])


def _box_memory_peak(record: dict) -> list[int]:
    """Each box's peak memory (rank, daemons and their page cache) from its memory cgroup, v1
    (the peak is reset before each launch); empty where boxes have no v1 memory group."""
    peaks = []
    for node in record["nodes"].values():
        group = node.get("memory_cgroup")
        if group and Path(group, "memory.max_usage_in_bytes").exists():
            peaks.append(int(Path(group, "memory.max_usage_in_bytes").read_text()))
    return peaks


def _reset_memory_peaks(record: dict) -> None:
    for node in record["nodes"].values():
        group = node.get("memory_cgroup")
        if group and Path(group, "memory.max_usage_in_bytes").exists():
            Path(group, "memory.max_usage_in_bytes").write_text("0")


def launch_once(c, mpi, exe: Path, n: int) -> dict:
    record = state.read(c.emulated.id)
    before = _wire_bytes(record, c.emulated.directory)
    _reset_memory_peaks(record)
    t0 = time.monotonic()
    job = c.job(mpi, nodes=n, ranks_per_node=1, argv=[str(exe)], rank_env={"LAUNCH_T0": repr(t0)})
    argv, env = job.command()
    stop, peak = threading.Event(), {}
    sampler = threading.Thread(target=_daemon_rss, args=(stop, peak, c.emulated.id), daemon=True)
    sampler.start()
    try:
        done = proc.run(argv, env=job.popen_env(), timeout=1800)
    finally:
        stop.set()
        sampler.join()
    wall = time.monotonic() - t0
    if not done.ok:
        raise SystemExit(f"N={n}: launch failed: {done.tail(3)}")
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("{"))
    data = json.loads(line)
    d = c.emulated.dilation
    return {"n": n, "dilation": d, "wall_s": wall / d,
            "init_done_max_s": max(data["init_done_s"]) / d,
            "init_median_s": statistics.median(data["init_s"]) / d,
            "first_barrier_max_s": max(data["first_barrier_s"]) / d,
            "finalize_s": data["finalize_s"] / d,
            "rank_rss_median_B": statistics.median(data["rss_B"]),
            "daemon_rss_median_B": statistics.median(peak.values()) if peak else 0,
            # Open MPI has more than one daemon process per box: their sum, per box.
            "daemon_rss_per_box_B": sum(peak.values()) / n,
            "daemons_seen": len(peak),
            "box_memory_peak_max_B": max(_box_memory_peak(record), default=0),
            "wire_B_per_box": (_wire_bytes(record, c.emulated.directory) - before) / n}


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares a + b*x."""
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", default="8,16,32")
    p.add_argument("--mpi", default="mpich")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    mpi = discover.resolve(args.mpi)
    exe = compile_program(mpi, "launch_cost.c", Path(tempfile.mkdtemp(prefix="shoal-launch-")))
    counts = [int(x) for x in args.nodes.split(",")]
    rows: list[dict] = []
    for n in counts:
        with cluster.open(emulate=f"{n}xstb", calibrate=False) as c:
            for _ in range(args.rounds):
                rows.append(launch_once(c, mpi, exe, n))
                print(json.dumps(rows[-1]), flush=True)
    keys = ("init_done_max_s", "init_median_s", "first_barrier_max_s", "finalize_s",
            "rank_rss_median_B", "daemon_rss_per_box_B", "box_memory_peak_max_B", "wire_B_per_box")
    print(f"\n{mpi.name}, default launch (a daemon in every box), device times, "
          f"median of {args.rounds} launches (min..max):")
    print("N    " + "  ".join(f"{k:>22}" for k in keys))
    medians: dict[str, list[float]] = {k: [] for k in keys}
    for n in counts:
        mine = [r for r in rows if r["n"] == n]
        cells = []
        for k in keys:
            values = [r[k] for r in mine]
            medians[k].append(statistics.median(values))
            cells.append(f"{statistics.median(values):10.4g} ({min(values):.3g}..{max(values):.3g})")
        print(f"{n:<4} " + "  ".join(f"{c:>22}" for c in cells))
    if len(counts) >= 2:
        print("\nfitted a + b*N (b: cost of one more box):")
        for k in keys:
            a, b = fit([float(n) for n in counts], medians[k])
            print(f"  {k:<22} a = {a:.4g}  b = {b:.4g} per box")
    return 0


if __name__ == "__main__":
    run_main(main)
