"""What the kernel's timers are on this host: the facts a sleep's accuracy depends on.

Seed 003 (§3, Experiment C) explains its boards' sleep accuracy by their kernels:
the tick rate (CONFIG_HZ, 250 on a standard kernel, 1000 on a low-latency one), the
preemption model (standard, PREEMPT, PREEMPT-RT) and the clock resolution that
/proc/timer_list shows. Each fact is read where the kernel publishes it, with the
place it came from; a fact nobody can read (no config, /proc/timer_list is root's)
is None rather than guessed.
"""

from __future__ import annotations

import gzip
import platform
import re
import time
from pathlib import Path

# CONFIG_PREEMPT_* choice -> the model's name, as the kernel's own preempt= option calls it.
_MODELS = (("PREEMPT_RT", "rt"), ("PREEMPT_LAZY", "lazy"), ("PREEMPT", "full"),
           ("PREEMPT_VOLUNTARY", "voluntary"), ("PREEMPT_NONE", "none"))


def kernel_config(root: Path = Path("/"), release: str | None = None) -> dict[str, str]:
    """The running kernel's build options (``CONFIG_HZ`` -> "250"), from /proc/config.gz or
    /boot/config-RELEASE; empty when neither is readable."""
    release = release or platform.release()
    text = ""
    try:
        text = gzip.decompress((root / "proc/config.gz").read_bytes()).decode(errors="replace")
    except (OSError, EOFError, gzip.BadGzipFile):
        try:
            text = (root / f"boot/config-{release}").read_text(errors="replace")
        except OSError:
            return {}
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.startswith("CONFIG_"):
            found[key[len("CONFIG_"):]] = value.strip('"')
    return found


def preemption(config: dict[str, str], version: str, root: Path = Path("/")) -> tuple[str | None, str]:
    """(model, where it was read): "none", "voluntary", "full", "lazy" or "rt", with
    " (dynamic)" when the kernel can switch at boot (PREEMPT_DYNAMIC)."""
    dynamic = config.get("PREEMPT_DYNAMIC") == "y" or "PREEMPT_DYNAMIC" in version
    suffix = " (dynamic)" if dynamic else ""
    if config.get("PREEMPT_RT") == "y" or "PREEMPT_RT" in version:
        return "rt", "config" if config else "uname -v"
    if dynamic:   # the model in force: debugfs shows it in parentheses, preempt= chooses it
        for place, pattern in (("sys/kernel/debug/sched/preempt", r"\((\w+)\)"),
                               ("proc/cmdline", r"(?:^|\s)preempt=(\w+)")):
            try:
                found = re.search(pattern, (root / place).read_text())
            except OSError:
                continue
            if found:
                return found.group(1) + suffix, f"/{place}"
    for option, model in _MODELS:
        if config.get(option) == "y":
            return model + suffix, "config"
    if "PREEMPT" in version.split():
        return "full" + suffix, "uname -v"
    return (None, "") if not version else ("none" + suffix, "uname -v")


def timer_list(root: Path = Path("/")) -> dict[str, object]:
    """The hrtimer resolution (s) and clock event device from /proc/timer_list (root only)."""
    try:
        text = (root / "proc/timer_list").read_text(errors="replace")
    except OSError:
        return {}
    found: dict[str, object] = {}
    resolution = re.search(r"\.resolution:\s*(\d+)\s*nsecs", text)
    if resolution:
        found["clock_resolution_s"] = int(resolution.group(1)) * 1e-9
    device = re.search(r"Clock Event Device:\s*(?!<NULL>)(\S+)", text)
    if device:
        found["clock_event_device"] = device.group(1)
    found["high_resolution"] = "hrtimer_interrupt" in text
    return found


def facts(root: Path = Path("/"), release: str | None = None, version: str | None = None) -> dict[str, object]:
    """The host's kernel timer facts, each with its source; SI units (s, Hz). ``root``,
    ``release`` and ``version`` (``uname -r``, ``uname -v``) default to this host's."""
    release, version = release or platform.release(), version if version is not None else platform.version()
    config = kernel_config(root, release)
    model, model_source = preemption(config, version, root)
    timers = timer_list(root)
    if "clock_resolution_s" in timers:
        resolution, resolution_source = timers["clock_resolution_s"], "/proc/timer_list"
    else:
        resolution, resolution_source = time.clock_getres(time.CLOCK_MONOTONIC), "clock_getres"
    hz = config.get("HZ")
    return {
        "kernel": release, "kernel_version": version,
        "hz_Hz": int(hz) if hz and hz.isdigit() else None,
        "hz_source": "config" if hz else "",
        "preemption": model, "preemption_source": model_source,
        "clock_resolution_s": resolution, "clock_resolution_source": resolution_source,
        "clock_event_device": timers.get("clock_event_device"),
        "high_resolution_timers": timers.get("high_resolution",
                                             config.get("HIGH_RES_TIMERS") == "y" if config else None),
        "no_hz": ("full" if config.get("NO_HZ_FULL") == "y" else "idle" if config.get("NO_HZ_IDLE") == "y"
                  else "periodic" if config else None),
    }
