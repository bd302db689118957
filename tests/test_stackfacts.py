"""The stack facts of a run, read from trees shaped as the kernel's /proc and sysfs and as a
distribution's /etc and /boot (the files' real formats: proc(5), the cpufreq sysfs ABI)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from shoal import stackfacts
from shoal.runs.store import Run

# A Fedora-like host: the options of the thesis's Fig. 5.17 and a voluntary-preemption kernel.
CONFIG = """\
#
# Automatically generated file; DO NOT EDIT.
# Linux/x86 6.5.6 Kernel Configuration
#
CONFIG_HZ_PERIODIC=y
# CONFIG_NO_HZ_IDLE is not set
CONFIG_PREEMPT_VOLUNTARY=y
# CONFIG_PREEMPT is not set
# CONFIG_PREEMPT_DYNAMIC is not set
CONFIG_HZ_1000=y
CONFIG_HZ=1000
CONFIG_CPU_FREQ=y
CONFIG_CPU_FREQ_STAT=y
CONFIG_X86_ACPI_CPUFREQ=y
CONFIG_X86_INTEL_PSTATE=y
CONFIG_CPU_FREQ_GOV_ONDEMAND=y
CONFIG_CPU_FREQ_GOV_PERFORMANCE=y
CONFIG_CPU_FREQ_DEFAULT_GOV_ONDEMAND=y
CONFIG_NET=y
CONFIG_LOCALVERSION=""
"""
OS_RELEASE = 'NAME="Fedora Linux"\nVERSION="38 (Thirty Eight)"\nID=fedora\nVERSION_ID=38\n' \
             'PRETTY_NAME="Fedora Linux 38 (Thirty Eight)"\n'


def proc_stat(busy: int, idle: int, forks: int) -> str:
    """/proc/stat as proc(5) shows it: cpu lines in USER_HZ ticks, then counters."""
    return (f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n"
            f"cpu0 {busy // 2} 0 0 {idle // 2} 0 0 0 0 0 0\n"
            f"cpu1 {busy - busy // 2} 0 0 {idle - idle // 2} 0 0 0 0 0 0\n"
            "intr 123 0 0\nctxt 456789\nbtime 1700000000\n"
            f"processes {forks}\nprocs_running 1\nprocs_blocked 0\nsoftirq 1 0 0\n")


def pid_stat(pid: int, comm: str, ppid: int, utime: int, stime: int, start: int,
             cutime: int = 0, cstime: int = 0) -> str:
    """/proc/[pid]/stat: 52 fields; comm in parentheses, utime..cstime are fields 14-17,
    starttime field 22 (proc(5))."""
    after = ["S", ppid, pid, pid, 0, -1, 4194560, 100, 0, 0, 0, utime, stime, cutime, cstime,
             20, 0, 1, 0, start, 10_000_000, 300] + [0] * 30
    return f"{pid} ({comm}) " + " ".join(map(str, after)) + "\n"


def fake_host(root: Path, *, governor="ondemand", config_gz=True) -> Path:
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.5.6-300.fc38.x86_64\n")
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n")
    (root / "proc/version").write_text("Linux version 6.5.6-300.fc38.x86_64 (gcc 13.2.1) #1 SMP "
                                       "PREEMPT_DYNAMIC Fri Oct  6 19:02:35 UTC 2023\n")
    (root / "proc/uptime").write_text("1000.00 1800.00\n")
    (root / "proc/stat").write_text(proc_stat(busy=5000, idle=100000, forks=30000))
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text(OS_RELEASE)
    if config_gz:
        (root / "proc/config.gz").write_bytes(gzip.compress(CONFIG.encode()))
    else:
        (root / "boot").mkdir()
        (root / "boot/config-6.5.6-300.fc38.x86_64").write_text(CONFIG)
    for cpu in (0, 1):
        policy = root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq"
        policy.mkdir(parents=True)
        for name, value in (("scaling_driver", "acpi-cpufreq"), ("scaling_governor", governor),
                            ("scaling_cur_freq", 1333000), ("scaling_min_freq", 500000),
                            ("scaling_max_freq", 1333000),
                            ("scaling_available_governors", "ondemand performance")):
            (policy / name).write_text(f"{value}\n")
    (root / "sys/devices/system/cpu/cpuidle").mkdir(parents=True)   # not a cpuN
    return root


def test_the_stack_is_read_from_the_kernels_files(tmp_path):
    facts = stackfacts.collect(fake_host(tmp_path))
    assert facts["kernel"] == "6.5.6-300.fc38.x86_64"
    assert facts["distribution"] == {"name": "Fedora Linux 38 (Thirty Eight)", "id": "fedora",
                                     "version": "38"}
    config = facts["kernel_config"]
    assert config["CONFIG_X86_ACPI_CPUFREQ"] == "y" and config["CONFIG_CPU_FREQ_GOV_ONDEMAND"] == "y"
    assert config["CONFIG_NO_HZ_IDLE"] == "n" and "CONFIG_NET" not in config
    assert facts["kernel_config_source"] == "/proc/config.gz"
    assert facts["hz"] == 1000
    assert facts["preemption"] == {"built": "preempt-voluntary", "dynamic": False, "boot": None}
    assert facts["cpufreq_driver"] == "acpi-cpufreq" and facts["governor"] == "ondemand"
    assert [c["cpu"] for c in facts["cpufreq"]] == [0, 1]
    assert facts["cpufreq"][0]["max_Hz"] == 1_333_000_000 and facts["cpufreq"][1]["min_Hz"] == 500_000_000
    assert facts["forks_since_boot"] == 30000 and facts["forks_per_s_since_boot"] == 30.0
    json.dumps(facts, allow_nan=False)   # numbers are JSON numbers


def test_config_from_boot_and_what_a_container_lacks_is_unknown(tmp_path):
    root = fake_host(tmp_path / "a", config_gz=False, governor="performance")
    (root / "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor").write_text("powersave\n")
    (root / "proc/cmdline").write_text("ro preempt=full quiet\n")
    facts = stackfacts.collect(root)
    assert facts["kernel_config_source"] == "/boot/config-6.5.6-300.fc38.x86_64"
    assert facts["hz"] == 1000 and facts["preemption"]["boot"] == "full"
    assert facts["governor"] == "mixed"
    bare = tmp_path / "b"   # no config, no cpufreq, no os-release: unknown, not guessed
    (bare / "proc").mkdir(parents=True)
    (bare / "proc/version").write_text("Linux version 6.1.0 #1 SMP PREEMPT_DYNAMIC\n")
    facts = stackfacts.collect(bare)
    assert facts["kernel_config"] == {} and facts["hz"] is None and facts["cpufreq"] == []
    assert facts["governor"] is None and facts["forks_since_boot"] is None
    assert facts["preemption"] == {"built": None, "dynamic": True, "boot": None}


def test_background_activity_leaves_out_the_runs_own_processes(tmp_path):
    root = fake_host(tmp_path)
    me = 4000
    table = {1: ("systemd", 0, 100, 50, 1), 900: ("packagekitd", 1, 2000, 400, 900),
             me: ("shoal", 1, 300, 20, 50_000), 4001: ("mpiexec", me, 10, 5, 50_100),
             4002: ("shoal bench)", 4001, 500, 10, 50_200)}   # a ')' in comm

    def write(processes, busy, forks, uptime):
        for pid in list((root / "proc").iterdir()):
            if pid.name.isdigit():
                (pid / "stat").unlink()
                pid.rmdir()
        for pid, (comm, ppid, ut, st, start, *children) in processes.items():
            (root / f"proc/{pid}").mkdir()
            (root / f"proc/{pid}/stat").write_text(pid_stat(pid, comm, ppid, ut, st, start, *children))
        (root / "proc/stat").write_text(proc_stat(busy=busy, idle=100000, forks=forks))
        (root / "proc/uptime").write_text(f"{uptime:.2f} 1800.00\n")

    write(table, busy=5000, forks=30000, uptime=1000)
    activity = stackfacts.Activity.start(root, me=me)
    # Ten seconds on: packagekitd used 300 ticks, systemd 20; a cron job (pid 5000) started
    # and is still there with 100; the run's ranks used 1500; mpiexec ended and shoal waited
    # for it (its and the ranks' ticks now in shoal's cutime). pid 900 was not reused.
    tick = os.sysconf("SC_CLK_TCK")
    later = {1: ("systemd", 0, 115, 55, 1), 900: ("packagekitd", 1, 2250, 450, 900),
             5000: ("cron job", 1, 80, 20, 100_500),
             me: ("shoal", 1, 330, 30, 50_000, 1515, 5)}
    # All CPUs' busy time: background 320 + 100 (and 60 from a process that came and went),
    # the run's own 30 + 10 + 1520 - ... measured in its tree.
    own = (330 + 30 + 1515 + 5) - (300 + 20) + 0  # shoal's, with waited-for children
    write(later, busy=5000 + 320 + 100 + 60 + own, forks=30250, uptime=1010)
    during = activity.stop()
    assert during["duration_s"] == pytest.approx(10.0)
    assert during["forks"] == 250 and during["forks_per_s"] == pytest.approx(25.0)
    assert during["background_cpu_s"] == pytest.approx(480 / tick)
    assert during["background_cpus"] == pytest.approx(480 / tick / 10)
    top = {(p["comm"], p["processes"]): p["cpu_s"] for p in during["background_top"]}
    assert top == {("packagekitd", 1): pytest.approx(300 / tick),
                   ("cron job", 1): pytest.approx(100 / tick), ("systemd", 1): pytest.approx(20 / tick)}
    assert [p["comm"] for p in during["background_top"]] == ["packagekitd", "cron job", "systemd"]


def test_every_run_records_its_stack_and_what_the_system_did_during_it(tmp_path):
    run = Run.create("bench", ["shoal", "bench"], tmp_path / "r",
                     stack={"mpi_build": {"name": "MPICH 9"}})
    stack = run.manifest["stack"]
    assert stack["kernel"] == stackfacts.kernel_release() and stack["mpi_build"]["name"] == "MPICH 9"
    assert stack["forks_since_boot"] > 0
    run.finish("complete")
    during = Run.open(run.path).manifest["stack_during"]
    assert during["forks"] >= 0 and during["background_cpu_s"] >= 0
    assert during["duration_s"] >= 0 and during["cpus"] >= 1
