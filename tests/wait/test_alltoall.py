"""MPI_Alltoall under libshoalwait keeps the shape of the MPI's blocking call.

Open MPI's coll/tuned runs a blocking Alltoall of small blocks by Bruck's algorithm and of
large ones pairwise, while libnbc's Ialltoall posts every block at once; libshoalwait then
runs Bruck's or the pairwise exchange itself. The ranks' telemetry counts the calls that
took each shape."""

from __future__ import annotations

import pytest

from shoal.wait import telemetry
from tests.wait.helpers import json_lines, run_scenario


def _run(mpi, ranks, bytes_, tmp_path, env=None, reps=1):
    """The scenario's line, and per rank (pairwise calls, Bruck calls)."""
    tmp_path.mkdir(exist_ok=True)
    done = run_scenario(mpi, "backoff", ranks, "alltoall", "--bytes", str(bytes_),
                        "--reps", str(reps), telemetry=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = json_lines(done.stdout)
    ranks_seen = telemetry.read_dir(tmp_path)
    shapes = [(r["alltoall_pairwise_calls"], r["alltoall_bruck_calls"]) for r in ranks_seen]
    assert len(shapes) == ranks
    made = {(r["alltoall_comms_made"], r["alltoall_world_in_init"]) for r in ranks_seen}
    assert len(made) == 1  # the same in every rank: making one is collective
    return line, shapes, made.pop()


@pytest.mark.parametrize("ranks", [3, 4, 5])
@pytest.mark.parametrize("setting", ["pairwise", "bruck", "mpi"])
def test_every_block_lands_in_place_and_no_wildcard_receive_takes_one(any_mpi, tmp_path,
                                                                      setting, ranks):
    line, shapes, made = _run(any_mpi, ranks, 4096, tmp_path, {"SHOAL_WAIT_ALLTOALL": setting},
                              reps=2)
    # Per rep: the world's ranks x ranks blocks, twice (bytes, ints), and each half's.
    even, odd = (ranks + 1) // 2, ranks // 2
    assert line["checked"] == 2 * (2 * ranks ** 2 + even ** 2 + odd ** 2)
    assert line["failures"] == 0
    calls = {"pairwise": (6, 0), "bruck": (0, 6), "mpi": (0, 0)}[setting]
    assert shapes == [calls] * ranks
    # The world's private communicator came with MPI_Init, each half's with its first call.
    assert made == ((2, 1) if setting != "mpi" else (0, 0))


def test_open_mpi_takes_the_shape_tuned_takes(openmpi, tmp_path):
    # tuned: 3-7 ranks run blocks of 512 KiB up to 1 MiB pairwise, 256 KiB linearly.
    _, shapes, made = _run(openmpi, 4, 524288, tmp_path / "512k")
    assert shapes == [(2, 0)] * 4   # the world's two calls; the halves have two ranks
    assert made == (1, 1)           # the world's, in MPI_Init
    _, shapes, made = _run(openmpi, 4, 262144, tmp_path / "256k")
    assert shapes == [(0, 0)] * 4
    assert made == (1, 1)           # made in MPI_Init all the same: tuned has rows for 4 ranks
    # 16-31 ranks: Bruck's from 4 up to 512 B blocks (16 ranks: the halves have 8).
    _, shapes, _ = _run(openmpi, 16, 256, tmp_path / "256")
    assert shapes == [(0, 2)] * 16
    _, shapes, _ = _run(openmpi, 16, 1024, tmp_path / "1k")
    assert shapes == [(0, 0)] * 16


def test_mpich_keeps_its_own_nonblocking_alltoall(mpich, tmp_path):
    _, shapes, made = _run(mpich, 4, 524288, tmp_path)
    assert shapes == [(0, 0)] * 4
    assert made == (0, 0)
