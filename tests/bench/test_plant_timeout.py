"""`shoal bench` waits for a point as long as its modelled calls could take: on a shared plant,
and on switched links where a call of 32 MiB takes seconds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shoal import profiles
from shoal.bench import plant_calls, runner, switch_calls
from shoal.bench.sweep import Options
from shoal.cluster import inventory
from shoal.execute.placement import Placement

DOCSIS = profiles.load_links()["docsis-27m"]


def _plan(tests: str, sizes: str, timeout_s: float | None = None) -> runner.Plan:
    request = runner.BenchRequest(tests=tests, sizes=sizes, mpi="mpich", attach="plant",
                                  options=Options(point_timeout_s=timeout_s))
    return runner.Plan(request, None, None, [SimpleNamespace(name=t, min_ranks=2)
                                              for t in tests.split(",")],
                       [int(s) for s in sizes.split(",")],
                       [Placement("plant", 128, 1), Placement("plant", 8, 1)])


def _where(spec: str, link: str) -> SimpleNamespace:
    return SimpleNamespace(nodes=inventory.from_emulate(spec, link=link).nodes)


def test_a_128_box_broadcast_of_256_kib_is_not_hung_after_a_minute():
    the_plan = _plan("imb.Bcast,imb.Allreduce", "64,262144")
    default = the_plan.request.options.timeout_s
    longest = plant_calls.call_s("imb.Allreduce", 128, 262144, DOCSIS)
    assert longest > 20   # device seconds of one call on the plant
    chosen = runner._long_call_options(the_plan, _where("128xstb", "docsis-27m")).timeout_s
    assert chosen == pytest.approx(plant_calls.hung_after_s(longest, 128)) and chosen > 5 * default


def test_the_users_timeout_and_unshared_links_keep_theirs():
    where = _where("128xstb", "docsis-27m")
    assert runner._long_call_options(_plan("imb.Bcast", "262144", 5.0), where).timeout_s == 5.0
    the_plan = _plan("imb.Bcast", "262144")
    ports = _where("8xnuc", "ethernet-100m")
    assert runner._long_call_options(the_plan, ports).timeout_s == the_plan.request.options.timeout_s
    # Small calls: a point's fixed cost on 128 boxes (the harness's own collectives, the
    # first use of 127 connections a box) still outlasts the usual timeout.
    small = _plan("imb.Alltoall", "64")
    assert runner._long_call_options(small, where).timeout_s > 2 * small.request.options.timeout_s


def test_a_32_mib_allreduce_on_six_boards_of_100_mbit_ethernet_is_not_hung_after_half_a_minute():
    request = runner.BenchRequest(tests="mpbench.allreduce", sizes="33554432", mpi="mpich",
                                  emulate="6xminnowboard", options=Options())
    the_plan = runner.Plan(request, None, None, [SimpleNamespace(name="mpbench.allreduce", min_ranks=1)],
                           [32 * 2**20], [Placement("6xminnowboard", 6, 6), Placement("6xminnowboard", 1, 2)])
    where = _where("6xminnowboard", "ethernet-100m")
    call = switch_calls.slowed_call_s("mpbench.allreduce", 6, 32 * 2**20, where.nodes[0].link)
    assert call > 15   # device seconds: 3.5 messages through the busiest port, slowed 1.68x
    chosen = runner._long_call_options(the_plan, where).timeout_s
    assert chosen == pytest.approx(plant_calls.hung_after_s(call)) and chosen > 3 * Options().timeout_s
