"""The software stack a run measured on: kernel, its configuration, frequency scaling,
and the rest of the system's activity while the run went on.

Seed 000 (§5.3-5.4) explains one OS beating another on the same board by two things a
run rarely records: how busy the rest of the system is (forks since boot from /proc/stat,
Figs. 5.10 and 5.21) and how the kernel was configured (Fig. 5.17: cpufreq, its drivers
and governors). ``collect`` reads the first at the start of a run; ``Activity`` measures
what the rest of the system did during it.

Every reader takes ``root`` (``/`` on a real host) so tests hand it a tree shaped as the
kernel's. Every fact missing on a host is None (a container without cpufreq, a kernel
without /proc/config.gz): a missing fact is recorded as unknown, never guessed.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from shoal import proc

ROOT = Path("/")
# The configuration options that change what a benchmark measures: the tick, the
# preemption model and frequency scaling (the options of the thesis's Fig. 5.17 and
# their siblings).
CONFIG_PATTERN = re.compile(
    r"CONFIG_(HZ|HZ_PERIODIC|NO_HZ_IDLE|NO_HZ_FULL|PREEMPT_NONE|PREEMPT_VOLUNTARY|PREEMPT|"
    r"PREEMPT_RT|PREEMPT_DYNAMIC|PREEMPT_LAZY|CPU_FREQ|CPU_FREQ_STAT|CPU_FREQ_GOV_\w+|"
    r"CPU_FREQ_DEFAULT_GOV_\w+|X86_ACPI_CPUFREQ|X86_INTEL_PSTATE|X86_AMD_PSTATE|"
    r"ARM_\w*CPUFREQ\w*|CPU_IDLE|INTEL_IDLE)")
PREEMPT_MODELS = ("PREEMPT_RT", "PREEMPT_LAZY", "PREEMPT", "PREEMPT_VOLUNTARY", "PREEMPT_NONE")
CPUFREQ = Path("sys/devices/system/cpu")


def _text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(path: Path) -> int | None:
    text = _text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def kernel_release(root: Path = ROOT) -> str | None:
    return _text(root / "proc/sys/kernel/osrelease")


def distribution(root: Path = ROOT) -> dict[str, str | None]:
    """/etc/os-release's name, id and version (Clear Linux, Fedora and Yocto all write it)."""
    fields: dict[str, str] = {}
    for line in (_text(root / "etc/os-release") or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    return {"name": fields.get("PRETTY_NAME") or fields.get("NAME"), "id": fields.get("ID"),
            "version": fields.get("VERSION_ID")}


def kernel_config(root: Path = ROOT, release: str | None = None) -> tuple[dict[str, str], str | None]:
    """The options of ``CONFIG_PATTERN`` (``y``, ``m``, a number, or ``n`` for "is not set")
    and the file they came from: /proc/config.gz, else /boot/config-<release>."""
    release = release or kernel_release(root)
    candidates = [root / "proc/config.gz"] + ([root / f"boot/config-{release}"] if release else [])
    for path in candidates:
        try:
            raw = path.read_bytes()
            text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode()
        except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError):
            continue
        options: dict[str, str] = {}
        for line in text.splitlines():
            unset = re.fullmatch(r"# (CONFIG_\w+) is not set", line.strip())
            name, _, value = (unset.group(1), "", "n") if unset else line.strip().partition("=")
            if CONFIG_PATTERN.fullmatch(name):
                options[name] = value.strip('"')
        return options, "/" + str(path.relative_to(root))
    return {}, None


def preemption(options: dict[str, str], root: Path = ROOT) -> dict[str, object]:
    """The preemption model built in, and the one chosen at boot (``preempt=`` on the
    command line) where the kernel lets it be chosen (PREEMPT_DYNAMIC)."""
    built = next((m.lower().replace("_", "-") for m in PREEMPT_MODELS
                  if options.get(f"CONFIG_{m}") == "y"), None)
    dynamic = options.get("CONFIG_PREEMPT_DYNAMIC") == "y" if options else None
    boot = re.search(r"(?:^|\s)preempt=(\S+)", _text(root / "proc/cmdline") or "")
    if built is None:   # no configuration file: /proc/version names the model too
        version = _text(root / "proc/version") or ""
        built = next((m.lower().replace("_", "-") for m in ("PREEMPT_RT", "PREEMPT")
                      if re.search(rf"\b{m}\b", version)), None)
        dynamic = True if "PREEMPT_DYNAMIC" in version else dynamic
    return {"built": built, "dynamic": dynamic, "boot": boot.group(1) if boot else None}


def cpufreq(root: Path = ROOT) -> list[dict[str, object]]:
    """Per CPU: its scaling driver, governor and current/min/max frequency (Hz), from
    sysfs. Empty where the kernel exposes no cpufreq (many VMs and containers)."""
    cpus = []
    base = root / CPUFREQ
    names = sorted((p.name for p in base.glob("cpu[0-9]*")), key=lambda n: int(n[3:]))
    for name in names:
        policy = base / name / "cpufreq"
        if not policy.is_dir():
            continue
        khz = {key: _int(policy / f"scaling_{key}_freq") for key in ("cur", "min", "max")}
        cpus.append({"cpu": int(name[3:]), "driver": _text(policy / "scaling_driver"),
                     "governor": _text(policy / "scaling_governor"),
                     **{f"{key}_Hz": v * 1000 if v is not None else None for key, v in khz.items()}})
    return cpus


def forks_since_boot(root: Path = ROOT) -> int | None:
    """/proc/stat's ``processes``: forks since boot (the count of the thesis's Figs. 5.10, 5.21)."""
    for line in (_text(root / "proc/stat") or "").splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    return None


def uptime_s(root: Path = ROOT) -> float | None:
    text = _text(root / "proc/uptime")
    return float(text.split()[0]) if text else None


def collect(root: Path = ROOT) -> dict[str, object]:
    """The stack as it stands now (the start of a run)."""
    release = kernel_release(root)
    options, source = kernel_config(root, release)
    freq = cpufreq(root)
    forks, up = forks_since_boot(root), uptime_s(root)
    return {
        "kernel": release,
        "distribution": distribution(root),
        "kernel_config": options,
        "kernel_config_source": source,
        "hz": int(options["CONFIG_HZ"]) if options.get("CONFIG_HZ", "").isdigit() else None,
        "preemption": preemption(options, root),
        "cpufreq": freq,
        "cpufreq_driver": _one({c["driver"] for c in freq}),
        "governor": _one({c["governor"] for c in freq}),
        "forks_since_boot": forks,
        "uptime_s": up,
        "forks_per_s_since_boot": forks / up if forks is not None and up else None,
    }


def _one(values: set) -> object:
    """The value every CPU shares, "mixed" when they differ, None when none is known."""
    values.discard(None)
    return None if not values else values.pop() if len(values) == 1 else "mixed"


# -- what the rest of the system did during a run ---------------------------------------

def busy_ticks(root: Path = ROOT) -> int | None:
    """All CPUs' non-idle time from /proc/stat's ``cpu`` line (user .. steal, no guest:
    guest time is already in user)."""
    for line in (_text(root / "proc/stat") or "").splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            return sum(f[:3]) + sum(f[5:8])   # user nice system, irq softirq steal
    return None


@dataclass
class Activity:
    """The system's activity from ``start()`` to ``stop()``, the run's own processes left out.

    Background CPU is every process outside the run's tree (the measuring process and its
    descendants: mpiexec, its ranks, emulated devices' helpers). Per process it is the CPU
    each one used between the two readings; a process that began and ended between them
    is in no reading, so the total also comes from /proc/stat: all CPUs' busy time minus
    the run's own (its tree's and its waited-for children's)."""

    root: Path = ROOT
    me: int = field(default_factory=os.getpid)
    t0: float = 0.0
    forks0: int | None = None
    busy0: int | None = None
    table0: dict[int, proc.ProcInfo] = field(default_factory=dict)
    own0: set[int] = field(default_factory=set)

    @classmethod
    def start(cls, root: Path = ROOT, me: int | None = None) -> "Activity":
        self = cls(root, me if me is not None else os.getpid())
        self.t0 = uptime_s(root) or 0.0
        self.forks0, self.busy0 = forks_since_boot(root), busy_ticks(root)
        self.table0 = proc.process_table(root / "proc")
        self.own0 = {self.me} | proc.descendants(self.table0, {self.me})
        return self

    def stop(self, top: int = 8) -> dict[str, object]:
        tick = os.sysconf("SC_CLK_TCK")
        t1, forks1, busy1 = uptime_s(self.root) or 0.0, forks_since_boot(self.root), busy_ticks(self.root)
        table1 = proc.process_table(self.root / "proc")
        own = self.own0 | {self.me} | proc.descendants(table1, {self.me})
        # By command name: a distribution's daemons, or twelve workers of one program, as one.
        per_command: dict[str, list] = {}
        for pid, p in table1.items():
            if pid in own:
                continue
            before = self.table0.get(pid)
            same = before is not None and before.start == p.start
            used = p.utime + p.stime - (before.utime + before.stime if same else 0)
            if used > 0:
                entry = per_command.setdefault(p.comm, [0.0, 0])
                entry[0] += used / tick
                entry[1] += 1
        own_ticks = sum(self._own_ticks(pid, table1) for pid in own)
        wall = t1 - self.t0
        total = None
        if busy1 is not None and self.busy0 is not None:
            # /proc/stat counts in USER_HZ, as /proc/[pid]/stat does (both are clock ticks).
            total = max(0.0, (busy1 - self.busy0 - own_ticks) / tick)
        ranked = sorted(per_command.items(), key=lambda kv: -kv[1][0])[:top]
        cpus = len(os.sched_getaffinity(0)) if self.root == ROOT else None
        return {
            "duration_s": wall,
            "forks": forks1 - self.forks0 if forks1 is not None and self.forks0 is not None else None,
            "forks_per_s": ((forks1 - self.forks0) / wall
                            if wall > 0 and forks1 is not None and self.forks0 is not None else None),
            "background_cpu_s": total,
            # CPUs kept busy on average by the rest of the system (0.5: half of one CPU).
            "background_cpus": total / wall if total is not None and wall > 0 else None,
            "cpus": cpus,
            "background_top": [{"comm": comm, "processes": n, "cpu_s": cpu_s}
                               for comm, (cpu_s, n) in ranked],
        }

    def _own_ticks(self, pid: int, table1: dict[int, proc.ProcInfo]) -> int:
        """CPU a process of the run's tree used during the run (its waited-for children's too)."""
        now, before = table1.get(pid), self.table0.get(pid)
        if now is None:
            return 0   # ended: its time is in its parent's cutime/cstime
        same = before is not None and before.start == now.start

        def spent(p: proc.ProcInfo) -> int:
            return p.utime + p.stime + p.cutime + p.cstime
        return spent(now) - (spent(before) if same else 0)


if __name__ == "__main__":   # a cluster's other hosts answer with their own stack (over ssh)
    print(json.dumps(collect()))
