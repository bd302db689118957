"""The time a job gets to start grows with its ranks: MPI_Init costs every rank CPU time that
grows with the job, and on emulated set-top boxes that time is what the boxes' budgets allow."""

from __future__ import annotations

from shoal.mpi.launch import startup_grace_s

# Measured (docs/cluster.md): from `shoal bench` starting to the first point, one MPICH rank
# per set-top box at D = 2, 162 s of wall time at 128 boxes, i.e. 81 device seconds.
MEASURED_128_STB_DEVICE_S = 81.0


def test_a_small_job_keeps_the_grace_it_had():
    assert 60.0 <= startup_grace_s(1) <= 62.0
    assert startup_grace_s(4) <= 65.0


def test_the_grace_grows_with_ranks_and_covers_128_set_top_boxes_twice():
    assert startup_grace_s(128) > startup_grace_s(32) > startup_grace_s(8)
    assert startup_grace_s(128) >= 2 * MEASURED_128_STB_DEVICE_S


def test_no_ranks_is_not_a_negative_grace():
    assert startup_grace_s(0) == startup_grace_s(-3) == 60.0
