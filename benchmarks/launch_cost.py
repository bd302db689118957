"""Launch and wire-up cost per emulated set-top box, against N, for two launch layouts.

For each N (default 8, 16, 32) N set-top boxes on the docsis-27m plant come up once,
and one rank per box runs launch_cost.c, in turn (interleaved rounds) for each MPI and
each layout: "box", the MPI's own launch (a Hydra proxy or PRRTE daemon started in
every box through shoal's launcher helper), and "head", seed 002's OERTE-like layout
(the launcher's daemon stays in the head-end namespace and starts each box's rank
there through the helper; ranks still talk over the plant, and look up each other's
addresses at the head's PMI/PMIx server, on demand where the MPI can). Measured per
launch: the time from starting the launcher to the last rank's MPI_Init return (one
CLOCK_MONOTONIC for all namespaces), each rank's own MPI_Init time, the rank's and its
box daemon's resident memory (the daemons sampled from /proc every 0.1 s), the first
barrier (on-demand connections), MPI_Finalize, and the line bytes every box sent and
received through the forwarder from launch to exit (the wire-up's traffic). Times
are device times (divided by the cluster's dilation D). Per quantity, a straight line
cost = a + b*N (b: the cost of one more box) and a power c*N^k are fitted over the N
measured. --out FILE appends every launch as a JSON line (launch_cost_figure.py draws them).
Run as root: .venv/bin/python benchmarks/launch_cost.py [--nodes 8,16,32]
             [--mpi mpich,openmpi] [--layout box,head] [--rounds 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
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

DAEMONS = ("hydra_pmi_proxy", "prted", "prterun", "mpiexec", "mpiexec.hydra")


def _daemon_rss(stop: threading.Event, peak: dict[tuple[int, bool], int], cluster_id: str) -> None:
    """Peak resident bytes of every launcher process of cluster ``cluster_id`` (in its cgroups:
    other jobs on the host have daemons of the same name) seen until ``stop``, by (pid,
    whether it runs in the head)."""
    while not stop.is_set():
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/comm") as fh:
                    if fh.read().strip() not in DAEMONS:
                        continue
                with open(f"/proc/{entry.name}/cgroup") as fh:
                    groups = fh.read()
                if f"/{cluster_id}/" not in groups:
                    continue
                with open(f"/proc/{entry.name}/statm") as fh:
                    rss = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError, IndexError):
                continue
            key = (int(entry.name), f"/{cluster_id}/head" in groups)
            peak[key] = max(peak.get(key, 0), rss)
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


def _head_bytes(record: dict, directory: Path) -> int:
    counters = linkemu.stats(record["forwarder"], directory / "forwarder.json")
    head = counters["ports"][0]
    return head["up"]["wire_bytes"] + head["down"]["wire_bytes"]


def launch_once(c, mpi, exe: Path, n: int, layout: str) -> dict:
    record = state.read(c.emulated.id)
    before = _wire_bytes(record, c.emulated.directory)
    head_before = _head_bytes(record, c.emulated.directory)
    _reset_memory_peaks(record)
    t0 = time.monotonic()
    job = c.job(mpi, nodes=n, ranks_per_node=1, argv=[str(exe)], rank_env={"LAUNCH_T0": repr(t0)},
                layout=layout)
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
        raise SystemExit(f"N={n}, {mpi.name}, layout {layout}: launch failed: {done.tail(3)}")
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("{"))
    data = json.loads(line)
    d = c.emulated.dilation
    in_boxes = [v for (_, head), v in peak.items() if not head]
    in_head = [v for (_, head), v in peak.items() if head]
    return {"mpi": mpi.kind, "layout": layout, "n": n, "dilation": d, "wall_s": wall / d,
            "init_done_max_s": max(data["init_done_s"]) / d,
            "init_median_s": statistics.median(data["init_s"]) / d,
            "first_barrier_max_s": max(data["first_barrier_s"]) / d,
            "finalize_s": data["finalize_s"] / d,
            "rank_rss_median_B": statistics.median(data["rss_B"]),
            "daemon_rss_median_B": statistics.median(in_boxes) if in_boxes else 0,
            # Open MPI has more than one daemon process per box: their sum, per box.
            "daemon_rss_per_box_B": sum(in_boxes) / n,
            "daemons_seen": len(in_boxes),
            # The launcher and, in the head layout, its daemons: the head-end's share.
            "head_rss_B": sum(in_head),
            "box_memory_peak_max_B": max(_box_memory_peak(record), default=0),
            "wire_B_per_box": (_wire_bytes(record, c.emulated.directory) - before) / n,
            "head_wire_B": _head_bytes(record, c.emulated.directory) - head_before}


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares a + b*x."""
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def power_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares c*x^k in log-log (positive values only): (c, k)."""
    pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pairs) < 2:
        return float("nan"), float("nan")
    ln_c, k = fit([p[0] for p in pairs], [p[1] for p in pairs])
    return math.exp(ln_c), k


KEYS = ("init_done_max_s", "init_median_s", "first_barrier_max_s", "finalize_s",
        "rank_rss_median_B", "daemon_rss_per_box_B", "head_rss_B", "box_memory_peak_max_B",
        "wire_B_per_box", "head_wire_B")


def report(rows: list[dict], rounds: int) -> None:
    """Per MPI and layout: median (min..max) per N, and both fits."""
    for kind, layout in dict.fromkeys((r["mpi"], r["layout"]) for r in rows):
        mine = [r for r in rows if (r["mpi"], r["layout"]) == (kind, layout)]
        counts = sorted({r["n"] for r in mine})
        print(f"\n{kind}, layout {layout}, device times, median of {rounds} launches (min..max):")
        print("N    " + "  ".join(f"{k:>22}" for k in KEYS))
        medians: dict[str, list[float]] = {k: [] for k in KEYS}
        for n in counts:
            cells = []
            for k in KEYS:
                values = [r[k] for r in mine if r["n"] == n]
                medians[k].append(statistics.median(values))
                cells.append(f"{statistics.median(values):10.4g} ({min(values):.3g}..{max(values):.3g})")
            print(f"{n:<4} " + "  ".join(f"{c:>22}" for c in cells))
        if len(counts) >= 2:
            print("fitted a + b*N (b: cost of one more box) and c*N^k:")
            for k in KEYS:
                a, b = fit([float(n) for n in counts], medians[k])
                c, e = power_fit([float(n) for n in counts], medians[k])
                print(f"  {k:<22} a = {a:.4g}  b = {b:.4g} per box;  c = {c:.4g}  k = {e:.3f}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", default="8,16,32")
    p.add_argument("--mpi", default="mpich", help="one MPI or several, comma-separated")
    p.add_argument("--layout", default="box", help="box, head or box,head")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, help="append every launch here as a JSON line")
    args = p.parse_args()
    mpis = [discover.resolve(m) for m in args.mpi.split(",")]
    layouts = args.layout.split(",")
    programs = {m.kind: compile_program(m, "launch_cost.c",
                                        Path(tempfile.mkdtemp(prefix="shoal-launch-")))
                for m in mpis}
    counts = [int(x) for x in args.nodes.split(",")]
    rows: list[dict] = []
    for n in counts:
        with cluster.open(emulate=f"{n}xstb", calibrate=False) as c:
            for _ in range(args.rounds):
                for mpi in mpis:
                    for layout in layouts:
                        rows.append(launch_once(c, mpi, programs[mpi.kind], n, layout))
                        print(json.dumps(rows[-1]), flush=True)
                        if args.out:
                            with args.out.open("a") as fh:
                                fh.write(json.dumps(rows[-1]) + "\n")
    report(rows, args.rounds)
    return 0


if __name__ == "__main__":
    run_main(main)
