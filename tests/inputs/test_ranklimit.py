"""Rank counts are refused before anything starts, naming the limit they exceed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shoal.errors import ShoalError
from shoal.inputs import ranklimit
from shoal.inputs.ranklimit import HostLimits

HOST = HostLimits(cpus=2, available_B=4 * 2**30, tasks_left=1000)


def test_slots_times_the_oversubscription_factor():
    ranklimit.check(8, host=HOST)
    with pytest.raises(ShoalError, match=r"--ranks 9: this machine has 2 CPU\(s\); at most 8"):
        ranklimit.check(9, host=HOST)
    ranklimit.check(20, oversubscribe=10, host=HOST)


def test_memory_limit_counts_message_buffers():
    with pytest.raises(ShoalError, match=r"need about .* GiB of memory .* 4.0 GiB available"):
        ranklimit.check(40, 2**30 // 8, oversubscribe=100, host=HOST)
    ranklimit.check(40, 0, oversubscribe=100, host=HostLimits(2, 4 * 2**30, 10**6))


def test_process_limit():
    with pytest.raises(ShoalError, match=r"may start only 100 more \(ulimit -u"):
        ranklimit.check(30, oversubscribe=100, host=HostLimits(2, None, 100))


def test_this_host_reads_real_limits():
    host = ranklimit.this_host()
    assert host.cpus >= 1 and host.available_B and host.available_B > 0
    assert host.tasks_left is None or host.tasks_left > 0


CPUS = len(os.sched_getaffinity(0))


@pytest.mark.parametrize("args, limit", [
    (["-n", "100000"], f"at most {CPUS * 4} ranks run on it with --oversubscribe 4"),
    (["-n", "1000", "--oversubscribe", "1000"], "GiB of memory"),
    (["--emulate", "2xminnowboard", "--ranks-per-node", "9"], "node minnowboard1 has 2 CPU(s)"),
])
def test_bench_refuses_before_anything_starts(tmp_path, args, limit):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "shoal", "bench", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and limit in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_device_holds_as_many_ranks_as_its_profile_memory_allows():
    stb = 256 * 2**20
    # raytrace 8192: 192 MiB of image on rank 0, beside 40 MiB of MPI: fits a set-top box.
    ranklimit.check_device(1, 8192 * 8192 * 3, stb, where="node stb1")
    with pytest.raises(ShoalError, match=r"1 rank needs about 452 MiB .* node stb1 has 256 MiB; give "):
        ranklimit.check_device(1, 12000 * 12000 * 3, stb, where="node stb1")
    ranklimit.check_device(6, 0, stb, where="node stb1")  # 6 x 40 MiB
    with pytest.raises(ShoalError, match=r"7 ranks need about 280 MiB .* give fewer ranks per node"):
        ranklimit.check_device(7, 0, stb, where="node stb1")


def test_work_refuses_a_size_beyond_a_devices_memory_before_anything_starts(tmp_path):
    from shoal.work import runner

    request = runner.WorkRequest(workload="raytrace", size="12000", emulate="2xstb", reps=1)
    with pytest.raises(ShoalError, match=r"stb1 \(stb profile, memory_B\) has 256 MiB"):
        runner.plan(request)
    runner.plan(runner.WorkRequest(workload="raytrace", size="8192", emulate="2xstb", reps=1))
