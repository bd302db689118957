"""Experiment D's per-message series (shoal-waittest gaps): when each receive returned,
and whether the receiving thread went to sleep in it, which is how
benchmarks/wait_fig5.py finds where the adaptive receive's sleeping takes over."""

from __future__ import annotations

from tests.wait.helpers import json_lines, run_scenario

GAPS = ["gaps", "--fixed", "0.005", "--count", "12", "--size", "8", "--nanosleep", "1"]


def _series(mpi, mode):
    done = run_scenario(mpi, mode, 2, *GAPS)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [r for r in json_lines(done.stdout) if r.get("scenario") == "gaps"]
    return line


def test_a_spinning_receiver_never_sleeps_a_sleeping_one_always_does(mpich):
    spinning, sleeping = _series(mpich, "busy"), _series(mpich, "sleep:100")
    for line in (spinning, sleeping):
        back = line["recv_s"]
        assert len(back) == len(line["recv_sleeps"]) == len(line["recv_cpu_s"]) == 12
        assert all(b > a for a, b in zip(back, back[1:]))
        assert all(c >= 0 for c in line["recv_cpu_s"])
    # Preemptions and yields are involuntary: a busy receiver on a crowded host stays at 0.
    assert spinning["recv_sleeps"] == [0] * 12
    # The waits (the sender sleeps 5 ms before each message) slept in 100 us steps; on a
    # crowded host a receiver preempted past an arrival finds its message at the first
    # test, so not every one needs to.
    slept = sum(n >= 1 for n in sleeping["recv_sleeps"][1:])
    assert slept >= 1, sleeping["recv_sleeps"]
