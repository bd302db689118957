"""The benchmark plan: on a shared plant modelled calls and a fixed cost per point by node count;
on switched links per-port calls, and ranks on one device cost nothing on the wire."""

from __future__ import annotations

import pytest

from shoal import profiles
from shoal.bench import call_model
from shoal.study import bench_budget

DOCSIS = profiles.load_links()["docsis-27m"]


def test_a_points_fixed_cost_grows_with_the_boxes_and_with_d():
    # The least-squares line through two runs' measured costs (plant_calls.FIXED_S): 1.5 + 0.267 N.
    assert bench_budget.fixed_s(8, 2.0) == pytest.approx(3.636)
    assert bench_budget.fixed_s(128, 2.0) == pytest.approx(35.676)
    assert bench_budget.fixed_s(128, 4.0) == pytest.approx(2 * 35.676)


def test_a_barrier_at_128_boxes_is_cheap_on_the_wire_but_not_in_host_time():
    points = [("imb.Barrier", 0, 8, 8), ("imb.Barrier", 0, 128, 128)]
    # A barrier sends no bytes: 2 log2(P) latencies of 5 ms a call, 0.03 s at 8 and 0.07 s at 128.
    assert call_model.call_s("imb.Barrier", 8, 0, DOCSIS) == pytest.approx(0.03)
    assert call_model.call_s("imb.Barrier", 128, 0, DOCSIS) == pytest.approx(0.07)
    # Both calls fit 10 s many times over; with the fixed costs (3.64 + 35.68 s) only the 8 does.
    budget = bench_budget.plan(points, DOCSIS, 2.0, 10.0)
    assert list(budget.not_run) == [("imb.Barrier", 0, 128, 128)]
    assert budget.planned_s == pytest.approx(2 * 2 * 0.03 + 3.636)
    assert budget.dropped_s == pytest.approx(2 * 2 * 0.07 + 35.676)
    assert budget.planned == {8: 1}
    assert budget.not_run[("imb.Barrier", 0, 128, 128)] == (
        "not run: it would take 36 s of host time at D = 2 (one call 0.07 s on the docsis-27m plant "
        "by the model, 35.7 s fixed at 128 ranks), over the study's 10 s for benchmarks on the "
        "docsis-27m plant")
    # Enough for both: nothing left out.
    assert bench_budget.plan(points, DOCSIS, 2.0, 44.0).not_run == {}


def test_kept_points_run_over_the_budget_and_the_others_go_first():
    points = [("imb.Bcast", 262144, 128, 128), ("imb.Bcast", 64, 128, 128), ("imb.Barrier", 0, 128, 128)]
    budget = bench_budget.plan(points, DOCSIS, 2.0, 1.0, keep=frozenset({"imb.Bcast"}))
    assert list(budget.not_run) == [("imb.Barrier", 0, 128, 128)]
    assert budget.planned_s > 1.0 and budget.planned == {128: 2}
    by_size = bench_budget.plan(points, DOCSIS, 2.0, 1.0, keep=frozenset({"imb.Bcast@64"}))
    assert set(by_size.not_run) == {("imb.Bcast", 262144, 128, 128), ("imb.Barrier", 0, 128, 128)}


def test_gathers_cost_four_times_their_modelled_calls():
    # Gather and Scatter move the same bytes in the same steps; Gather queued 3-4x its model.
    call = call_model.call_s("imb.Gather", 32, 131072, DOCSIS)
    assert call == pytest.approx(call_model.call_s("imb.Scatter", 32, 131072, DOCSIS))
    gather = bench_budget.point_s("imb.Gather", 32, 131072, DOCSIS, 2.0)
    scatter = bench_budget.point_s("imb.Scatter", 32, 131072, DOCSIS, 2.0)
    assert gather - bench_budget.fixed_s(32, 2.0) == pytest.approx(4 * (scatter - bench_budget.fixed_s(32, 2.0)))
    # And its point may take as long before it counts as hung.
    assert bench_budget.plan([("imb.Gather", 131072, 32, 32)], DOCSIS, 2.0, 1e6).point_timeout_s == pytest.approx(
        6 * 2 * 4 * call)


ETHERNET = profiles.load_links()["ethernet-100m"]
MIB32 = 32 * 2**20


def test_on_switched_links_a_call_is_its_busiest_ports_messages_at_the_links_rate():
    # One 32 MiB message at 100 Mbit/s of full frames (94.1 % payload): 2.85 s, as measured.
    one = call_model.call_s("mpbench.bandwidth", 2, MIB32, ETHERNET)
    assert one == pytest.approx(MIB32 / (100e6 / 8 * 1448 / 1538), rel=1e-3)
    assert call_model.call_s("mpbench.roundtrip", 2, MIB32, ETHERNET) == pytest.approx(2 * one, rel=1e-3)
    # MPICH's binomial broadcast below 8 ranks: the root sends ceil(log2 P) whole messages.
    bcast = [call_model.call_s("mpbench.bcast", n, MIB32, ETHERNET) / one for n in (2, 3, 4, 5, 6)]
    assert bcast == pytest.approx([1, 2, 2, 3, 3], rel=1e-3)
    # MPBench's all-to-all sends size/P to each rank: (P-1)/P of a message through each port.
    assert call_model.call_s("mpbench.alltoall", 6, MIB32, ETHERNET) == pytest.approx(5 / 6 * one, rel=1e-3)
    # Collectives are planned as slow as they were measured: allreduce 1.68x its model.
    allreduce = call_model.call_s("mpbench.allreduce", 4, MIB32, ETHERNET)
    assert call_model.slowed_call_s("mpbench.allreduce", 4, MIB32, ETHERNET) == pytest.approx(1.68 * allreduce)
    assert call_model.slowed_call_s("mpbench.bandwidth", 2, MIB32, ETHERNET) == pytest.approx(one)
    # Two ranks on one board meet in memory: no wire time, whatever the size.
    assert call_model.call_s("mpbench.bandwidth", 2, MIB32, ETHERNET, nodes=1) == 0.0


def test_on_switched_links_one_board_and_two_boards_of_two_ranks_are_planned_apart():
    points = [("mpbench.bandwidth", MIB32, 1, 2), ("mpbench.bandwidth", MIB32, 2, 2),
              ("mpbench.bandwidth", 8, 2, 2)]
    budget = bench_budget.plan(points, ETHERNET, 2.0, 3.0)
    # Only the 32 MiB call over the wire is costly: it goes, the board's own and 8 B stay.
    assert list(budget.not_run) == [("mpbench.bandwidth", MIB32, 2, 2)]
    assert "on ethernet-100m links by the model" in budget.not_run[("mpbench.bandwidth", MIB32, 2, 2)]
    assert budget.planned == {1: 1, 2: 1}
    small = call_model.call_s("mpbench.bandwidth", 2, 8, ETHERNET)  # one latency
    assert budget.planned_s == pytest.approx(2 * bench_budget.fixed_s(2, 2.0, ETHERNET) + 2 * 2.0 * small)
