"""MPI_Alltoall under libshoalwait: pairwise where the MPI's blocking call is pairwise.

Open MPI's coll/tuned runs a blocking Alltoall of large blocks pairwise while libnbc's
Ialltoall posts every block at once; libshoalwait then runs the pairwise exchange itself.
The ranks' telemetry counts the calls that went pairwise."""

from __future__ import annotations

import pytest

from shoal.wait import telemetry
from tests.wait.helpers import json_lines, run_scenario


def _run(mpi, ranks, bytes_, tmp_path, env=None, reps=1):
    tmp_path.mkdir(exist_ok=True)
    done = run_scenario(mpi, "backoff", ranks, "alltoall", "--bytes", str(bytes_),
                        "--reps", str(reps), telemetry=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = json_lines(done.stdout)
    pairwise = [r["alltoall_pairwise_calls"] for r in telemetry.read_dir(tmp_path)]
    assert len(pairwise) == ranks
    return line, pairwise


@pytest.mark.parametrize("setting", ["pairwise", "mpi"])
def test_every_block_lands_in_place_and_no_wildcard_receive_takes_one(any_mpi, tmp_path,
                                                                      setting):
    line, pairwise = _run(any_mpi, 3, 4096, tmp_path, {"SHOAL_WAIT_ALLTOALL": setting}, reps=2)
    # Per call of each rep: the world's 3 ranks x 3 blocks, twice (bytes, ints); the even
    # half's 2 x 2 and the odd half's 1.
    assert line["checked"] == 2 * (2 * 9 + 4 + 1) and line["failures"] == 0
    assert pairwise == ([6, 6, 6] if setting == "pairwise" else [0, 0, 0])


def test_open_mpi_goes_pairwise_where_tuned_does(openmpi, tmp_path):
    # tuned: 3-7 ranks run blocks of 512 KiB up to 1 MiB pairwise, 256 KiB linearly;
    # two ranks exchange once whatever the algorithm (the halves stay with libnbc).
    _, pairwise = _run(openmpi, 4, 524288, tmp_path / "512k")
    assert pairwise == [2, 2, 2, 2]
    _, pairwise = _run(openmpi, 4, 262144, tmp_path / "256k")
    assert pairwise == [0, 0, 0, 0]


def test_mpich_keeps_its_own_nonblocking_alltoall(mpich, tmp_path):
    _, pairwise = _run(mpich, 4, 524288, tmp_path)
    assert pairwise == [0, 0, 0, 0]
