"""A Table 1 placement gives every rank a core of its own, and its power is modelled so:
its ranks must wait as they would there, not as Open MPI waits when it knows it is
oversubscribed (7 ranks on this 2-core machine)."""

from shoal.dsm import apps
from shoal.mpi.launch import Job

VIDEO = ["--frames", "8", "--thetas", "180", "--sample", "0"]


def test_own_cores_tells_open_mpi_it_has_a_slot_per_rank(openmpi, mpich):
    shared, own = (Job(openmpi, 7, ["prog"], own_cores=flag).command()[0] for flag in (False, True))
    assert ":OVERSUBSCRIBE" in shared
    assert "localhost:7" in own and ":OVERSUBSCRIBE" not in own and "none" in own
    # hydra changes nothing about how MPICH ranks wait when oversubscribed.
    assert Job(mpich, 7, ["prog"], own_cores=True).command()[0] == Job(mpich, 7, ["prog"]).command()[0]


def test_a_waiting_open_mpi_server_sleeps_through_its_waits_with_a_core_each(openmpi):
    # Oversubscribed, Open MPI yields the core in every progress call: each test of the
    # server's receive then waited a time slice on the run queue and its waits ended
    # within the library's first tests, so it slept 0.04 s of 0.65 s waiting.
    res = apps.run(openmpi, "video", VIDEO, 7, "backoff", own_cores=True)
    server = next(r for r in res.time_split() if r["role"] == "server")
    waiting = server["mpi_wait_s"] + server["sleep_s"]
    assert waiting > 0 and server["sleep_s"] > 0.5 * waiting, server
