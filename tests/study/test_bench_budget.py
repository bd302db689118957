"""The IMB plan on a shared plant: modelled calls and a fixed cost per point by node count."""

from __future__ import annotations

import pytest

from shoal import profiles
from shoal.study import imb_budget

DOCSIS = profiles.load_links()["docsis-27m"]


def test_a_points_fixed_cost_grows_with_the_boxes_and_with_d():
    # The least-squares line through two runs' measured costs (plant_calls.FIXED_S): 1.5 + 0.267 N.
    assert imb_budget.fixed_s(8, 2.0) == pytest.approx(3.636)
    assert imb_budget.fixed_s(128, 2.0) == pytest.approx(35.676)
    assert imb_budget.fixed_s(128, 4.0) == pytest.approx(2 * 35.676)


def test_a_barrier_at_128_boxes_is_cheap_on_the_wire_but_not_in_host_time():
    points = [("imb.Barrier", 0, 8), ("imb.Barrier", 0, 128)]
    # A barrier sends no bytes: 2 log2(P) latencies of 5 ms a call, 0.03 s at 8 and 0.07 s at 128.
    assert imb_budget.call_s("imb.Barrier", 8, 0, DOCSIS) == pytest.approx(0.03)
    assert imb_budget.call_s("imb.Barrier", 128, 0, DOCSIS) == pytest.approx(0.07)
    # Both calls fit 10 s many times over; with the fixed costs (3.64 + 35.68 s) only the 8 does.
    budget = imb_budget.plan(points, DOCSIS, 2.0, 10.0)
    assert list(budget.not_run) == [("imb.Barrier", 0, 128)]
    assert budget.planned_s == pytest.approx(2 * 2 * 0.03 + 3.636)
    assert budget.dropped_s == pytest.approx(2 * 2 * 0.07 + 35.676)
    assert budget.planned == {8: 1}
    assert budget.not_run[("imb.Barrier", 0, 128)] == (
        "not run: it would take 36 s of host time at D = 2 (one call 0.07 s on the docsis-27m plant "
        "by the model, 35.7 s fixed at 128 ranks), over the study's 10 s for IMB on it")
    # Enough for both: nothing left out.
    assert imb_budget.plan(points, DOCSIS, 2.0, 44.0).not_run == {}


def test_kept_points_run_over_the_budget_and_the_others_go_first():
    points = [("imb.Bcast", 262144, 128), ("imb.Bcast", 64, 128), ("imb.Barrier", 0, 128)]
    budget = imb_budget.plan(points, DOCSIS, 2.0, 1.0, keep=frozenset({"imb.Bcast"}))
    assert list(budget.not_run) == [("imb.Barrier", 0, 128)]
    assert budget.planned_s > 1.0 and budget.planned == {128: 2}
    by_size = imb_budget.plan(points, DOCSIS, 2.0, 1.0, keep=frozenset({"imb.Bcast@64"}))
    assert set(by_size.not_run) == {("imb.Bcast", 262144, 128), ("imb.Barrier", 0, 128)}


def test_gathers_cost_four_times_their_modelled_calls():
    # Gather and Scatter move the same bytes in the same steps; Gather queued 3-4x its model.
    call = imb_budget.call_s("imb.Gather", 32, 131072, DOCSIS)
    assert call == pytest.approx(imb_budget.call_s("imb.Scatter", 32, 131072, DOCSIS))
    gather = imb_budget.point_s("imb.Gather", 32, 131072, DOCSIS, 2.0)
    scatter = imb_budget.point_s("imb.Scatter", 32, 131072, DOCSIS, 2.0)
    assert gather - imb_budget.fixed_s(32, 2.0) == pytest.approx(4 * (scatter - imb_budget.fixed_s(32, 2.0)))
    # And its point may take as long before it counts as hung.
    assert imb_budget.plan([("imb.Gather", 131072, 32)], DOCSIS, 2.0, 1e6).point_timeout_s == pytest.approx(
        6 * 2 * 4 * call)
