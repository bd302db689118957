"""Seed 003's Adaptive Degraded: its adaptive receive with the MPI's Degraded knob set,
read back through MPI_T in the ranks (Open MPI's mpi_yield_when_idle; MPICH has none,
its MPIR_CVAR_ENABLE_HEAVY_YIELD stands in)."""

from __future__ import annotations

import pytest

from shoal.errors import ShoalError
from shoal.wait import lab

KNOB = {"openmpi": "mpi_yield_when_idle", "mpich": "MPIR_CVAR_ENABLE_HEAVY_YIELD"}


@pytest.mark.parametrize("kind", ["openmpi", "mpich"])
def test_adaptive_degraded_runs_the_seed_receive_with_the_knob_on(request, kind):
    mpi = request.getfixturevalue(kind)
    aggressive, degraded = (lab.contender_for(n, mpi) for n in ("seed003", "degraded+seed003"))
    assert degraded.mode == aggressive.mode == "linear:0,1000,1"
    assert degraded.slack_ns == aggressive.slack_ns == 0
    assert aggressive.env == {}
    seen, _, _ = lab.run_program(mpi, degraded, 2, ["settings", KNOB[kind]])
    assert seen == {"setting": KNOB[kind], "value": 1}


def test_degraded_plus_names_a_contender():
    assert lab.contender_names("degraded+seed003") == "degraded+seed003"
    assert lab.contender_names("degraded+linear:0,1000,1") == "degraded+linear:0,1000,1"
    with pytest.raises(ShoalError):
        lab.contender_names("degraded+spin")
