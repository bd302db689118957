"""Host-slack monitor on fake /proc and cgroup trees shaped like the kernel's."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.cluster import slack


def write_proc(root: Path, user: int, idle: int, steal: int, running: int, some_us: int) -> None:
    (root / "pressure").mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text(
        f"cpu  {user} 0 100 {idle} 10 0 5 {steal} 0 0\n"
        f"cpu0 {user // 2} 0 50 {idle // 2} 5 0 2 {steal // 2} 0 0\n"
        "intr 12345 0 0\nctxt 999\nbtime 1700000000\nprocesses 4242\n"
        f"procs_running {running}\nprocs_blocked 0\nsoftirq 1 2 3\n")
    (root / "pressure" / "cpu").write_text(
        f"some avg10=1.00 avg60=2.00 avg300=3.00 total={some_us}\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


def write_v1_group(cpu: Path, cpuacct: Path, usage_ns: int, throttled_ns: int) -> list[str]:
    cpu.mkdir(parents=True, exist_ok=True)
    cpuacct.mkdir(parents=True, exist_ok=True)
    (cpu / "cpu.stat").write_text(f"nr_periods 100\nnr_throttled 40\nthrottled_time {throttled_ns}\n"
                                  "nr_bursts 0\nburst_time 0\n")
    (cpuacct / "cpuacct.usage").write_text(f"{usage_ns}\n")
    return [str(cpu), str(cpuacct)]




def test_reads_v2_cpu_stat(tmp_path):
    group = tmp_path / "dev"
    group.mkdir()
    (group / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"
                                    "nr_periods 10\nnr_throttled 3\nthrottled_usec 750000\n"
                                    "nr_bursts 0\nburst_usec 0\n")
    assert slack.read_group([str(group)]) == (2.5, 0.75)


def _samples(tmp_path, throttled_s: float, pressure_s: float, steal: int = 0, running: int = 2):
    proc = tmp_path / "proc"
    cpu, acct = tmp_path / "cpu" / "dev1", tmp_path / "cpuacct" / "dev1"
    write_proc(proc, 1000, 5000, 0, 1, 10_000_000)
    groups = {"dev1": write_v1_group(cpu, acct, 0, 0)}
    first = slack.sample(groups, proc)
    first.t_mono_s = 100.0
    write_proc(proc, 1000 + 100, 5000 + 100 - steal, steal, running,
               10_000_000 + int(pressure_s * 1e6))
    write_v1_group(cpu, acct, int(0.5e9), int(throttled_s * 1e9))
    last = slack.sample(groups, proc)
    last.t_mono_s = 101.0
    return first, last


def test_throttling_by_the_devices_own_quota_is_not_contention(tmp_path):
    # 1 s: the device was throttled 0.5 s, and CPU pressure says 0.505 s: the host added 0.5 %.
    first, last = _samples(tmp_path, throttled_s=0.5, pressure_s=0.505)
    verdict = slack.judge(first, last, host_cpus=2, budgets={"dev1": 0.5})
    assert verdict["ok"], verdict["reasons"]
    assert verdict["contention"] == pytest.approx(0.005)
    assert verdict["quota_use"]["dev1"] == pytest.approx(1.0)
    assert verdict["idle"] == pytest.approx(0.5)


def test_pressure_beyond_the_throttled_time_flags_the_stretch(tmp_path):
    first, last = _samples(tmp_path, throttled_s=0.1, pressure_s=0.4)
    verdict = slack.judge(first, last, host_cpus=2)
    assert not verdict["ok"]
    assert verdict["contention"] == pytest.approx(0.3)
    assert slack.row_columns(verdict) == {"host_slack": "short",
                                          "host_slack_note": "CPU contention 30% of the time"}


def test_steal_and_a_long_run_queue_flag_the_stretch(tmp_path):
    first, last = _samples(tmp_path, throttled_s=0, pressure_s=0, steal=20, running=6)
    verdict = slack.judge(first, last, host_cpus=2)
    assert verdict["steal"] == pytest.approx(0.1)
    assert verdict["reasons"] == ["steal 10%", "6 tasks runnable on 2 CPUs"]


def test_monitor_judges_a_stretch_of_a_real_run():
    with slack.Monitor({}, host_cpus=2, interval_s=0.05) as monitor:
        import time

        t0 = time.monotonic()
        time.sleep(0.2)
        verdict = monitor.between(t0, time.monotonic())
    assert verdict is not None and verdict["wall_s"] >= 0.1
    assert 0 <= verdict["idle"] <= 1 and isinstance(verdict["ok"], bool)
    assert slack.row_columns(None) == {"host_slack": "", "host_slack_note": ""}
