"""Randomized kill points: SIGKILL, SIGTERM or Ctrl-C twice at a random moment of
`cluster up`, of a sweep (MPICH or Open MPI) on an emulated cluster, or of `cluster down`.

After each trial the script counts what is left: processes of the MPI job or the link
forwarder, network namespaces, TAP links, cgroups and state records of the cluster. A
command stopped by SIGTERM or SIGINT must clean up by itself, so those are counted
before anything else runs; after a SIGKILL (which no process can handle) `shoal doctor
--fix` runs first, as a user would. For sweeps it also checks that every row on disk
just before the signal is still there, and that no manifest is left "running".
The reference is zero everywhere.
Run as root: .venv/bin/python benchmarks/kill_points.py [--trials 100] [--seed 1]
At 128 set-top boxes: --emulate 128xstb --phases up,down --trials 20 (a sweep's trial
keeps its two MinnowBoards: at 128 boxes its first point alone takes minutes).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cluster_kill9 import leftovers, live_commands
from entry import run_main

SHOAL = [sys.executable, "-m", "shoal"]
SIGNALS = {"SIGKILL": [signal.SIGKILL], "SIGTERM": [signal.SIGTERM],
           "SIGINT x2": [signal.SIGINT, signal.SIGINT]}
JOB_MARKERS = (b"hydra_pmi_proxy", b"prted", b"prterun", b"mpiexec", b"shoal-bench")


def _foreground() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def job_processes() -> int:
    return sum(1 for cmd in live_commands() if any(m in cmd for m in JOB_MARKERS))


def cluster_job_processes(cluster_id: str) -> int:
    """MPI job processes of one cluster: its launcher helper on their command line, or its
    cgroups in theirs. Other jobs on a shared host are not this trial's leak."""
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            groups = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if any(m in cmd for m in JOB_MARKERS) and (
                f"/{cluster_id}/".encode() in cmd or f"/{cluster_id}/" in groups
                or f"shoal-{cluster_id}/" in groups):
            count += 1
    return count


def rows(table: Path) -> int:
    try:
        with table.open() as fh:
            return sum(1 for r in csv.DictReader(fh) if None not in r.values())
    except OSError:
        return 0


def send(process: subprocess.Popen, signals: list[int]) -> None:
    for signum in signals:
        if process.poll() is None:
            process.send_signal(signum)
        time.sleep(0.05)
    try:
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def after(kind: str, cluster_id: str | None, jobs_before: int) -> dict[str, int]:
    """What is left; a SIGKILL's mess is first cleaned up as a user would."""
    if kind == "SIGKILL":
        subprocess.run([*SHOAL, "doctor", "--fix"], capture_output=True, timeout=300)
        time.sleep(0.5)
    left = leftovers(cluster_id)
    left.pop("processes", None)
    # With the cluster known, its own job processes (none may be left); else any new ones.
    left["job processes"] = cluster_job_processes(cluster_id) if cluster_id else job_processes() - jobs_before
    return left


def up_finished(cluster_id: str) -> bool:
    """`cluster up` got through before the signal: the cluster is meant to stay up."""
    from shoal.cluster import state

    record = state.read(cluster_id)
    return bool(record and record.get("persistent"))


def trial_up(kind: str, up_s: float, emulate: str) -> dict[str, int]:
    cluster_id = f"kp{random.randrange(10**6):06d}"
    process = subprocess.Popen([*SHOAL, "cluster", "up", "--emulate", emulate, "--name", cluster_id,
                                "--no-calibrate"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               preexec_fn=_foreground)
    jobs = job_processes()
    time.sleep(random.uniform(0.05, up_s))
    send(process, SIGNALS[kind])
    if process.returncode == 0 or (kind == "SIGKILL" and up_finished(cluster_id)):
        subprocess.run([*SHOAL, "cluster", "down", cluster_id], capture_output=True, timeout=600)
    return after(kind, cluster_id, jobs)


def trial_down(kind: str, down_s: float, emulate: str) -> dict[str, int]:
    cluster_id = f"kd{random.randrange(10**6):06d}"
    subprocess.run([*SHOAL, "cluster", "up", "--emulate", emulate, "--name", cluster_id,
                    "--no-calibrate"], capture_output=True, timeout=600, check=True)
    jobs = job_processes()
    process = subprocess.Popen([*SHOAL, "cluster", "down", cluster_id], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, preexec_fn=_foreground)
    time.sleep(random.uniform(0.0, down_s))
    send(process, SIGNALS[kind])
    # A down cut short leaves the cluster recorded: down again must finish it.
    subprocess.run([*SHOAL, "cluster", "down", cluster_id], capture_output=True, timeout=600)
    return after(kind, cluster_id, jobs)


def trial_sweep(kind: str, mpi: str) -> tuple[dict[str, int], int, bool]:
    out = Path(tempfile.mkdtemp(prefix="shoal-kp-")) / "run"
    jobs = job_processes()
    process = subprocess.Popen([*SHOAL, "bench", "--emulate", "2xminnowboard", "--mpi", mpi,
                                "--tests", "imb.PingPong,mpbench.bandwidth", "--sizes", "1..64K",
                                "--budget", "0.3", "--out", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_foreground)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and rows(out / "results.csv") < 1:
        time.sleep(0.05)
    time.sleep(random.uniform(0.0, 3.0))
    before = rows(out / "results.csv")
    cluster_id = None
    try:
        cluster_id = next(iter(json.loads((out / "manifest.json").read_text())["clusters"].values()))["id"]
    except (OSError, ValueError, KeyError, StopIteration):
        pass
    send(process, SIGNALS[kind])
    left = after(kind, cluster_id, jobs)
    lost = max(0, before - rows(out / "results.csv"))
    running = json.loads((out / "manifest.json").read_text()).get("status") == "running"
    return left, lost, running


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--emulate", default="3xminnowboard",
                   help="devices of the clusters brought up and down (sweeps keep 2xminnowboard)")
    p.add_argument("--phases", default="up,sweep,down", help="where the signals land")
    args = p.parse_args()
    phases = args.phases.split(",")
    random.seed(args.seed)
    subprocess.run([*SHOAL, "doctor", "--fix"], capture_output=True, timeout=300)
    taps_before = leftovers(None)["tap"]
    t0 = time.perf_counter()
    subprocess.run([*SHOAL, "cluster", "up", "--emulate", args.emulate, "--name", "kpprobe",
                    "--no-calibrate"], capture_output=True, check=True)
    up_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    subprocess.run([*SHOAL, "cluster", "down", "kpprobe"], capture_output=True, check=True)
    down_s = time.perf_counter() - t0
    totals: dict[str, int] = {}
    lost = running = 0
    counts: dict[str, int] = {}
    for i in range(args.trials):
        phase = random.choice(phases)
        kind = random.choice(list(SIGNALS))
        mpi = random.choice(["mpich", "openmpi"])
        label = f"{phase} ({mpi})" if phase == "sweep" else phase
        if phase == "up":
            left = trial_up(kind, up_s, args.emulate)
        elif phase == "down":
            left = trial_down(kind, down_s, args.emulate)
        else:
            left, trial_lost, trial_running = trial_sweep(kind, mpi)
            lost += trial_lost
            running += trial_running
        left["tap"] -= taps_before
        bad = {k: v for k, v in left.items() if v > 0}
        for key, value in left.items():
            totals[key] = totals.get(key, 0) + max(0, value)
        counts[f"{label}, {kind}"] = counts.get(f"{label}, {kind}", 0) + 1
        print(f"trial {i + 1:3d}: {kind:9s} during {label:15s} "
              f"{'leaked ' + str(bad) if bad else 'nothing left'}", flush=True)
    print(f"\n{args.trials} randomized kill points (" + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
          + ")")
    print("left behind: " + ", ".join(f"{v} {k}" for k, v in totals.items())
          + f"; finished points lost: {lost}; manifests left running: {running}; reference 0 everywhere; "
          + ("none" if not any(totals.values()) and not lost and not running else "LEAKS"))
    return 0


if __name__ == "__main__":
    run_main(main)
