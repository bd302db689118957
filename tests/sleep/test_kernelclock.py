"""The kernel's timer facts read from trees shaped exactly like the kernel's files."""

from __future__ import annotations

import gzip
from pathlib import Path

from shoal.wait import kernelclock

# /proc/timer_list as a 6.x kernel writes it (abridged: the same lines, fewer timers and CPUs).
TIMER_LIST = """Timer List Version: v0.10
HRTIMER_MAX_CLOCK_BASES: 8
now at 10642960363961 nsecs

cpu: 0
 clock 0:
  .base:       0000000030625641
  .index:      0
  .resolution: 1 nsecs
  .offset:     0 nsecs
active timers:
 #0: <0000000081078da2>, tick_nohz_handler, S:01
 # expires at 10642964000000-10642964000000 nsecs [in 3636039 to 3636039 nsecs]

Tick Device: mode:     1
Broadcast device
Clock Event Device: <NULL>
tick_broadcast_mask: 0
tick_broadcast_oneshot_mask: 0

Tick Device: mode:     1
Per CPU device: 0
Clock Event Device: lapic-deadline
 max_delta_ns:   1101273458
 min_delta_ns:   1000
 mode:           3
 event_handler:  hrtimer_interrupt
"""
# The same file on a kernel without high-resolution timers: jiffy resolution at HZ=1000.
TIMER_LIST_LOWRES = TIMER_LIST.replace(".resolution: 1 nsecs", ".resolution: 1000000 nsecs") \
    .replace("hrtimer_interrupt", "tick_handle_periodic")

CONFIG_DYNAMIC_NONE = """#
# Automatically generated file; DO NOT EDIT.
#
CONFIG_NO_HZ_COMMON=y
CONFIG_NO_HZ_IDLE=y
CONFIG_HIGH_RES_TIMERS=y
CONFIG_PREEMPT_BUILD=y
CONFIG_PREEMPT_NONE=y
# CONFIG_PREEMPT_VOLUNTARY is not set
# CONFIG_PREEMPT is not set
CONFIG_PREEMPT_DYNAMIC=y
CONFIG_HZ_250=y
CONFIG_HZ=250
"""
# A low-latency board kernel as seed 003's Parallella and Odroid XU4 ran (PREEMPT, 1000 Hz).
CONFIG_LOWLATENCY = """CONFIG_NO_HZ_IDLE=y
CONFIG_PREEMPT=y
CONFIG_HZ_1000=y
CONFIG_HZ=1000
"""


def _tree(root: Path, config: str | None = None, boot_config: str | None = None, timer_list: str | None = None,
          cmdline: str | None = None, debugfs: str | None = None) -> Path:
    (root / "proc").mkdir(parents=True)
    if config is not None:
        (root / "proc/config.gz").write_bytes(gzip.compress(config.encode()))
    if boot_config is not None:
        (root / "boot").mkdir()
        (root / "boot/config-6.1.0-13-amd64").write_text(boot_config)
    if timer_list is not None:
        (root / "proc/timer_list").write_text(timer_list)
    if cmdline is not None:
        (root / "proc/cmdline").write_text(cmdline)
    if debugfs is not None:
        (root / "sys/kernel/debug/sched").mkdir(parents=True)
        (root / "sys/kernel/debug/sched/preempt").write_text(debugfs)
    return root


def test_a_dynamic_kernel_reads_its_model_from_debugfs_then_cmdline_then_config(tmp_path):
    version = "#1 SMP PREEMPT_DYNAMIC Debian 6.1.55-1"
    both = _tree(tmp_path / "a", CONFIG_DYNAMIC_NONE, timer_list=TIMER_LIST,
                 cmdline="BOOT_IMAGE=/vmlinuz root=/dev/vda1 preempt=voluntary\n",
                 debugfs="none voluntary (full) lazy\n")
    got = kernelclock.facts(both, "6.1.0-13-amd64", version)
    assert (got["preemption"], got["preemption_source"]) == ("full (dynamic)", "/sys/kernel/debug/sched/preempt")
    cmdline = _tree(tmp_path / "b", CONFIG_DYNAMIC_NONE, cmdline="ro quiet preempt=voluntary\n")
    assert kernelclock.facts(cmdline, "6.1.0-13-amd64", version)["preemption"] == "voluntary (dynamic)"
    config = _tree(tmp_path / "c", CONFIG_DYNAMIC_NONE, cmdline="ro quiet\n")
    got = kernelclock.facts(config, "6.1.0-13-amd64", version)
    assert (got["preemption"], got["preemption_source"]) == ("none (dynamic)", "config")
    assert got["hz_Hz"] == 250 and got["no_hz"] == "idle"


def test_timer_list_gives_resolution_and_clock_event_device(tmp_path):
    root = _tree(tmp_path / "hi", CONFIG_DYNAMIC_NONE, timer_list=TIMER_LIST)
    got = kernelclock.facts(root, "6.1.0-13-amd64", "#1 SMP PREEMPT_DYNAMIC")
    assert got["clock_resolution_s"] == 1e-9 and got["clock_resolution_source"] == "/proc/timer_list"
    assert got["clock_event_device"] == "lapic-deadline"     # the <NULL> broadcast device skipped
    assert got["high_resolution_timers"] is True
    low = _tree(tmp_path / "low", CONFIG_LOWLATENCY, timer_list=TIMER_LIST_LOWRES)
    got = kernelclock.facts(low, "4.14.0", "#1 SMP PREEMPT Thu Jan 1 2019")
    assert got["clock_resolution_s"] == 1e-3 and got["high_resolution_timers"] is False
    assert (got["hz_Hz"], got["preemption"]) == (1000, "full")


def test_boot_config_is_read_when_proc_has_none_and_unknowns_stay_none(tmp_path):
    root = _tree(tmp_path / "boot", boot_config=CONFIG_LOWLATENCY)
    got = kernelclock.facts(root, "6.1.0-13-amd64", "#1 SMP PREEMPT")
    assert (got["hz_Hz"], got["preemption"], got["preemption_source"]) == (1000, "full", "config")
    # Nothing readable (no config, /proc/timer_list is root's): HZ unknown, not guessed; the
    # model from uname -v, the resolution from clock_getres.
    bare = _tree(tmp_path / "bare")
    got = kernelclock.facts(bare, "6.1.0-13-amd64", "#1 SMP PREEMPT_RT")
    assert got["hz_Hz"] is None and got["high_resolution_timers"] is None and got["no_hz"] is None
    assert (got["preemption"], got["preemption_source"]) == ("rt", "uname -v")
    assert got["clock_resolution_source"] == "clock_getres" and got["clock_resolution_s"] > 0
    assert kernelclock.facts(bare, "6.1.0", "#1 SMP")["preemption"] == "none"
