"""The study's answer from workload runs, on tables built from the model itself: the fit
must give back the f, n* and verdicts that made them (no MPI here; test_study.py runs it)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from shoal.study import analysis, work_analysis
from shoal.study.workloads import CONVERGED, MORE, OUT_OF_REACH, OUT_OF_REPS, OUT_OF_TIME, Precision, ci_rel

DEVICE = {"name": "board", "idle_W": 2.5, "busy_W": 5.0, "cores": 2}  # k = 0.5
LABEL = "6xboard"


def _rows(f: float, switch_W: float, serial_share: float | None = None, nodes=range(1, 7),
          workload: str = "raytrace", data_B: float | None = None, flat: bool = False,
          noise: float = 0.004) -> pd.DataFrame:
    """Runs of a job of 1 s on one device, as Amdahl and Woo-Lee with a switch say they go,
    with +-0.4 % (``noise``) of alternating noise so the fit has a spread to work with."""
    rows = []
    k = DEVICE["idle_W"] / DEVICE["busy_W"]
    for n in nodes:
        for rep in range(3):
            t = 1.0 if flat else (1 - f) + f / n
            t *= 1 + noise * (rep - 1) * (-1) ** n
            busy = DEVICE["busy_W"]
            energy = busy * t * (1 + (n - 1) * k * (1 - f)) / ((1 - f) + f / n) if not flat else busy * n * t
            energy += switch_W * t
            idle = n * DEVICE["idle_W"] + switch_W
            share = serial_share if serial_share is not None else (1 - f) / ((1 - f) + f / n) / n
            rows.append({"config": LABEL, "nodes": n, "ranks": 2 * n, "workload": workload, "size": "X",
                         "unit": "pixel", "rep": rep, "time_s": t, "serial_s": share * t, "comm_s": 0.0,
                         "work": 1e6, "energy_J": energy, "energy_net_J": energy - idle * t,
                         "idle_power_W": idle, "dilation": 1.0,
                         "power_mean_W": energy / t, "shared_power_W": switch_W, "check": "off",
                         "point_id": f"{LABEL}/{n}/{2 * n}/{workload}/X/{rep}", "data_B": data_B or ""})
    return pd.DataFrame(rows)


def test_n_star_is_recovered_with_its_range_and_switch_sensitivity():
    f, switch_W = 0.95, 2.0
    out = work_analysis.analyse_one(_rows(f, switch_W), LABEL, "reference", DEVICE)
    c, k = switch_W / DEVICE["busy_W"], 0.5
    expected = math.sqrt(c * f / (k * (1 - f)))  # 3.90
    assert out.fit.f == pytest.approx(f, abs=0.005)
    assert out.fit.r2_perf > 0.99 and out.fit.describes
    assert out.n_star == pytest.approx(expected, rel=0.05)
    lo, hi = out.n_star_range_se
    assert lo <= out.n_star <= hi
    # The bootstrap interval (f refitted to resampled repetitions) holds the fitted n*.
    boot = out.conditions["sleeping"].n_star.to_dict()
    assert boot["resamples"] == 400 and boot["lo"] <= out.n_star <= boot["hi"]
    assert boot["hi"] < 2 * expected
    # Measured and predicted best agree (E(n) is least at n = 4 for these inputs).
    assert out.n_best_measured == 4
    assert "best measured perf/W at n = 4" in out.verdict
    # Spinning, a waiting device draws busy watts (k = 1): n* = sqrt(c f / (1 - f)), smaller.
    spin = out.conditions["spinning"].n_star.to_dict()
    assert spin["value"] == pytest.approx(math.sqrt(c * f / (1 - f)), rel=0.05)
    # n* grows as the square root of the switch's watts, and is 1 without a switch.
    by_watts = {s["switch_W"]: s["n_star"] for s in out.n_star_by_switch_W}
    assert by_watts[0.0] == 1.0
    assert by_watts[4.0] == pytest.approx(math.sqrt(2) * by_watts[2.0], rel=1e-6)
    assert out.cross_check.startswith("the fitted f = 0.95") and "agrees" in out.cross_check


def test_without_shared_power_the_answer_is_one_device_and_why():
    out = work_analysis.analyse_one(_rows(0.95, 0.0), LABEL, "reference", DEVICE)
    assert out.c == 0 and out.n_star == 1.0
    assert out.n_best_measured == 1
    assert "best perf/W at n = 1" in out.verdict and "no power is shared" in out.verdict


def test_a_workload_that_does_not_speed_up_is_reported_as_not_scaling():
    out = work_analysis.analyse_one(_rows(0.95, 2.0, flat=True), LABEL, "reference", DEVICE)
    assert out.scaling == "not_scaling"
    assert out.verdict.startswith("does not scale: 1.00x from 1 to 6 devices; run it on one device")


def test_a_sweep_from_eight_devices_speaks_of_eight_not_of_one():
    # A preset's 8, 16, 32: the speed-up is over 8 devices, and no verdict sends the work to
    # one device, which never ran it.
    out = work_analysis.analyse_one(_rows(0.95, 2.0, flat=True, nodes=(8, 16, 32)), LABEL, "reference", DEVICE)
    assert out.scaling == "not_scaling"
    assert out.verdict.startswith("does not scale from 8 to 32 devices: 1.00x; 8 devices do it nearly as fast")
    assert "one device" not in out.verdict
    from shoal.report import study_workloads

    assert study_workloads.summary_rows([out])[0]["speed-up"] == "1.00 from n=8 to n=32"


def test_f_below_the_measured_serial_share_is_called_out():
    # The program spends 1 % serially, yet speeds up as if f were 0.8: communication grows.
    out = work_analysis.analyse_one(_rows(0.8, 2.0, serial_share=0.01), LABEL, "reference", DEVICE)
    assert out.f_serial == pytest.approx(0.99)
    assert out.fit.f == pytest.approx(0.8, abs=0.01)
    assert "grows with n" in out.cross_check


def test_a_combined_optimum_uses_only_workloads_the_model_describes():
    frame = pd.concat([_rows(0.95, 2.0), _rows(0.9, 2.0, workload="msa"),
                       _rows(0.9, 2.0, workload="is", flat=True)])
    manifest = {"reference": "none", "clusters": {LABEL: {
        "profiles": {"board": DEVICE}, "nodes": [{"profile": "board"}] * 6}}}
    section = work_analysis.analyse(frame, manifest, LABEL, "reference")
    assert [w.workload for w in section.workloads] == ["raytrace", "msa", "is"]
    mix = section.combined["sleeping"]
    assert set(mix.weights) == {"raytrace X", "msa X"} and mix.weights["msa X"] == pytest.approx(0.5)
    assert mix.left_out["is X"].startswith("does not scale")
    # n*_mix lies between the members' own n* (3.90 for f = 0.95, 2.68 for f = 0.9).
    assert 2.68 < mix.n_star.value < 3.90 and mix.n_star.lo <= mix.n_star.value <= mix.n_star.hi
    head = section.headline["sleeping"]
    assert head.size == 3 and not head.at_least and head.size == mix.best_measured
    # The mix's perf/W at 4 devices is 0.5 % below that at 3, inside the points' +-0.4 % of
    # noise: the headline names both.
    assert (head.best_range.low, head.best_range.high) == (3, 4)
    assert head.best_range.within == pytest.approx(mix.measured_energy[4] / mix.measured_energy[3] - 1)
    assert head.text.startswith("sleeping (libshoalwait): 3–4 devices of 1..6 measured: perf/W within 0.5% "
                                "of each other, within the points' 95 % uncertainty (best measured at 3")
    # Perf/W at 4 over 3's, in every resample: an interval that holds 1.
    assert mix.ppw_vs_best[4].contains(1.0) and not mix.ppw_vs_best[2].contains(1.0)
    assert mix.ppw_vs_best[3].value == 1.0
    # Every row behind the headline is a row of the table, those of both sizes among them.
    assert head.rows and set(head.rows) <= set(frame["point_id"])
    assert {pid.split("/")[1] for pid in head.rows} == {"1", "3", "4"}


def test_weights_pull_the_combined_answer_toward_the_heavier_workload():
    frame = pd.concat([_rows(0.95, 2.0), _rows(0.9, 2.0, workload="msa")])
    manifest = {"reference": "none", "clusters": {LABEL: {
        "profiles": {"board": DEVICE}, "nodes": [{"profile": "board"}] * 6}}}
    even = work_analysis.analyse(frame, manifest, LABEL, "reference").combined["sleeping"]
    msa = work_analysis.analyse(frame, manifest, LABEL, "reference",
                                {"raytrace": 0.1, "msa": 0.9}).combined["sleeping"]
    assert msa.n_star.value < even.n_star.value
    only = work_analysis.analyse(frame, manifest, LABEL, "reference",
                                 {"raytrace": 0.0, "msa": 1.0}).combined["sleeping"]
    assert only.left_out == {"raytrace X": "weight 0 in --mix"}
    assert only.n_star.value == pytest.approx(math.sqrt(0.4 * 0.9 / (0.5 * 0.1)), rel=0.05)


def test_an_optimum_beyond_the_measured_sizes_is_reported_as_at_least_n():
    # f = 0.99 with a 4 W switch: n* = sqrt(0.8 * 0.99 / (0.5 * 0.01)) = 12.6 on 1..4 measured.
    frame = _rows(0.99, 4.0, nodes=range(1, 5))
    manifest = {"reference": "none", "clusters": {"4xboard": {
        "profiles": {"board": DEVICE}, "nodes": [{"profile": "board"}] * 4}}}
    frame["config"] = "4xboard"
    head = work_analysis.analyse(frame, manifest, "4xboard", "reference").headline["sleeping"]
    assert head.at_least and head.size == 4 and head.largest_measured == 4
    assert head.text.startswith("sleeping (libshoalwait): ≥ 4 devices: perf/W still rising at N = 4 (measured")
    assert "model suggests ~12" in head.text and head.rising_by > 0
    assert "recommended" not in head.text


def test_spinning_charges_every_core_that_holds_a_rank_at_busy_watts():
    out = work_analysis.analyse_one(_rows(0.9, 2.0), LABEL, "reference", DEVICE)
    for p in out.cluster:
        # Two ranks on each two-core device: busy watts on every device, plus the switch.
        assert p["power_spin_W"] == pytest.approx(p["nodes"] * 5.0 + 2.0)
        assert p["energy_spin_J"] == pytest.approx(p["power_spin_W"] * p["time_median_s"])
        assert p["energy_saved"] == pytest.approx(1 - p["energy_J"] / p["energy_spin_J"])
    # With one device nothing waits; with six, five wait through the serial part.
    assert out.cluster[0]["energy_saved"] == pytest.approx(0.0, abs=1e-9)
    assert out.cluster[-1]["energy_saved"] > 0.1


def test_a_point_repeats_until_its_median_is_known_or_its_budget_is_spent():
    precision = Precision(ci=0.03, min_reps=6, max_reps=12, budget_s=30.0)
    assert precision.state([1.0] * 5, 5.0) == MORE           # five cannot bound the median at 95 %
    assert precision.state([1.0, 1.01] * 3, 6.0) == CONVERGED
    # CI 7.4 % at six: twelve could bring it to about 5 %, not to 3 %: stop, it is the host.
    wandering = [1.0, 1.1, 0.95, 1.05, 0.98, 1.02]
    assert precision.state(wandering, 6.0) == OUT_OF_REACH
    # Just above the target at six, within reach at twelve: repeat.
    close = [1.0, 1.04, 0.97, 1.03, 0.99, 1.01]
    assert 0.03 < ci_rel(close) < 0.03 * 2 ** 0.5 and precision.state(close, 6.0) == MORE
    assert precision.state(close * 2, 12.0) == CONVERGED
    assert precision.state([1.0, 1.3] * 6, 12.0) == OUT_OF_REPS
    assert precision.state([10.0, 13.0] * 3, 69.0) == OUT_OF_TIME
    # A slow point gets its six repetitions before its budget counts.
    assert precision.state([10.0, 13.0, 10.0, 13.0, 10.0], 57.5) == MORE


def test_the_warm_up_round_is_kept_on_disk_but_not_counted():
    frame = _rows(0.95, 2.0)
    slow = frame["rep"] == 0
    frame.loc[slow, "time_s"] *= 4   # a first launch on fresh devices, four times slower
    precision = Precision(ci=0.03, min_reps=2, max_reps=2, budget_s=30.0, warmup=1)
    manifest = {"reference": "none", "clusters": {LABEL: {
        "profiles": {"board": DEVICE}, "nodes": [{"profile": "board"}] * 6}}}
    section = work_analysis.analyse(frame, manifest, LABEL, "reference", precision=precision)
    (w,) = section.workloads
    assert all(p["reps"] == 2 for p in w.cluster)
    assert w.fit.f == pytest.approx(0.95, abs=0.005)
    assert not any(pid.endswith("/0") for p in w.cluster for pid in p["point_ids"])


def test_offload_uses_what_a_stream_workload_measured():
    frame = _rows(0.9, 2.0, workload="videostream", data_B=4e6)
    section = work_analysis.analyse(frame, {"reference": "none", "clusters": {LABEL: {
        "profiles": {"board": DEVICE}, "nodes": [{"profile": "board"}] * 6}}}, LABEL, "reference")
    stream = analysis.measured_stream(section)
    assert stream["device_s_per_B"] == pytest.approx(1.0 / 4e6, rel=0.01)
    assert stream["parallel_fraction"] == pytest.approx(0.9, abs=0.01)
    scenario = analysis.offload_scenario({"clusters": {}}, 4, {}, stream)
    assert scenario.device_s_per_B == stream["device_s_per_B"]
    assert scenario.rate_Bps == analysis.SEED004_RATE_Bps
    assert scenario.sources["device_s_per_B"].startswith("measured: videostream X")
    # What the user says still wins.
    assert analysis.offload_scenario({"clusters": {}}, 4, {"rate_Bps": 1e5}, stream).rate_Bps == 1e5


def test_a_workload_result_is_written_to_findings_json_with_numbers():
    from shoal.runs import jsonout

    out = work_analysis.analyse_one(_rows(0.95, 2.0), LABEL, "reference", DEVICE)
    data = json.loads(jsonout.dumps(out.to_json()))
    assert list(data)[:6] == ["workload", "size", "unit", "cluster", "reference", "data_B_per_run"]
    assert not {"status", "model_fit", "f_boot"} & set(data)
    assert isinstance(data["fit"]["f"], float) and data["fit"]["describes"] is True
    assert data["conditions"]["sleeping"]["n_star"] == out.conditions["sleeping"].n_star.to_dict()
    assert isinstance(data["conditions"]["sleeping"]["n_star"]["value"], float)
    assert data["n_star"] == pytest.approx(out.n_star) and data["verdict"] == out.verdict
    nothing = work_analysis.analyse_one(_rows(0.95, 2.0), "another-cluster", "reference", DEVICE)
    assert nothing.to_json() == {"workload": "raytrace", "size": "X", "unit": nothing.unit, "cluster": [],
                                 "reference": None, "data_B_per_run": None,
                                 "status": "no runs on the cluster finished"}


def _two_workloads(noise: float, nodes=range(1, 7), f=(0.95, 0.9), switch_W: float = 2.0):
    frame = pd.concat([_rows(f[0], switch_W, noise=noise, nodes=nodes),
                       _rows(f[1], switch_W, workload="msa", noise=noise, nodes=nodes)])
    manifest = {"reference": "none", "clusters": {LABEL: {
        "profiles": {"board": DEVICE}, "nodes": [{"profile": "board"}] * 6}}}
    return work_analysis.analyse(frame, manifest, LABEL, "reference")


def test_a_size_that_stands_clear_of_its_neighbours_is_named_alone():
    # The mix above with +-0.05 % of noise: 3 devices' 0.5 % over 4 is now outside it.
    section = _two_workloads(0.0005)
    head = section.headline["sleeping"]
    assert head.size == 3 and (head.best_range.low, head.best_range.high) == (3, 3)
    assert not head.best_range.tied and head.best_range.within == 0.0
    assert head.text.startswith("sleeping (libshoalwait): best perf/W at 3 device(s) of 1..6 measured (1.14x")
    vs_best = section.combined["sleeping"].ppw_vs_best
    assert not vs_best[4].contains(1.0) and not vs_best[2].contains(1.0)


def test_perf_per_watt_rising_at_n_within_its_noise_is_a_range_not_still_rising():
    # f = 0.99 and a 4 W switch on 1..4: perf/W at 4 is 5 % above 3's. With +-0.4 % of noise
    # that is "still rising" (test above); with +-5 % it is not told apart from 3's.
    frame = _rows(0.99, 4.0, nodes=range(1, 5), noise=0.05)
    frame["config"] = "4xboard"
    manifest = {"reference": "none", "clusters": {"4xboard": {
        "profiles": {"board": DEVICE}, "nodes": [{"profile": "board"}] * 4}}}
    section = work_analysis.analyse(frame, manifest, "4xboard", "reference")
    head = section.headline["sleeping"]
    energy = section.combined["sleeping"].measured_energy
    assert head.size == 4 and not head.at_least and head.rising_by is None
    assert (head.best_range.low, head.best_range.high) == (3, 4)
    assert head.best_range.within == pytest.approx(energy[3] / energy[4] - 1)
    assert "still rising" not in head.text
    assert head.text.startswith("sleeping (libshoalwait): 3–4 devices of 1..4 measured: perf/W within 5.0% "
                                "of each other")
    # The workload's own verdict says the same.
    (w,) = section.workloads
    assert (w.best_range.low, w.best_range.high) == (3, 4) and "still rising" not in w.verdict
    assert w.verdict.startswith("best measured perf/W at n = 4, tied with n = 3–4 within 5.0% "
                                "(within the points' 95 % uncertainty)")
    clear = work_analysis.analyse_one(_rows(0.99, 4.0, nodes=range(1, 5)), LABEL, "reference", DEVICE)
    assert not clear.best_range.tied and clear.verdict.startswith("perf/W still rising at n = 4 (measured)")
    # The offload decision is taken at the measured best and says it is the best of a range.
    assert analysis.offload_size(head, [1, 2, 3, 4]) == (
        4, "the measured best size of the workloads, of the range 3–4 whose perf/W lies within 5.0%")


def test_the_range_and_the_intervals_are_written_to_findings_json_as_numbers():
    from shoal.runs import jsonout

    section = _two_workloads(0.004)
    head = json.loads(jsonout.dumps(section.headline["sleeping"].to_dict()))
    assert head["best_range"] == {"low": 3, "high": 4, "within": pytest.approx(0.0054, abs=0.001), "level": 0.95}
    assert head["smallest_measured"] == 1
    mix = json.loads(jsonout.dumps(section.combined["sleeping"].to_dict()))
    assert sorted(mix["measured_ppw"], key=int) == [str(n) for n in range(1, 7)]
    four = mix["measured_ppw"]["4"]
    assert isinstance(four["lo"], float) and four["lo"] <= four["value"] <= four["hi"]
    assert four["value"] == pytest.approx(1 / mix["measured_energy"]["4"])
