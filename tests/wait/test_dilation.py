"""libshoalwait on an emulated device: its durations are device time (SHOAL_WAIT_DILATION),
so every sleep, its timer slack and the policy's constants last D times as long on the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.wait import telemetry
from tests.wait.helpers import run_scenario


def _idle_receiver(mpi, mode, tmp_path, env):
    tmp_path.mkdir(exist_ok=True)
    proc = run_scenario(mpi, mode, 2, "idle", "--seconds", "0.3", telemetry=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return telemetry.read_dir(tmp_path)[1]


def test_a_fixed_sleep_lasts_its_device_time_times_the_dilation(any_mpi, tmp_path):
    rank1 = _idle_receiver(any_mpi, "sleep:200", tmp_path, {"SHOAL_WAIT_DILATION": "4"})
    assert rank1["dilation"] == 4
    recv = rank1["calls"]["MPI_Recv"]
    # A clock_nanosleep never ends before its time: each of these lasted 4 x 200 us at least.
    assert recv["sleeps"] >= 1
    assert recv["sleep_s"] / recv["sleeps"] >= 800e-6
    assert recv["sleeps"] <= recv["wait_s"] / 800e-6 + 1


def test_the_kernels_slack_and_the_modes_defaults_are_stretched(mpich, tmp_path):
    """003's receive under the kernel's slack: the slack each waiting thread sets is the
    kernel's own times D, and the ramp's durations are D times the asked ones."""
    kernel_slack = int(Path("/proc/self/timerslack_ns").read_text())
    rank1 = _idle_receiver(mpich, "linear:0,1000,1", tmp_path / "linear",
                           {"SHOAL_WAIT_DILATION": "3", "SHOAL_WAIT_SLACK_NS": "0"})
    assert rank1["linear_ns"] == [0, 3000, 3]
    assert rank1["timer_slack_requested_ns"] == 3 * kernel_slack
    assert rank1["timer_slack_ns"] == 3 * kernel_slack and rank1["timer_slack_error"] is None
    backoff = _idle_receiver(mpich, "backoff", tmp_path / "backoff",
                             {"SHOAL_WAIT_DILATION": "2.5", "SHOAL_WAIT_FLOOR_NS": "20000"})
    # The floor (20 us device) is 50 us of host time; the spin covers 8 floors.
    assert backoff["dilation"] == 2.5 and backoff["floor_ns"] == 50000
    assert backoff["spin_ns"] == 400000 and backoff["timer_slack_requested_ns"] == 3   # 1 ns x 2.5, rounded
    undilated = _idle_receiver(mpich, "backoff", tmp_path / "real", {})
    assert undilated["dilation"] == 1 and undilated["spin_ns"] == 50000


@pytest.mark.parametrize("value", ["0.5", "fast", "1e9"])
def test_a_dilation_below_one_or_not_a_number_stops_the_program(mpich, value, tmp_path):
    proc = run_scenario(mpich, "backoff", 2, "result", env={"SHOAL_WAIT_DILATION": value})
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("shoalwait:")]
    assert len(lines) == 1 and f"SHOAL_WAIT_DILATION={value}: expected" in lines[0], proc.stderr
    assert '"result"' not in proc.stdout
