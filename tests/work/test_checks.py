"""Every workload's parallel result equals its serial reference at 1..4 ranks
under MPICH and Open MPI, and a damaged result fails the check."""

from __future__ import annotations

import pytest

from work_helpers import launch, small, work_program, workloads


def serial_digests(mpi, cache):
    """Each workload's result digest at one rank (the serial run)."""
    key = ("serial", mpi.kind)
    if key not in cache:
        program = work_program(mpi, cache)
        code, results, stderr = launch(mpi, program, 1, ["--runs", small(program)])
        assert code == 0, stderr
        cache[key] = {name: r["digest"] for name, r in results.items()}
    return cache[key]


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_every_workload_passes_its_check(any_mpi, work_programs, ranks):
    program = work_program(any_mpi, work_programs)
    code, results, stderr = launch(any_mpi, program, ranks, ["--runs", small(program), "--check"])
    assert code == 0, stderr
    assert sorted(results) == sorted(workloads(program))
    for name, result in results.items():
        assert result["check"] == "pass", f"{name} at {ranks} ranks: {result['check_detail']}"
        assert result["ranks"] == ranks
        assert len(result["rank_compute_s"]) == ranks and len(result["rank_comm_s"]) == ranks
        assert result["work"] > 0 and result["throughput_per_s"] > 0
        assert result["t_end_mono_s"] > result["t_start_mono_s"]
    # The same result as the serial run's, whatever the rank count.
    assert {n: r["digest"] for n, r in results.items()} == serial_digests(any_mpi, work_programs)
    # IS passes NPB's own verification: 5 keys x 10 iterations + one sort check per rank.
    extra = results["is"]["extra"]
    assert extra["npb_verified"] and extra["verifications_passed"] == 50 + ranks


def test_a_damaged_result_fails_the_check(mpich, work_programs):
    program = work_program(mpich, work_programs)
    code, results, stderr = launch(mpich, program, 2, ["--runs", small(program), "--check", "--corrupt"])
    assert code == 0, stderr
    for name in workloads(program):
        assert results[name]["check"] == "fail", f"{name}: the damaged result passed"
        assert results[name]["check_detail"]
    # Without --check nothing is compared.
    code, results, _ = launch(mpich, program, 2, ["--runs", "ep:M18", "--corrupt"])
    assert results["ep"]["check"] == "off"


def test_ep_class_s_matches_npb(mpich, work_programs):
    program = work_program(mpich, work_programs)
    code, results, stderr = launch(mpich, program, 2, ["--runs", "ep:S"])
    assert code == 0, stderr
    extra = results["ep"]["extra"]
    # NPB 3.4 EP/ep.f class S sums, within NPB's 1e-8.
    assert extra["sx"] == pytest.approx(-3.247834652034740e3, rel=1e-8)
    assert extra["sy"] == pytest.approx(-6.958407078382297e3, rel=1e-8)
    assert extra["npb_verified"] is True
    assert extra["q"][:6] == [6140517, 5865300, 1100361, 68546, 1648, 17]
    assert results["ep"]["work"] == 2.0 ** 25
