"""Host invariance: the same emulated devices, timed from inside a CPU-limited cgroup.

`docker --cpus 1` (or a systemd slice with CPUQuota=) gives a command a CPU
quota on its cgroup; shoal reads it (cpulimit.cpu_capacity), chooses the
dilation that fits it, and makes the devices' groups beneath the limited
group. If that is right, the devices' times come out the same as without the
limit. This script makes such a cgroup itself (v1: cpu.cfs_quota_us /
cpu.cfs_period_us, v2: cpu.max, a 100 ms period as docker's), starts a whole
shoal command in it, removes it afterwards, and compares with the same
command unlimited:

- ``shoal work raytrace --size 512 --emulate 4xminnowboard --nodes 4``: rank 0's
  time (the median of the run's repetitions, from its results.csv);
- ``shoal work videostream --emulate 4xminnowboard --nodes 1,4``: the speed-up
  from 1 to 4 devices;
- ``shoal work raytrace --size 512 --emulate 8xstb --nodes 8`` (``raytrace-stb``): seed
  002's 8 set-top boxes, rank 0's time beside the seed's 6.9 s.

Per configuration it prints the capacity shoal detected and the D it chose
(from the run's manifest), the value (the median over rounds, with its spread
(max - min) / median), and its ratio to the unlimited run's (target: within
3 %), and the host speed each command held the devices against (measured, or its cached
value checked, unless ``--host-speed`` fixes it). Each job also runs unlimited at the D each limit chose (``same D``): the ratio to
that parts what the limit does from what the dilation does (the host's per-packet work
and scheduling delays shrink by D). Rounds are interleaved (every limit once per round, the order turned
round by one each round). ``--study`` also runs ``shoal study --quick`` under
each limit and compares the headline of its findings.json (report/findings.json): two agree
when, per condition, each one's tied range holds the other's best size.

Run as root: .venv/bin/python benchmarks/host_invariance.py [--rounds 2] [--limits none,1,0.5]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from entry import run_main

from shoal.errors import ShoalError

CGROUP = Path("/sys/fs/cgroup")
PERIOD_US = 100_000  # docker's
TARGET = 0.03
SEED002_512_ON_8_S = 6.9  # seed 002 §V: Tachyon 512x512 on 8 set-top boxes
EMULATE = "4xminnowboard"
JOBS = {
    "raytrace": ["work", "raytrace", "--size", "512", "--emulate", EMULATE, "--nodes", "4"],
    "videostream": ["work", "videostream", "--emulate", EMULATE, "--nodes", "1,4"],
    "raytrace-stb": ["work", "raytrace", "--size", "512", "--emulate", "8xstb", "--nodes", "8"],
}
# The node count whose time a timing job reports; a job not named here reports its speed-up
# from 1 to 4 devices.
TIMED_AT = {"raytrace": 4, "raytrace-stb": 8}


class Limit:
    """A cgroup holding what runs in it to ``cpus`` CPUs (None: no cgroup at all), made on
    entry and removed, with whatever shoal made beneath it, on exit."""

    def __init__(self, cpus: float | None, tag: str) -> None:
        self.cpus, self.tag, self.group = cpus, tag, None
        self.throttled: float | None = None  # the share of its periods the limit held it back

    def __enter__(self) -> "Limit":
        if self.cpus is None:
            return self
        quota = int(round(self.cpus * PERIOD_US))
        name = f"invariance-{os.getpid()}-{self.tag}"
        if (CGROUP / "cgroup.controllers").exists():
            if "cpu" not in (CGROUP / "cgroup.subtree_control").read_text().split():
                (CGROUP / "cgroup.subtree_control").write_text("+cpu")
            self.group = CGROUP / name
            self.group.mkdir()
            (self.group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        elif (CGROUP / "cpu" / "cpu.cfs_quota_us").exists():
            self.group = CGROUP / "cpu" / name
            self.group.mkdir()
            (self.group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.group / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            raise ShoalError("no cgroup cpu controller at /sys/fs/cgroup (v1 cpu or v2)")
        return self

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the group: the shell joins it, then becomes the command."""
        if self.group is None:
            return argv
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.group / "cgroup.procs"), *argv]

    def __exit__(self, *exc) -> None:
        if self.group is None:
            return
        try:
            stat = dict(line.split() for line in (self.group / "cpu.stat").read_text().splitlines())
            self.throttled = int(stat["nr_throttled"]) / max(1, int(stat["nr_periods"]))
        except (OSError, KeyError, ValueError):
            pass
        # Deepest first: what shoal left beneath it (v2: the leaf its command moved into).
        levels = sorted((p for p in self.group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for level in levels + [self.group]:
            for _ in range(100):
                try:
                    level.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)  # a process still leaving
        if self.group.exists():
            print(f"host_invariance: could not remove {self.group}", file=sys.stderr)


def shoal(argv: list[str], limit: Limit, out: Path, timeout_s: float) -> float:
    """Run one shoal command in ``limit``; its wall seconds."""
    full = limit.argv([sys.executable, "-m", "shoal", *argv, "--out", str(out)])
    start = time.monotonic()
    done = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise ShoalError(f"shoal {' '.join(argv)} (limit {limit.cpus}) failed: "
                         f"{done.stderr.strip()[-600:]}")
    return time.monotonic() - start


def emulation(run: Path) -> dict:
    """The emulated cluster's facts from a run's manifest (capacity, dilation, cgroup)."""
    manifest = json.loads((run / "manifest.json").read_text())
    for cluster in (manifest.get("clusters") or {}).values():
        if isinstance(cluster, dict) and cluster.get("emulation"):
            return cluster["emulation"]
    return {}


def device_times(run: Path) -> tuple[dict[int, float], float]:
    """Median time_s per node count of a work run (work.csv of a study, else results.csv), and
    the share of its repetitions shoal flagged short of host CPU (host_slack)."""
    table = run / "work.csv" if (run / "work.csv").exists() else run / "results.csv"
    times: dict[int, list[float]] = {}
    short = []
    with open(table) as fh:
        for row in csv.DictReader(fh):
            if row.get("check") == "fail" or not row.get("time_s"):
                continue
            times.setdefault(int(row["nodes"]), []).append(float(row["time_s"]))
            short.append(row.get("host_slack") == "short")
    return {n: statistics.median(t) for n, t in times.items()}, sum(short) / max(1, len(short))


def headlines(run: Path) -> dict[str, dict]:
    """The study's headline per condition from findings.json: its best measured size, whether
    perf/W still rose there (at_least), and the sizes tied with the best (low, high)."""
    found: dict[str, dict] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("headline"), dict):
                for condition, head in node["headline"].items():
                    if isinstance(head, dict) and "size" in head:
                        tied = head.get("best_range") or {}
                        size = head.get("size")
                        found[condition] = {"size": size, "at_least": bool(head.get("at_least")),
                                            "low": tied.get("low", size), "high": tied.get("high", size)}
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    path = run / "findings.json" if (run / "findings.json").exists() else run / "report" / "findings.json"
    walk(json.loads(path.read_text()))
    return found


def said(heads: dict[str, dict]) -> str:
    """"sleeping 2 (tied 2-3), spinning >=4": the headlines as the report names them."""
    parts = []
    for condition, h in heads.items():
        size = "none" if h["size"] is None else f">={h['size']}" if h["at_least"] else str(h["size"])
        tied = f" (tied {h['low']}-{h['high']})" if h["low"] != h["high"] else ""
        parts.append(f"{condition} {size}{tied}")
    return ", ".join(parts)


def agree(heads: dict[str, dict], reference: dict[str, dict]) -> bool:
    """Two studies agree when, per condition, each one's tied range holds the other's best size
    (the repeatability benchmark's rule): sizes inside each other's uncertainty are one answer."""
    if set(heads) != set(reference):
        return False
    for condition, h in heads.items():
        r = reference[condition]
        if None in (h["size"], r["size"]):
            if h["size"] != r["size"]:
                return False
            continue
        if not (h["low"] <= r["size"] <= h["high"] and r["low"] <= h["size"] <= r["high"]):
            return False
    return True


def spread(values: list[float]) -> float:
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else float("nan")


def label(cpus: float | None) -> str:
    return "unlimited" if cpus is None else f"{cpus:g} CPU"


def name_of(config: object) -> str:
    if isinstance(config, tuple):
        return f"unlimited@{label(config[1])}"
    return label(config)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--limits", default="none,1,0.5",
                   help="CPU limits to compare, 'none' for no cgroup (the reference; default none,1,0.5)")
    p.add_argument("--reps", type=int, default=3, help="repetitions per node count in each run (default 3)")
    p.add_argument("--jobs", default=",".join(JOBS), help=f"which of {', '.join(JOBS)} (default all)")
    p.add_argument("--mpi", default=None)
    p.add_argument("--host-speed", default=None,
                   help="pass --host-speed N to every command (default: each measures, or checks its "
                        "cached speed, as shoal does by itself; the speed each used is printed)")
    p.add_argument("--study", action="store_true",
                   help="also run 'shoal study --quick' under each limit and compare headline sizes")
    p.add_argument("--study-args", default="--quick", help="the study's options (default --quick)")
    p.add_argument("--study-limits", default=None,
                   help="the limits the study runs under (default: --limits; 'none' is always first)")
    p.add_argument("--no-jobs", dest="run_jobs", action="store_false",
                   help="only the study (with --study)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds one shoal command may take")
    p.add_argument("--keep", default=None, help="keep the run directories here")
    p.add_argument("--no-same-dilation", dest="same_dilation", action="store_false",
                   help="do not also run each job unlimited at the D each limit chose (which parts "
                        "the limit's effect from the dilation's)")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise ShoalError("run as root: the script makes the CPU-limited cgroups itself")
    limits = [None if x.strip() == "none" else float(x) for x in args.limits.split(",")]
    if None not in limits:
        limits.insert(0, None)  # the reference
    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    unknown = [j for j in jobs if j not in JOBS]
    if unknown or args.rounds < 1:
        raise ShoalError(f"--jobs takes {', '.join(JOBS)}; --rounds at least 1")
    extra = (["--reps", str(args.reps)] + (["--mpi", args.mpi] if args.mpi else [])
             + (["--host-speed", args.host_speed] if args.host_speed else []))
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="host-invariance-"))
    base.mkdir(parents=True, exist_ok=True)
    # (job, configuration) -> per round: value, capacity, D, wall seconds, where the devices'
    # groups were, ... A configuration is a limit (None: none), or ("same D", limit): no limit,
    # at the D the limit's run of that round chose, which parts the limit's effect from D's.
    seen: dict[tuple[str, object], list[dict]] = {}
    count = 0

    def measure(job: str, config: object, r: int) -> None:
        nonlocal count
        count += 1
        cpus = config if not isinstance(config, tuple) else None
        asked = []
        if isinstance(config, tuple):
            asked = ["--dilation", f"{seen[(job, config[1])][-1]['dilation']:g}"]
        name = name_of(config)
        out = base / f"{job}-{name.replace(' ', '').replace('@', '-')}-r{r}"
        with Limit(cpus, f"{job}-{r}") as limit:
            wall = shoal(JOBS[job] + extra + asked, limit, out, args.timeout)
        times, short = device_times(out)
        value = times[TIMED_AT[job]] if job in TIMED_AT else times[1] / times[4]
        emu = emulation(out)
        capacity = (emu.get("host_capacity") or {}).get("capacity", emu.get("host_cpus"))
        entry = {"value": value, "capacity": capacity, "dilation": emu.get("dilation"),
                 "wall_s": wall, "within": (emu.get("cgroup") or {}).get("within"),
                 "short": short, "throttled": limit.throttled,
                 "host_speed": (emu.get("host_speed") or {}).get("mix") if isinstance(emu.get("host_speed"), dict)
                 else emu.get("host_speed")}
        seen.setdefault((job, config), []).append(entry)
        print(f"round {r + 1} {job:12s} {name:17s} capacity {capacity} D {entry['dilation']:g} "
              f"{'time' if job in TIMED_AT else 'speed-up'} {value:.4f} "
              f"(wall {wall:.0f} s; host speed {entry['host_speed']:.3f}; {short:.0%} of repetitions short of CPU; "
              + (f"the limit throttled {limit.throttled:.1%} of its periods; " if limit.throttled is not None else "")
              + f"device groups in {entry['within'] or 'the root'})", flush=True)

    study_limits = limits if args.study_limits is None else [
        None if x.strip() == "none" else float(x) for x in args.study_limits.split(",")]
    if None not in study_limits:
        study_limits.insert(0, None)
    if not args.run_jobs:
        jobs = []
    limited = [c for c in limits if c is not None]
    configs: list[object] = list(limits) + ([("same D", c) for c in limited] if args.same_dilation else [])
    for r in range(args.rounds):
        order = limits[r % len(limits):] + limits[:r % len(limits)]
        for config in order + configs[len(limits):]:  # each limit's own D known before its twin
            for job in jobs:
                measure(job, config, r)
    print() if jobs else None
    print(f"{'job':12s} {'configuration':17s} {'capacity':>8s} {'D':>3s} {'value (median)':>18s} "
          f"{'spread':>7s} {'ratio':>7s}  within 3 %  {'same D':>6s}  short  throttled  host speed") if jobs else None
    worst = 0.0
    for job in jobs:
        what = "time s" if job in TIMED_AT else "speed-up"
        median = {c: statistics.median(e["value"] for e in seen[(job, c)]) for c in configs}
        for config in configs:
            entries = seen[(job, config)]
            values = [e["value"] for e in entries]
            ratio = median[config] / median[None]
            if config is not None and not isinstance(config, tuple):
                worst = max(worst, abs(ratio - 1))
            twin = ("same D", config)
            same = f"{median[config] / median[twin]:.3f}" if twin in median else "-"
            capacities = sorted({e["capacity"] for e in entries})
            ds = sorted({e["dilation"] for e in entries})
            throttled = [e["throttled"] for e in entries if e["throttled"] is not None]
            verdict = "-" if config is None or isinstance(config, tuple) else (
                "yes" if abs(ratio - 1) <= TARGET else "NO")
            print(f"{job:12s} {name_of(config):17s} {'/'.join(f'{c:g}' for c in capacities):>8s} "
                  f"{'/'.join(f'{d:g}' for d in ds):>3s} {median[config]:>9.4f} {what:8s}"
                  f"{spread(values):>7.1%} {ratio:>7.3f}  {verdict:>10s}  {same:>6s}  "
                  f"{statistics.mean(e['short'] for e in entries):>5.0%}  "
                  + (f"{statistics.mean(throttled):>9.1%}" if throttled else f"{'-':>9s}")
                  + "  " + "/".join(f"{e['host_speed']:.3f}" for e in entries))
    if "raytrace-stb" in jobs:
        for config in limits:
            t = statistics.median(e["value"] for e in seen[("raytrace-stb", config)])
            print(f"raytrace 512 on 8 set-top boxes, {label(config)}: {t:.2f} s against seed 002's "
                  f"{SEED002_512_ON_8_S} s: {t / SEED002_512_ON_8_S:.3f} (target 0.85..1.15)")
    if jobs:
        print(f"\nlargest departure from the unlimited run: {worst:.1%} (target {TARGET:.0%}); "
              f"{count} shoal commands; run directories in {base}")
    if args.study:
        print("\nshoal study under each limit (headline size per condition):")
        reference_heads = None
        for cpus in study_limits:
            out = base / f"study-{label(cpus).replace(' ', '')}"
            with Limit(cpus, "study") as limit:
                wall = shoal(["study", *args.study_args.split()] + (["--mpi", args.mpi] if args.mpi else []),
                             limit, out, args.timeout * 4)
            emu = emulation(out)
            capacity = (emu.get("host_capacity") or {}).get("capacity")
            heads = headlines(out)
            reference_heads = heads if cpus is None else reference_heads
            speed = emu.get("host_speed")
            speed = speed.get("mix") if isinstance(speed, dict) else speed
            print(f"  {label(cpus):9s} capacity {capacity} D {emu.get('dilation')} host speed "
                  f"{speed:.3f}: {said(heads)} (wall {wall:.0f} s)"
                  + ("" if cpus is None else f"; agrees with unlimited: {'yes' if agree(heads, reference_heads) else 'NO'}"),
                  flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
