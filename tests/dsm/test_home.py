"""The home state machine, explored exhaustively (every arrival order)."""

import pytest

from tests.dsm.helpers import explorer


@pytest.mark.parametrize("args, min_states", [
    # 3 clients x 2 chunks, one operation each from the whole alphabet
    (("--clients", "3", "--ops", "1"), 100_000),
    # 2 clients, two operations each from the whole alphabet
    (("--clients", "2", "--ops", "2"), 1_000_000),
    # 3 clients, two operations each: readers, writers and publish-subscribe waits
    (("--clients", "3", "--ops", "2", "--alphabet", "R0,W0,N0"), 100_000),
])
def test_every_arrival_order_keeps_the_invariants(mpich, args, min_states):
    code, out = explorer(mpich, *args)
    assert code == 0, out.get("first_violation")
    assert out["violations"] == 0
    assert out["states"] >= min_states
    assert out["final_states"] > 0


def test_opposite_order_and_unanswerable_waits_are_explored(mpich):
    code, out = explorer(mpich, "--clients", "3", "--ops", "1")
    assert code == 0
    # P01 against P10 on one home: some orders close a cycle, answered EDEADLK
    assert out["deadlocks_reported"] > 0
    # N0 with no later write stays parked, never answered with an older version
    assert out["parked_unsatisfiable"] > 0


def test_a_broken_home_is_caught(mpich):
    # the mutant grants a writer beside readers
    code, out = explorer(mpich, "--clients", "2", "--ops", "1", "--alphabet", "R0,W0",
                         mutant=True)
    assert code == 1
    assert out["violations"] > 0
    assert "writer" in out["first_violation"] or "readers" in out["first_violation"]


def test_bad_arguments(mpich):
    from shoal import proc
    from shoal.mpi import build

    exe = build.build("sdsmcheck", mpich)
    done = proc.run([str(exe), "--alphabet", "X9"])
    assert done.returncode == 2
    assert "bad operation 'X9'" in done.stderr
