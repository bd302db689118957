"""Time dilation arithmetic: choosing D, scaling links and budgets, undoing it on results."""

from __future__ import annotations

import pytest

from shoal.execute.session import DeviceClock

from shoal.bench import records
from shoal.cluster import dilation
from shoal.profiles import LinkType
from shoal.errors import ShoalError


def test_smallest_whole_factor_that_fits():
    # Two MinnowBoards (0.5 CPU each) fit two host CPUs with the reserve: real time.
    assert dilation.choose([0.5, 0.5], 2) == 1
    # Four boards and a NUC need about 3.5 CPUs; 1.5 CPUs are left after the reserve.
    assert dilation.choose([0.5] * 4 + [1.5], 2) == 3
    assert dilation.needed([0.5] * 4 + [1.5], 2) == pytest.approx(3.5 / 1.5)
    with pytest.raises(ShoalError, match="leaves nothing"):
        dilation.choose([1.0], 0)


def test_links_and_budgets_scale_with_d():
    link = LinkType("x", 100e6, latency_s=1e-4, jitter_s=2e-5, loss=0.01)
    slow = dilation.link(link, 4)
    assert (slow.rate_bps, slow.latency_s, slow.jitter_s, slow.loss) == (25e6, 4e-4, 8e-5, 0.01)
    assert dilation.link(link, 1) is link
    plant = LinkType("plant", 27e6, latency_s=5e-3, shared=True, grant_interval_s=2e-3, device_rate_bps=5e6)
    slow = dilation.link(plant, 2)
    assert (slow.rate_bps, slow.upstream_bps, slow.grant_interval_s) == (13.5e6, 2.5e6, 4e-3)
    assert dilation.budget(1.5, 3) == 0.5
    assert dilation.seconds(0.3, 3) == pytest.approx(0.1)
    assert dilation.rate(10.0, 3) == 30.0
    assert dilation.timeout(20, 3) == 60


@pytest.mark.parametrize("value, message", [
    ("0.5", "at least 1"), ("-2", "at least 1"), ("nan", "at least 1"), ("inf", "at least 1"),
    ("two", "give a number"), ("1000", "at most 64"),
])
def test_impossible_dilations_are_refused(value, message):
    with pytest.raises(ShoalError, match=message):
        dilation.check(value)


def test_a_dilation_below_what_a_device_core_can_be_held_to_is_refused_naming_the_device():
    # A set-top box core at 0.04 of a host core: 1 ms per second is the least a core gets.
    with pytest.raises(ShoalError, match="each core of stb1 .* at most 40$"):
        dilation.check_cores({"stb1": 0.04, "nuc1": 0.75}, 50, 0.001, fits_at=7, asked=True)
    dilation.check_cores({"stb1": 0.04}, 40, 0.001, fits_at=7, asked=True)
    # No dilation works: the host needs more than the core can take.
    with pytest.raises(ShoalError, match="tiny1's cores .* at most 2 .* needs 4 .* fewer devices"):
        dilation.check_cores({"tiny1": 0.002}, 4, 0.001, fits_at=4)
    assert dilation.check("2.5") == 2.5


def test_results_recorded_at_d_are_divided_by_d():
    record = {"samples_s": [0.2, 0.4, 0.6], "rank_mean_s": [0.4, 0.4], "ranks": 2,
              "test": "imb.PingPong", "size_B": 1024, "bytes_per_op": 1024}
    clock = DeviceClock(2.0)
    row = records.result_row(clock.record(record, records.TIME_KEYS), "2xminnowboard", 2, dilation=2.0)
    assert row["time_median_s"] == pytest.approx(0.2)
    assert row["bandwidth_median_Bps"] == pytest.approx(1024 / 0.2)
    assert row["dilation"] == 2.0
    assert record["samples_s"] == [0.2, 0.4, 0.6]  # the raw record is left alone
    # Energy: the same watts for 1/D of the time.
    row.update({"t_start_mono_s": 10.0, "t_end_mono_s": 12.0})
    records.add_energy(row, {"energy_J": 8.0, "mean_power_W": 4.0, "idle_power_W": 1.0}, clock)
    assert row["energy_J"] == pytest.approx(4.0)
    assert row["energy_net_J"] == pytest.approx(4.0 - 1.0 * 1.0)


def test_workload_results_at_d_are_seen_as_the_devices_saw_them():
    from shoal.work import records as work_records

    record = {"workload": "ep", "size": "S", "ranks": 2, "time_s": 2.0, "serial_s": 0.2,
              "rank_compute_s": [1.6, 1.5], "rank_comm_s": [0.2, 0.4], "rank_cpu_s": [0.5, 0.5],
              "work": 100.0, "unit": "op", "throughput_per_s": 50.0, "check": "pass",
              "t_start_mono_s": 10.0, "t_end_mono_s": 12.0, "extra": {}}
    clock = DeviceClock(2.0)
    row = work_records.result_row(clock.record(record, work_records.TIME_KEYS, work_records.RATE_KEYS),
                                  "2xboard", 1, 0, dilation=2.0)
    assert (row["time_s"], row["serial_s"], row["compute_s"], row["comm_s"]) == (1.0, 0.1, 0.8, 0.2)
    assert row["throughput_per_s"] == 100.0 and row["dilation"] == 2.0
    assert row["cpu_s"] == 0.5  # host CPU seconds: the same work whatever D
    assert (row["t_start_mono_s"], row["t_end_mono_s"]) == (10.0, 12.0)  # the window power covers
    work_records.add_energy(row, {"energy_J": 8.0, "mean_power_W": 4.0, "idle_power_W": 1.0,
                                  "shared_power_W": 2.0}, clock)
    assert row["energy_J"] == 4.0 and row["energy_net_J"] == pytest.approx(3.0)
    assert row["shared_power_W"] == 2.0 and row["energy_per_unit_J"] == pytest.approx(0.04)


def test_the_automatic_dilation_fits_the_devices_that_compute_at_once():
    """A study runs its reference apart from the cluster: only the larger set must fit."""
    from shoal.cluster import cpulimit, inventory
    from shoal.cluster.emulated import EmulatedCluster

    inv = inventory.from_emulate("4xminnowboard+1xnuc")
    names = [n.name for n in inv.nodes]
    budgets = {n: b for n, (_, b) in EmulatedCluster(inv)._budgets().items()}
    host = cpulimit.capacity()  # the CPUs this command can use
    together = EmulatedCluster(inv).choose_dilation()
    apart = EmulatedCluster(inv, at_once=[tuple(names[:4]), (names[4],)]).choose_dilation()
    assert together == dilation.choose(list(budgets.values()), host)
    assert apart == dilation.choose([budgets[n] for n in names[:4]], host)
    assert apart <= together


@pytest.mark.parametrize("argv, message", [
    (["bench", "--emulate", "2xminnowboard", "--dilation", "0.5"], "at least 1"),
    (["bench", "--tests", "imb.PingPong", "--dilation", "2"], "emulated clusters"),
    (["cluster", "up", "--emulate", "2xminnowboard", "--dilation", "x"], "give a number"),
    (["study", "--dilation", "-1"], "at least 1"),
    (["work", "ep", "--dilation", "2"], "emulated clusters"),
    (["cluster", "fidelity", "--dilation", "1,,2"], "separated by commas"),
    (["cluster", "fidelity", "--dilation", "1,inf"], "at least 1"),
])
def test_cli_refuses_impossible_dilations_in_one_line(argv, message, tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "shoal", *argv, "--out", str(tmp_path / "r")]
                          if argv[0] == "bench" else [sys.executable, "-m", "shoal", *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
