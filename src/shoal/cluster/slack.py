"""Host-slack monitor: did the host give the emulated devices the CPU their profiles promise?

Sampled four times a second while an emulated cluster measures (as
Mininet-HiFi monitors its emulations' fidelity). Per device core: its tasks'
CPU time and the time they waited to run (``/proc/TID/schedstat``: run time,
run delay), and its cgroup's throttling (``cpu.stat``: periods, throttled
periods, throttled time). Per host: idle and steal (``/proc/stat``), run queue,
CPU pressure.

What changes a result is a device core getting less CPU than its budget while
it wanted to run. A core that was runnable for R seconds of a stretch (running
or waiting: run time + run delay) is owed at least ``budget x R`` of CPU by its
quota; its shortfall is what it got below that. Waiting behind other tasks
inside a period costs nothing when the quota is still used by the period's
end: on a host with 7 runnable tasks per CPU, a pinned core at 25 % got
0.749 s of CPU in 3 s, its exact budget, after waiting 1.48 s beyond its own
throttling (measured here). So contention and run queues are recorded, and a
stretch is flagged only when a device core's CPU fell short of its budget by
more than ``SHORTFALL_LIMIT``, or the host's steal exceeded ``STEAL_LIMIT``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SHORTFALL_LIMIT = 0.03
# The wait to run that any wake-up costs even on an idle host (an idle virtual CPU takes tens
# of microseconds to wake for a task; a futex wake across vCPUs, about 39 us): not contention.
WAKE_ALLOWANCE_S = 50e-6
STEAL_LIMIT = 0.02
INTERVAL_S = 0.25


@dataclass
class CoreSample:
    """One device core: its cgroup's throttling and its tasks' schedstat."""

    throttled_s: float = 0.0
    nr_throttled: int = 0
    nr_periods: int = 0
    # tid -> (run time s, run delay s, times it was put on a CPU): tasks come and go, so
    # stretches compare tid by tid.
    tasks: dict[int, tuple[float, float, int]] = field(default_factory=dict)


@dataclass
class Sample:
    t_mono_s: float
    busy_ticks: int
    idle_ticks: int
    steal_ticks: int
    procs_running: int
    pressure_some_s: float | None
    # per device: (CPU time s, throttled time s)
    devices: dict[str, tuple[float, float]] = field(default_factory=dict)
    # per device: one CoreSample per core
    cores: dict[str, list[CoreSample]] = field(default_factory=dict)


def read_host(proc: Path = Path("/proc")) -> tuple[int, int, int, int, float | None]:
    """(busy, idle, steal ticks, procs_running, CPU pressure "some" total in s or None)."""
    busy = idle = steal = running = 0
    for line in (proc / "stat").read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:]]
            # user nice system idle iowait irq softirq steal [guest guest_nice]
            idle = values[3] + values[4]
            steal = values[7] if len(values) > 7 else 0
            busy = sum(values[:8]) - idle - steal
        elif fields and fields[0] == "procs_running":
            running = int(fields[1])
    pressure = None
    try:
        for line in (proc / "pressure" / "cpu").read_text().splitlines():
            if line.startswith("some "):
                pressure = int(line.rsplit("total=", 1)[1]) / 1e6
    except (OSError, ValueError, IndexError):
        pass
    return busy, idle, steal, running, pressure


def _cpu_stat(group: Path) -> dict[str, str]:
    try:
        return dict(line.split() for line in (group / "cpu.stat").read_text().splitlines()
                    if len(line.split()) == 2)
    except OSError:
        return {}


def _throttling(stat: dict[str, str]) -> tuple[float, int, int]:
    """(throttled s, throttled periods, periods) from a v1 or v2 cpu.stat."""
    if "throttled_usec" in stat:        # v2
        throttled = int(stat["throttled_usec"]) / 1e6
    else:                               # v1, ns
        throttled = int(stat.get("throttled_time", 0)) / 1e9
    return throttled, int(stat.get("nr_throttled", 0)), int(stat.get("nr_periods", 0))


def read_group(paths: list[str]) -> tuple[float, float]:
    """(CPU time s, throttled time s) of a device from its cgroups (v1 or v2)."""
    usage = throttled = 0.0
    for path in paths:
        group = Path(path)
        stat = _cpu_stat(group)
        if "throttled_usec" in stat or "throttled_time" in stat:
            throttled = _throttling(stat)[0]
        if "usage_usec" in stat:
            usage = int(stat["usage_usec"]) / 1e6
        try:
            usage = int((group / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            pass
    return usage, throttled


def read_core(paths: list[str], proc: Path = Path("/proc")) -> CoreSample:
    """A device core's throttling and its tasks' run time and run delay."""
    core = CoreSample()
    for path in paths:
        group = Path(path)
        stat = _cpu_stat(group)
        if "nr_periods" in stat:
            core.throttled_s, core.nr_throttled, core.nr_periods = _throttling(stat)
        for listing in ("cgroup.threads", "tasks"):
            try:
                tids = [int(t) for t in (group / listing).read_text().split()]
            except (OSError, ValueError):
                continue
            for tid in tids:
                try:
                    run_ns, delay_ns, slices = (proc / str(tid) / "schedstat").read_text().split()[:3]
                except (OSError, ValueError):
                    continue  # the task ended between the listing and its schedstat
                core.tasks[tid] = (int(run_ns) / 1e9, int(delay_ns) / 1e9, int(slices))
            break
    return core


def sample(groups: dict[str, list[str]], proc: Path = Path("/proc"),
           cores: dict[str, list[list[str]]] | None = None) -> Sample:
    busy, idle, steal, running, pressure = read_host(proc)
    return Sample(time.monotonic(), busy, idle, steal, running, pressure,
                  {name: read_group(paths) for name, paths in groups.items()},
                  {name: [read_core(c, proc) for c in each] for name, each in (cores or {}).items()})


def core_delivery(first: CoreSample, last: CoreSample, quota_s: float) -> dict:
    """What a core was owed and got between two samples: CPU s, owed s, shortfall s.

    Owed: the time its tasks wanted to run (run time + run delay), but no more than
    its quota in each period it was active (the quota's timer counts those). A core
    that computes is owed its quota per period; one that wakes for a message is owed
    the moment it woke (a wake-up delayed by other work is contention too).
    """
    run = runnable = 0.0
    slices = 0
    for tid, (run_s, delay_s, put_on) in last.tasks.items():
        run0, delay0, put_on0 = first.tasks.get(tid, (0.0, 0.0, 0))  # born inside: all of it
        run += run_s - run0
        runnable += (run_s - run0) + (delay_s - delay0)
        slices += put_on - put_on0
    periods = last.nr_periods - first.nr_periods
    owed = min(runnable, quota_s * periods)
    # Every time a task was put on a CPU it may have waited as long as a wake-up takes on an
    # idle host: only what it waited beyond that is the host's contention.
    return {"cpu_s": run, "runnable_s": runnable, "owed_s": owed,
            "shortfall_s": max(0.0, owed - run - WAKE_ALLOWANCE_S * slices),
            "throttled_s": last.throttled_s - first.throttled_s,
            "nr_throttled": last.nr_throttled - first.nr_throttled, "nr_periods": periods}


def devices_over(samples: list[Sample], core_quotas: dict[str, float]) -> dict[str, dict]:
    """Per device, its cores' delivery summed over the consecutive samples of a stretch.

    A task's run time is read only while it lives: a pair of samples between which one of
    a core's tasks ended is left out for that core (its last run time is gone, but its
    periods are counted), so a stretch whose ranks live shorter than one sampling interval
    has no verdict (None) rather than a wrong one.
    """
    totals: dict[str, list[dict]] = {}
    for a, b in zip(samples, samples[1:]):
        for name, cores in b.cores.items():
            before = a.cores.get(name, [])
            if len(before) != len(cores) or not core_quotas.get(name):
                continue
            sums = totals.setdefault(name, [{} for _ in cores])
            for k, (x, y) in enumerate(zip(before, cores)):
                if set(x.tasks) - set(y.tasks):
                    continue  # a task ended in between
                for key, value in core_delivery(x, y, core_quotas[name]).items():
                    sums[k][key] = sums[k].get(key, 0) + value
    devices = {}
    for name, each in totals.items():
        each = [c for c in each if c]
        if not each:
            continue
        owed = sum(c["owed_s"] for c in each)
        short = sum(c["shortfall_s"] for c in each)
        devices[name] = {"cpu_s": sum(c["cpu_s"] for c in each), "owed_s": owed,
                         "shortfall": short / owed if owed > 0 else 0.0,
                         "throttled_s": sum(c["throttled_s"] for c in each),
                         "nr_throttled": sum(c["nr_throttled"] for c in each),
                         "nr_periods": sum(c["nr_periods"] for c in each)}
    return devices


def backgrounds_over(samples: list[Sample], core_quotas: dict[str, float],
                     backgrounds: dict[str, tuple[int, int]]) -> dict[str, dict]:
    """Per device that runs a background (``backgrounds``: device -> (its core, its pid)): the
    share of that core's budget the background took over a stretch, and what the ranks on the
    core lost to it.

    The ranks lose the background's CPU when the core's budget was not enough for both: when
    the ranks and the background together wanted (run time + run delay) at least the core's
    quota in the periods it was active, the ranks would have had what the background used
    (``ranks_lost``: its share of the budget). Ranks that wanted less (waiting for messages)
    lose nothing to it. Wake-up delays are not counted: on a set-top box core a decoder that
    preempts a rank 30 times a second would make them a quarter of the budget. Pairs of
    samples between which a task ended are left out, as in ``devices_over``.
    """
    sums: dict[str, dict[str, float]] = {}
    for a, b in zip(samples, samples[1:]):
        for name, (core, pid) in backgrounds.items():
            quota = core_quotas.get(name)
            if not quota or core >= len(b.cores.get(name, [])) or core >= len(a.cores.get(name, [])):
                continue
            x, y = a.cores[name][core], b.cores[name][core]
            if set(x.tasks) - set(y.tasks):
                continue  # a task ended in between
            delivery = core_delivery(x, y, quota)
            total = sums.setdefault(name, {})
            for tid, (run_s, delay_s, put_on) in y.tasks.items():
                run0, delay0, put_on0 = x.tasks.get(tid, (0.0, 0.0, 0))
                kind = "background" if tid == pid else "ranks"
                total[f"{kind}_cpu_s"] = total.get(f"{kind}_cpu_s", 0.0) + run_s - run0
                total[f"{kind}_runnable_s"] = total.get(f"{kind}_runnable_s", 0.0) + \
                    (run_s - run0) + (delay_s - delay0)
                total[f"{kind}_slices"] = total.get(f"{kind}_slices", 0.0) + put_on - put_on0
            total["budget_s"] = total.get("budget_s", 0.0) + quota * delivery["nr_periods"]
    out = {}
    for name, total in sums.items():
        budget = total.get("budget_s", 0.0)
        if budget <= 0:
            continue
        share = total.get("background_cpu_s", 0.0) / budget
        wanted = total.get("ranks_runnable_s", 0.0) + total.get("background_runnable_s", 0.0)
        out[name] = {"share": share, "ranks_cpu_s": total.get("ranks_cpu_s", 0.0),
                     "ranks_wanted_s": total.get("ranks_runnable_s", 0.0), "budget_s": budget,
                     "ranks_lost": share if wanted >= budget else 0.0,
                     "core": backgrounds[name][0]}
    return out


def judge(first: Sample, last: Sample, host_cpus: int,
          budgets: dict[str, float] | None = None, peak_running: int | None = None,
          core_quotas: dict[str, float] | None = None,
          stretch: list[Sample] | None = None,
          backgrounds: dict[str, tuple[int, int]] | None = None) -> dict:
    """Summarise the stretch between two samples; ``ok`` False when a device was short of CPU."""
    wall = max(1e-9, last.t_mono_s - first.t_mono_s)
    ticks = max(1, (last.busy_ticks - first.busy_ticks) + (last.idle_ticks - first.idle_ticks)
                + (last.steal_ticks - first.steal_ticks))
    idle = (last.idle_ticks - first.idle_ticks) / ticks
    steal = (last.steal_ticks - first.steal_ticks) / ticks
    throttled = sum(last.devices[n][1] - first.devices[n][1]
                    for n in last.devices if n in first.devices)
    contention = None
    if first.pressure_some_s is not None and last.pressure_some_s is not None:
        pressure = last.pressure_some_s - first.pressure_some_s
        contention = max(0.0, pressure - throttled) / wall
    quota_use = {}
    for name, budget in (budgets or {}).items():
        if name in first.devices and name in last.devices and budget > 0:
            used = last.devices[name][0] - first.devices[name][0]
            quota_use[name] = used / (budget * wall)
    devices = devices_over(stretch or [first, last], core_quotas or {})
    running = peak_running if peak_running is not None else max(first.procs_running,
                                                                 last.procs_running)
    reasons = []
    for name, device in devices.items():
        if device["shortfall"] > SHORTFALL_LIMIT:
            reasons.append(f"{name} got {1 - device['shortfall']:.0%} of its CPU budget")
    if steal > STEAL_LIMIT:
        reasons.append(f"steal {steal:.0%}")
    shortfall = max((d["shortfall"] for d in devices.values()), default=None)
    verdict = {"ok": not reasons, "reasons": reasons, "wall_s": wall, "idle": idle, "steal": steal,
               "contention": contention, "throttled_s": throttled, "peak_running": running,
               "quota_use": quota_use, "devices": devices, "shortfall": shortfall}
    if backgrounds:
        verdict["backgrounds"] = backgrounds_over(stretch or [first, last], core_quotas or {},
                                                  backgrounds)
        # A core held from user space (no CPU cgroup: an ordinary user's) has no quota and no
        # per-core run delays to read: what its background took is not measured there. A core
        # in a cgroup whose stretch held no pair of samples to judge (a point shorter than the
        # sampling interval) has no verdict, as its delivery has none.
        verdict["backgrounds_unmeasured"] = sorted(name for name in backgrounds
                                                   if not (core_quotas or {}).get(name))
    return verdict


class Monitor:
    """Samples in a thread; ``between(t0, t1)`` judges any stretch inside the run."""

    def __init__(self, groups: dict[str, list[str]], host_cpus: int,
                 budgets: dict[str, float] | None = None, interval_s: float = INTERVAL_S,
                 proc: Path = Path("/proc"), cores: dict[str, list[list[str]]] | None = None,
                 core_quotas: dict[str, float] | None = None,
                 backgrounds: dict[str, tuple[int, int]] | None = None) -> None:
        self.groups, self.host_cpus, self.budgets = groups, host_cpus, budgets or {}
        # per device running a background: (the core it runs on, its pid)
        self.backgrounds = backgrounds or {}
        # per device: each core's quota per period (s)
        self.cores, self.core_quotas = cores or {}, core_quotas or {}
        self.interval_s, self.proc = interval_s, proc
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="shoal-slack", daemon=True)

    def __enter__(self) -> "Monitor":
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _take(self) -> None:
        try:
            s = sample(self.groups, self.proc, self.cores)
        except OSError:
            return
        with self._lock:
            self.samples.append(s)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def between(self, t0_mono_s: float, t1_mono_s: float) -> dict | None:
        """Judge the samples that bracket [t0, t1] (None before two samples exist)."""
        self._take()
        with self._lock:
            samples = list(self.samples)
        before = [s for s in samples if s.t_mono_s <= t0_mono_s]
        first = before[-1] if before else samples[0]
        after = [s for s in samples if s.t_mono_s >= t1_mono_s]
        last = after[0] if after else samples[-1]
        if last is first:
            return None
        stretch = [s for s in samples if first.t_mono_s <= s.t_mono_s <= last.t_mono_s]
        # A single sample's run queue is noisy: judge by the median of the stretch.
        inside = sorted(s.procs_running for s in stretch)
        peak = inside[len(inside) // 2] if inside else None
        return judge(first, last, self.host_cpus, self.budgets, peak, self.core_quotas, stretch,
                     self.backgrounds)


def background_columns(verdict: dict | None) -> dict:
    """The results.csv columns of the devices' backgrounds over one point: "short" when the
    ranks on a core that runs one got less than they wanted of the budget by more than
    ``SHORTFALL_LIMIT`` (which devices in the note), the largest share of a core's budget a
    background took; "unmeasured" (and why) where no device's core has a CPU cgroup to read;
    none where no device runs one or the point has no verdict (a run made before these
    columns existed resumes with its own header)."""
    backgrounds = (verdict or {}).get("backgrounds")
    unmeasured = (verdict or {}).get("backgrounds_unmeasured") or []
    if not backgrounds and unmeasured:
        return {"background_slack": "unmeasured",
                "background_note": (f"{len(unmeasured)} " + ("device's background" if len(unmeasured) == 1
                                                                else "devices' backgrounds")
                                    + " not measured: their cores are held from user space, without "
                                      "a CPU cgroup whose run delays show what the ranks lost to them"),
                "background_cpu_share": None}
    if not backgrounds:
        return {}
    short = sorted((name for name, b in backgrounds.items() if b["ranks_lost"] > SHORTFALL_LIMIT),
                   key=lambda name: -backgrounds[name]["ranks_lost"])
    note = ""
    if short:
        worst = backgrounds[short[0]]
        note = (f"{len(short)} of {len(backgrounds)} devices' ranks short beside their background; "
                f"{short[0]} core {worst['core']}: its ranks wanted all of the core's budget and "
                f"its background took {worst['share']:.0%} of it")
    return {"background_slack": "short" if short else "ok", "background_note": note,
            "background_cpu_share": max(b["share"] for b in backgrounds.values())}


def row_columns(verdict: dict | None) -> dict:
    """The results.csv columns of one point's verdict: the flag, why, and the devices'
    throttling and CPU shortfall over the point (SI: seconds, fractions); then the
    backgrounds' (``background_columns``)."""
    if verdict is None:
        return {"host_slack": "", "host_slack_note": "", "cpu_throttled_s": "",
                "cpu_throttled_periods": "", "cpu_periods": "", "cpu_shortfall": ""}
    devices = verdict.get("devices", {}).values()
    return {**background_columns(verdict), "host_slack": "ok" if verdict["ok"] else "short",
            "host_slack_note": "; ".join(verdict["reasons"]),
            "cpu_throttled_s": sum(d["throttled_s"] for d in devices) if devices else verdict["throttled_s"],
            "cpu_throttled_periods": sum(d["nr_throttled"] for d in devices) if devices else "",
            "cpu_periods": sum(d["nr_periods"] for d in devices) if devices else "",
            "cpu_shortfall": verdict["shortfall"] if verdict.get("shortfall") is not None else ""}
