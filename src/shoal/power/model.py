"""Modelled power from CPU utilisation, for devices without a sensor.

    P = P_idle + u * (P_busy - P_idle),   u in [0, 1]

(P = P_idle when idle; the linear model of SimGrid's host energy plugin with
its Epsilon equal to Idle). ``u`` over each interval comes from

* ``/proc/stat`` (the whole machine, or the network namespace's /proc):
  busy = user + nice + system + irq + softirq, out of busy + idle + iowait
  (steal is another guest's time and is left out);
* a cgroup, for an emulated device limited to ``cores`` CPUs: v2
  ``cpu.stat`` ``usage_usec`` or v1 ``cpuacct.usage`` (ns); u is CPU time
  over interval x cores;
* a network namespace, for an emulated device without a cgroup (an ordinary
  user without a delegated one): the CPU time (user + system, own and of
  reaped children) of the processes inside it, from ``/proc/PID/stat``. A
  process that leaves takes its time with it, so a falling total counts as idle.

With ``link_J_per_B`` each byte sent or received on the namespace's
non-loopback interfaces (``/proc/net/dev``) adds that energy, on a second
channel (domain ``link``).

The source keeps a cumulative modelled energy (J) per channel, so the
sampler treats it as a counter. Every channel is labelled ``modelled``.
The numbers are plain (idle_W, busy_W, cores): device profiles pass them in;
without them the model is the built-in profile ``DEFAULT_PROFILE``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from shoal import proc as processes
from shoal.power.base import ENERGY, MODELLED, NAN, Channel, Source, SourceUnavailable
from shoal.power.sysfs import SensorError, proc_root, read_text, sysfs_root

#: The device whose watts the model takes when none are given (shoal/data/profiles.toml).
DEFAULT_PROFILE = "minnowboard"


def default_watts() -> tuple[str, float, float]:
    """(description, idle W, busy W) of the default device."""
    from shoal.profiles import builtin

    profile = builtin(DEFAULT_PROFILE)
    return profile.description or profile.name, profile.idle_W, profile.busy_W


def linear_energy_J(idle_W: float, busy_W: float, cores: float, wall_s: float, cpu_s: float) -> float:
    """The model integrated over a window: idle power for ``wall_s`` plus the busy share of ``cpu_s``
    CPU-seconds on a device of ``cores`` cores (u = cpu_s / (wall_s x cores))."""
    return idle_W * wall_s + (busy_W - idle_W) * cpu_s / cores


def proc_stat_times() -> tuple[int, int]:
    """(busy, total) jiffies of the ``cpu`` line of /proc/stat."""
    path = proc_root() / "stat"
    text = read_text(path)
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:]]
            fields += [0] * (8 - len(fields))
            user, nice, system, idle, iowait, irq, softirq = fields[:7]
            busy = user + nice + system + irq + softirq
            return busy, busy + idle + iowait
    raise SensorError(0, f"{path}: no 'cpu' line")


def find_cgroup(group: str) -> tuple[Path, str]:
    """The usage file of a cgroup and its version ('v2' or 'v1').

    ``group`` is a path relative to the cgroup mount (``shoal/dev0``) or an
    absolute directory. v2 is tried first (unified mount, or the hybrid
    ``unified`` mount), then v1's cpuacct (or cpu,cpuacct) hierarchy.
    """
    root = sysfs_root() / "fs" / "cgroup"
    rel = group.strip("/")
    candidates: list[tuple[Path, str]] = []
    if os.path.isabs(group):
        candidates += [(Path(group) / "cpu.stat", "v2"), (Path(group) / "cpuacct.usage", "v1")]
    candidates += [(root / rel / "cpu.stat", "v2"), (root / "unified" / rel / "cpu.stat", "v2"),
                   (root / "cpuacct" / rel / "cpuacct.usage", "v1"),
                   (root / "cpu,cpuacct" / rel / "cpuacct.usage", "v1")]
    for path, version in candidates:
        if path.is_file():
            if version == "v2" and "usage_usec" not in read_text(path):
                continue  # a v2 group without the cpu controller's usage
            return path, version
    raise SourceUnavailable(f"cgroup {group!r} not found: looked for {candidates[0][0]} and "
                            f"{candidates[2][0]}; create the device's cgroup first")


def cgroup_cpu_seconds(path: Path, version: str) -> float:
    """Cumulative CPU time of a cgroup, in seconds."""
    if version == "v1":
        return int(read_text(path)) / 1e9
    for line in read_text(path).splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise SensorError(0, f"{path}: no usage_usec")


def netns_cpu_seconds(netns: str) -> float:
    """CPU time of the processes whose network namespace is the one bound at ``netns``."""
    try:
        inode = os.stat(netns).st_ino
    except OSError as exc:
        raise SensorError(exc.errno or 0, f"{netns}: {exc.strerror}") from None
    proc_dir = proc_root()
    seconds = 0.0
    for entry in os.scandir(proc_dir):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(f"{entry.path}/ns/net").st_ino != inode:
                continue
        except OSError:
            continue  # gone, or not ours to look at
        info = processes.stat(entry.name, proc_dir)
        if info is not None:
            seconds += info.cpu_with_children_s
    return seconds


def net_bytes() -> int:
    """Bytes received plus sent on every non-loopback interface."""
    path = proc_root() / "net" / "dev"
    total = 0
    for line in read_text(path).splitlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            continue
        fields = rest.split()
        if len(fields) >= 9:
            total += int(fields[0]) + int(fields[8])
    return total


class ModelSource(Source):
    """The utilisation model as a cumulative energy counter per channel."""

    def __init__(self, idle_W: float | None = None, busy_W: float | None = None, *,
                 cores: float | None = None, cgroup: str | None = None, netns: str | None = None,
                 link_J_per_B: float | None = None, node: str = "", domain: str = "board") -> None:
        super().__init__(label="model", default_period_s=0.1)
        if idle_W is None or busy_W is None:
            _, idle_W, busy_W = default_watts()
        if idle_W < 0 or busy_W < idle_W:
            raise SourceUnavailable(f"model needs 0 <= idle_W <= busy_W, got idle {idle_W} W, busy {busy_W} W")
        self.idle_W, self.busy_W = float(idle_W), float(busy_W)
        self.link_J_per_B = link_J_per_B
        if cgroup:
            self._usage_path, self._cg_version = find_cgroup(cgroup)
            self.cores = float(cores or os.cpu_count() or 1)
            self._util = self._cgroup_util
            what = f"cgroup {cgroup} ({self._cg_version}, {self.cores:g} cores)"
        elif netns:
            self._usage_path, self._cg_version = Path(netns), "netns"
            self.cores = float(cores or os.cpu_count() or 1)
            self._util = self._cgroup_util
            self.min_period_s = 1.0 / os.sysconf("SC_CLK_TCK")
            what = f"the processes of network namespace {netns} ({self.cores:g} cores)"
        else:
            self._usage_path = None
            self.cores = float(cores or os.cpu_count() or 1)
            self._util = self._proc_util
            # /proc/stat counts in clock ticks (USER_HZ, 100 per second): finer
            # intervals would see only 0% or 100%.
            self.min_period_s = 1.0 / os.sysconf("SC_CLK_TCK")
            what = f"{proc_root() / 'stat'}"
        self.describe = f"P = {self.idle_W:g} W + u x ({self.busy_W:g} - {self.idle_W:g}) W, u from {what}"
        self.channels.append(Channel(source=self.label, name="cpu", domain=domain, kind=MODELLED,
                                     quantity=ENERGY, scale=1.0, node=node,
                                     max_power_W=self.busy_W))
        if link_J_per_B is not None:
            self.channels.append(Channel(source=self.label, name="link", domain="link", kind=MODELLED,
                                         quantity=ENERGY, scale=1.0, node=node))
        self._energy = [0.0] * len(self.channels)
        try:
            self._prev_t = time.monotonic()
            self._prev_usage = self._usage()
            self._prev_bytes = net_bytes() if link_J_per_B is not None else 0
        except SensorError as exc:
            raise SourceUnavailable(f"model cannot read CPU utilisation: {exc}") from None

    def _usage(self):
        if self._usage_path is None:
            return proc_stat_times()
        if self._cg_version == "netns":
            return netns_cpu_seconds(str(self._usage_path))
        return cgroup_cpu_seconds(self._usage_path, self._cg_version)

    def _proc_util(self, prev, now, dt: float) -> float:
        busy, total = now[0] - prev[0], now[1] - prev[1]
        return busy / total if total > 0 else 0.0

    def _cgroup_util(self, prev, now, dt: float) -> float:
        return (now - prev) / (dt * self.cores) if dt > 0 else 0.0

    def known_idle_W(self) -> dict[str, float]:
        """The model's idle draw, so energy above idle needs no idle measurement."""
        return {self.channels[0].key: self.idle_W}

    def power_at(self, u: float) -> float:
        """Modelled watts at utilisation u (clamped to [0, 1])."""
        u = min(1.0, max(0.0, u))
        return self.idle_W if u == 0.0 else self.idle_W + u * (self.busy_W - self.idle_W)

    def poll(self) -> list[tuple[float, list[float]]]:
        # The reading's timestamp must be the one the model integrated up to.
        t = time.monotonic()
        return [(t, self._read_at(t))]

    def read(self) -> list[float]:
        return self._read_at(time.monotonic())

    def _read_at(self, t: float) -> list[float]:
        try:
            usage = self._usage()
        except SensorError as exc:
            self.fault("cpu", exc)
            return [NAN] * len(self.channels)
        dt = t - self._prev_t
        self._energy[0] += self.power_at(self._util(self._prev_usage, usage, dt)) * dt
        self._prev_t, self._prev_usage = t, usage
        if self.link_J_per_B is not None:
            try:
                moved = net_bytes()
                self._energy[1] += max(0, moved - self._prev_bytes) * self.link_J_per_B
                self._prev_bytes = moved
            except SensorError as exc:
                self.fault("link", exc)
                return [self._energy[0], NAN]
        return list(self._energy)
