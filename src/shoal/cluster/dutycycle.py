"""CPU limits without a cgroup: hold each emulated device core to its budget from user space.

Where no cpu controller can be divided (an ordinary user without a delegated
cgroup), this controller runs beside the cluster and duty-cycles each device
core's processes with SIGSTOP/SIGCONT against the CPU time they used, the
method of Debian's ``cpulimit``, per device core rather than per process:

* members: the processes in a device's network namespace; a rank's core is
  the ``SHOAL_DEVICE_CORE`` its placement (``oncore``) set, the launcher's
  daemons share one more budget of a core;
* CPU time: every thread's run time from ``/proc/PID/task/TID/schedstat``
  (nanoseconds, not the 10 ms ticks of ``/proc/PID/stat``);
* a token bucket per core: it fills at the core's budget (CPUs) up to
  ``DEPTH_S`` of budget; the core is stopped when it is empty, continued when
  it is half full again. What a core overran between two looks is owed and
  paid back, so the average is the budget however coarse the looks.

    python -m shoal.cluster.dutycycle --cluster ID

Standard library only. It stops with SIGTERM (every process it stopped is
continued first) and when the cluster's record is gone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from shoal import environment

DEPTH_S = 0.02          # of budget: a core at 0.125 CPU holds 2.5 ms of CPU at most
SCAN_S = 0.1            # how often members are looked for
MIN_SLEEP_S = 0.0005
MAX_SLEEP_S = 0.005     # a core that is idle is looked at this often (it may start any time)
CORE_KEY = environment.DEVICE_CORE.name.encode() + b"="


class Core:
    """One budget: the processes on one device core (or a device's daemons)."""

    def __init__(self, budget_cpus: float) -> None:
        self.budget = budget_cpus
        self.depth = budget_cpus * DEPTH_S
        self.tokens = self.depth
        self.pids: set[int] = set()
        self.tids: dict[int, list[int]] = {}     # pid -> its threads
        self.seen: dict[int, int] = {}           # tid -> run ns at the last look
        self.stopped = False

    def used_s(self) -> float:
        """CPU seconds its threads ran since the last look."""
        used = 0
        for pid in list(self.pids):
            for tid in self.tids.get(pid, []):
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                        run = int(fh.read().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
                used += run - self.seen.get(tid, run)
                self.seen[tid] = run
        return used / 1e9

    def signal(self, sig: int) -> None:
        for pid in list(self.pids):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                self.pids.discard(pid)

    def step(self, dt: float) -> float:
        """Account ``dt`` seconds; stop or continue; return how long until it needs a look."""
        # Stopped, it is owed every moment it waits, however late this look comes (a busy
        # host may wake the controller late); running, unused budget is kept up to the depth.
        refilled = self.tokens + self.budget * dt
        self.tokens = (refilled if self.stopped else min(self.depth, refilled)) - self.used_s()
        if not self.stopped and self.tokens <= 0 and self.pids:
            self.signal(signal.SIGSTOP)
            self.stopped = True
        elif self.stopped and self.tokens >= self.depth / 2:
            self.signal(signal.SIGCONT)
            self.stopped = False
        if self.stopped:
            return (self.depth / 2 - self.tokens) / self.budget
        threads = max(1, sum(len(t) for t in self.tids.values()))
        return max(self.tokens, 0.0) / threads  # all its threads busy: empty by then


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _core_of(pid: int) -> int | None:
    """The device core a rank's placement gave it (None: a daemon of the device)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            for item in fh.read().split(b"\0"):
                if item.startswith(CORE_KEY):
                    return int(item[len(CORE_KEY):])
    except (OSError, ValueError):
        pass
    return None


class Controller:
    def __init__(self, devices: dict[int, tuple[float, int]]) -> None:
        # netns inode -> ([core 0, core 1, ...], daemons)
        self.devices = {inode: ([Core(b) for _ in range(cores)], Core(b))
                        for inode, (b, cores) in devices.items()}
        self.me = os.getpid()

    def cores(self) -> list[Core]:
        return [c for each, daemons in self.devices.values() for c in (*each, daemons)]

    def scan(self) -> None:
        """Find every process of every device, and which core's budget it runs on."""
        found: dict[int, Core] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == self.me:
                continue
            pid = int(entry)
            device = self.devices.get(_netns_inode(pid))
            if device is None:
                continue
            each, daemons = device
            core = _core_of(pid)
            found[pid] = each[core % len(each)] if core is not None else daemons
        held = set()  # stopped by a budget it has just left
        for core in self.cores():
            for pid in core.pids - {p for p, c in found.items() if c is core}:
                core.pids.discard(pid)   # ended, or moved to its own core at exec
                core.tids.pop(pid, None)
                if core.stopped:
                    held.add(pid)
        for pid, core in found.items():
            if pid not in core.pids:
                core.pids.add(pid)
                # It runs or waits as its new budget does.
                sig = signal.SIGSTOP if core.stopped else signal.SIGCONT if pid in held else None
                if sig is not None:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        core.pids.discard(pid)
                        continue
            try:
                core.tids[pid] = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                core.pids.discard(pid)
        for core in self.cores():  # forget the run times of threads that ended
            live = {tid for tids in core.tids.values() for tid in tids}
            core.seen = {tid: run for tid, run in core.seen.items() if tid in live}

    def release(self) -> None:
        for core in self.cores():
            core.signal(signal.SIGCONT)

    def run(self, alive) -> None:
        last = last_scan = time.monotonic()
        self.scan()
        while True:
            now = time.monotonic()
            if now - last_scan >= SCAN_S:
                if not alive():
                    return
                self.scan()
                last_scan = now
            dt, last = now - last, now
            wait = min((c.step(dt) for c in self.cores()), default=MAX_SLEEP_S)
            time.sleep(min(MAX_SLEEP_S, max(MIN_SLEEP_S, wait)))


def available() -> bool:
    """Whether this kernel gives per-thread CPU times in nanoseconds (CONFIG_SCHED_INFO)."""
    return os.path.exists(f"/proc/self/task/{os.getpid()}/schedstat")


def start(cluster_id: str, on_spawn=None) -> dict:
    """Start the controller of a cluster whose record is written; return {pid, start}.

    Like the link forwarder it runs in a session of its own, owned by the record:
    whoever removes the cluster stops it.
    """
    from shoal import proc
    from shoal.cluster import state, sysns
    from shoal.errors import ShoalError

    process = proc.start([sys.executable, "-m", "shoal.cluster.dutycycle", "--cluster", cluster_id],
                         env_add={environment.STATE_DIR.name: str(state.root())},
                         stdout=proc.PIPE, stderr=proc.TAIL)
    entry = {"pid": process.pid, "start": sysns.process_start_time(process.pid)}
    if on_spawn is not None:
        on_spawn(entry)
    line = process.popen.stdout.readline()
    if line.strip() != "ready":
        process.stop()
        raise ShoalError(f"the user-space CPU limit did not start: {process.stderr_tail() or 'no message'}")
    process.popen.stdout.close()
    process.detach()
    return entry


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m shoal.cluster.dutycycle")
    parser.add_argument("--cluster", required=True)
    args = parser.parse_args(argv)
    base = environment.STATE_DIR.get()
    record_path = os.path.join(base, args.cluster, "state.json")
    with open(record_path) as fh:
        record = json.load(fh)
    devices = {}
    for node in record["nodes"].values():
        inode = os.stat(os.path.join("/run/netns", node["netns"])).st_ino
        devices[inode] = (float(node["cpu_fraction"]), int(node["cores"]))
    controller = Controller(devices)

    def stop(*_):
        controller.release()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    try:
        controller.run(lambda: os.path.exists(record_path))
    finally:
        controller.release()


if __name__ == "__main__":
    main()
