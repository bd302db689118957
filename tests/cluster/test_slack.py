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


def test_host_pressure_alone_does_not_flag_a_stretch(tmp_path):
    # Contention is recorded, but only a device short of its budget changes a result.
    first, last = _samples(tmp_path, throttled_s=0.1, pressure_s=0.4)
    verdict = slack.judge(first, last, host_cpus=2)
    assert verdict["ok"] and verdict["contention"] == pytest.approx(0.3)


def test_steal_flags_the_stretch_and_a_long_run_queue_is_recorded(tmp_path):
    first, last = _samples(tmp_path, throttled_s=0, pressure_s=0, steal=20, running=6)
    verdict = slack.judge(first, last, host_cpus=2)
    assert verdict["steal"] == pytest.approx(0.1)
    assert verdict["reasons"] == ["steal 10%"] and verdict["peak_running"] == 6


def write_core(group: Path, proc: Path, periods: int, throttled: int, throttled_ns: int,
               tasks: dict[int, tuple[int, int]]) -> list[str]:
    """A v1 core group (cpu.stat, tasks) and its tasks' /proc/TID/schedstat (run ns, delay ns)."""
    group.mkdir(parents=True, exist_ok=True)
    (group / "cpu.stat").write_text(f"nr_periods {periods}\nnr_throttled {throttled}\n"
                                    f"throttled_time {throttled_ns}\nnr_bursts 0\nburst_time 0\n")
    (group / "tasks").write_text("".join(f"{tid}\n" for tid in tasks))
    for tid, (run_ns, delay_ns) in tasks.items():
        (proc / str(tid)).mkdir(parents=True, exist_ok=True)
        (proc / str(tid) / "schedstat").write_text(f"{run_ns} {delay_ns} 42\n")
    return [str(group)]


def _one_core(tmp_path):
    """A host and one device core holding task 77, nothing run yet: (proc, group, cores)."""
    proc = tmp_path / "proc"
    write_proc(proc, 1000, 5000, 0, 1, 0)
    group = tmp_path / "cpu" / "dev1" / "core0"
    return proc, group, {"dev1": [write_core(group, proc, 0, 0, 0, {77: (0, 0)})]}


def test_a_core_that_wakes_often_is_forgiven_the_wake_up_an_idle_host_costs(tmp_path):
    # 1000 wake-ups in 1 s, 20 us of waiting each beside 0.1 s of running: an idle host's
    # wake-ups, not contention; 200 us each would be.
    proc, group, cores = _one_core(tmp_path)
    verdicts = []
    for each_us in (20, 200):
        first = slack.sample({}, proc, cores)
        first.t_mono_s = 0.0
        (proc / "77" / "schedstat").write_text(f"100000000 {each_us * 1000 * 1000} 1000\n")
        (group / "cpu.stat").write_text("nr_periods 100\nnr_throttled 0\nthrottled_time 0\n")
        last = slack.sample({}, proc, cores)
        last.t_mono_s = 1.0
        verdicts.append(slack.judge(first, last, host_cpus=2, core_quotas={"dev1": 0.0025}))
        write_core(group, proc, 0, 0, 0, {77: (0, 0)})
    assert verdicts[0]["ok"] and verdicts[0]["devices"]["dev1"]["shortfall"] == 0
    assert not verdicts[1]["ok"]


def _core_stretch(tmp_path, run_ns: int, delay_ns: int, periods: int, born: bool = False):
    """One device core over 1 s: its task ran ``run_ns`` and waited ``delay_ns`` to run."""
    proc = tmp_path / "proc"
    write_proc(proc, 1000, 5000, 0, 1, 0)
    group = tmp_path / "cpu" / "dev1" / "core0"
    cores = {"dev1": [write_core(group, proc, 10, 5, 0, {} if born else {77: (0, 0)})]}
    first = slack.sample({}, proc, cores)
    first.t_mono_s = 100.0
    write_proc(proc, 1100, 5100, 0, 1, 0)
    write_core(group, proc, 10 + periods, 5 + periods, 0, {77: (run_ns, delay_ns)})
    last = slack.sample({}, proc, cores)
    last.t_mono_s = 101.0
    # A core of 0.25 CPU: 2.5 ms of quota per 10 ms period.
    return slack.judge(first, last, host_cpus=2, core_quotas={"dev1": 0.0025})


def test_a_core_that_got_its_quota_in_every_period_is_not_short_however_long_it_waited(tmp_path):
    # CPU-bound for 1 s at 0.25: 100 periods, 0.25 s of CPU, 0.75 s waiting (throttled and queued).
    verdict = _core_stretch(tmp_path, run_ns=250_000_000, delay_ns=750_000_000, periods=100)
    assert verdict["ok"], verdict["reasons"]
    assert verdict["devices"]["dev1"]["shortfall"] == pytest.approx(0.0)
    assert verdict["devices"]["dev1"]["nr_periods"] == 100


def test_a_core_that_got_less_than_its_quota_while_it_wanted_to_run_is_flagged(tmp_path):
    # 100 active periods owe 0.25 s; the core got 0.2125 s: 85 % of its budget.
    verdict = _core_stretch(tmp_path, run_ns=212_500_000, delay_ns=787_500_000, periods=100)
    assert not verdict["ok"]
    assert verdict["devices"]["dev1"]["shortfall"] == pytest.approx(0.15)
    assert verdict["reasons"] == ["dev1 got 85% of its CPU budget"]
    columns = slack.row_columns(verdict)
    assert columns["host_slack"] == "short" and columns["cpu_shortfall"] == pytest.approx(0.15)
    assert columns["cpu_periods"] == 100 and columns["cpu_throttled_periods"] == 100


def test_a_wake_up_delayed_by_other_work_counts_and_a_task_born_inside_counts_whole(tmp_path):
    # A rank that woke for messages 42 times: ran 10 ms and waited 10 ms more to run, well
    # inside its quota; 42 idle-host wake-ups (2.1 ms) of that are forgiven.
    verdict = _core_stretch(tmp_path, run_ns=10_000_000, delay_ns=10_000_000, periods=20, born=True)
    device = verdict["devices"]["dev1"]
    assert device["owed_s"] == pytest.approx(0.020) and device["cpu_s"] == pytest.approx(0.010)
    assert device["shortfall"] == pytest.approx((0.010 - 42 * slack.WAKE_ALLOWANCE_S) / 0.020)


def test_core_samples_read_v2_threads_and_skip_tasks_that_ended(tmp_path):
    proc = tmp_path / "proc"
    group = tmp_path / "dev" / "core1"
    group.mkdir(parents=True)
    (group / "cpu.stat").write_text("usage_usec 10\nnr_periods 7\nnr_throttled 2\n"
                                    "throttled_usec 3000\n")
    (group / "cgroup.threads").write_text("11\n12\n")
    (proc / "11").mkdir(parents=True)
    (proc / "11" / "schedstat").write_text("5000 6000 1\n")  # 12 has gone
    core = slack.read_core([str(group)], proc)
    assert core.tasks == {11: (5e-6, 6e-6, 1)}
    assert (core.nr_periods, core.nr_throttled, core.throttled_s) == (7, 2, 0.003)


def test_monitor_judges_a_stretch_of_a_real_run():
    with slack.Monitor({}, host_cpus=2, interval_s=0.05) as monitor:
        import time

        t0 = time.monotonic()
        time.sleep(0.2)
        verdict = monitor.between(t0, time.monotonic())
    assert verdict is not None and verdict["wall_s"] >= 0.1
    assert 0 <= verdict["idle"] <= 1 and isinstance(verdict["ok"], bool)
    assert slack.row_columns(None)["host_slack"] == ""


def test_a_stretch_leaves_out_the_samples_between_which_a_task_ended(tmp_path):
    proc, group, cores = _one_core(tmp_path)
    samples = []
    for t, periods, tasks in ((0.0, 0, {77: (0, 0)}),
                              (0.5, 50, {77: (125_000_000, 375_000_000)}),   # got its 25 %
                              (1.0, 100, {})):                               # 77 ended
        write_core(group, proc, periods, periods, 0, tasks)
        sample = slack.sample({}, proc, cores)
        sample.t_mono_s = t
        samples.append(sample)
    devices = slack.devices_over(samples, {"dev1": 0.0025})
    # Only the first half second counts: the second had its periods but lost its task's run time.
    assert devices["dev1"]["nr_periods"] == 50 and devices["dev1"]["shortfall"] == pytest.approx(0)
    assert slack.devices_over(samples[1:], {"dev1": 0.0025}) == {}
