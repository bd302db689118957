"""A collective keeps the algorithm the user chose for it when libshoalwait runs it as its
nonblocking form: the ranks' MPI, read through MPI_T after MPI_Init, holds the twin."""

from __future__ import annotations

from shoal.wait import library
from tests.wait.helpers import json_lines, run_scenario

MPICH_BCAST = "MPIR_CVAR_BCAST_INTRA_ALGORITHM"
MPICH_IBCAST = "MPIR_CVAR_IBCAST_INTRA_ALGORITHM"
OMPI_IBCAST = "coll_libnbc_ibcast_algorithm"
OMPI_RULES = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}


def _value(mpi, name: str, *, mode="event", preload=True, env=None) -> int | None:
    done = run_scenario(mpi, mode, 2, "settings", name, env=env, preload=preload)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [r for r in json_lines(done.stdout) if r.get("setting") == name]
    return line["value"]


def test_mpich_broadcast_asked_binomial_stays_binomial_under_the_library(mpich, monkeypatch):
    default = _value(mpich, MPICH_IBCAST, preload=False)
    forced = _value(mpich, MPICH_IBCAST, preload=False, env={MPICH_IBCAST: "sched_binomial"})
    assert default is not None and forced != default
    monkeypatch.setenv(MPICH_BCAST, "binomial")
    assert _value(mpich, MPICH_IBCAST) == forced
    # Collectives left blocking: their nonblocking settings stay the MPI's.
    monkeypatch.setenv("SHOAL_WAIT_CLASSES", "p2p,send")
    assert _value(mpich, MPICH_IBCAST) == default


def test_open_mpi_tuned_binomial_becomes_libnbc_binomial(openmpi, monkeypatch):
    default = _value(openmpi, OMPI_IBCAST, preload=False)
    forced = _value(openmpi, OMPI_IBCAST, preload=False,
                    env={"OMPI_MCA_coll_libnbc_ibcast_algorithm": "binomial"})
    assert default is not None and forced != default
    monkeypatch.setenv("OMPI_MCA_coll_tuned_bcast_algorithm", "6")   # binomial, by number
    # Without dynamic rules Open MPI ignores tuned's choice, and so does shoal.
    assert _value(openmpi, OMPI_IBCAST) == default
    for name, value in OMPI_RULES.items():
        monkeypatch.setenv(name, value)
    assert _value(openmpi, OMPI_IBCAST) == forced


def test_the_twins_follow_each_mpis_lists(mpich, openmpi):
    twins = mpich.impl.nonblocking_twins
    assert twins({"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "Recursive_Doubling",
                  "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "pairwise"}) == (
        {"MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM": "sched_recursive_doubling",
         "MPIR_CVAR_IALLTOALL_INTRA_ALGORITHM": "sched_pairwise"}, [])
    # The user's own nonblocking choice is kept; auto asks nothing.
    assert twins({MPICH_BCAST: "binomial", MPICH_IBCAST: "tsp_tree",
                  "MPIR_CVAR_REDUCE_INTRA_ALGORITHM": "auto"}) == ({}, [])
    assert twins({MPICH_BCAST: "tree"}) == ({}, [f"{MPICH_BCAST}=tree"])
    ompi = openmpi.impl.nonblocking_twins
    assert ompi({**OMPI_RULES, "OMPI_MCA_coll_tuned_allreduce_algorithm": "ring",
                 "OMPI_MCA_coll_tuned_reduce_algorithm": "5"}) == (
        {"OMPI_MCA_coll_libnbc_iallreduce_algorithm": "ring",
         "OMPI_MCA_coll_libnbc_ireduce_algorithm": "binomial"}, [])
    # Alltoall's twins are libshoalwait's: libnbc's Ialltoall is always linear.
    assert ompi({**OMPI_RULES, "OMPI_MCA_coll_tuned_alltoall_algorithm": "2"}) == (
        {"SHOAL_WAIT_ALLTOALL": "pairwise"}, [])
    assert ompi({**OMPI_RULES, "OMPI_MCA_coll_tuned_alltoall_algorithm": "linear"}) == (
        {"SHOAL_WAIT_ALLTOALL": "mpi"}, [])
    assert ompi({**OMPI_RULES, "OMPI_MCA_coll_tuned_alltoall_algorithm": "3"}) == (
        {"SHOAL_WAIT_ALLTOALL": "bruck"}, [])
    assert ompi({**OMPI_RULES, "OMPI_MCA_coll_tuned_alltoall_algorithm": "two_proc"}) == (
        {}, ["OMPI_MCA_coll_tuned_alltoall_algorithm=two_proc"])
    # tuned's chain fans out to four chains, libnbc's to one: no twin.
    assert ompi({**OMPI_RULES, "OMPI_MCA_coll_tuned_bcast_algorithm": "chain"}) == (
        {}, ["OMPI_MCA_coll_tuned_bcast_algorithm=chain"])


def test_a_choice_without_a_twin_is_said_once(mpich, capsys):
    chosen = {"MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM": "k_brucks"}
    assert library.same_algorithms(mpich, chosen) == {}
    assert library.same_algorithms(mpich, chosen) == {}
    err = capsys.readouterr().err.splitlines()
    assert err == ["shoal: warning: MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM=k_brucks has no "
                   "nonblocking form in MPICH: collectives under libshoalwait run the MPI's "
                   "own choice (SHOAL_WAIT_CLASSES=p2p,send keeps them blocking)"]
