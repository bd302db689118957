"""A study preset fills the options a user did not give, and is saved for --resume."""

from __future__ import annotations

import pytest

from shoal import profiles
from shoal.bench import call_model
from shoal.errors import ShoalError
from shoal.inputs import grammar
from shoal.study import presets, run, schedule
from shoal.study.request import StudyRequest


def test_seed002_quick_is_32_boxes_two_imb_sizes_and_the_seeds_two_workloads():
    request = StudyRequest.create(preset="seed002", quick=True)
    request.validate()
    assert (request.emulate, request.nodes, str(request.reference)) == ("32xstb", "8,16,32", "none")
    assert request.size_list == "64,256K" and request.suite == "imb.PingPong,imb.Bcast,imb.Allreduce"
    assert request.work_size_list("raytrace") == ["512"]
    assert request.work_size_list("msa") == ["S20-L300", "S100-L40"]
    # Planned as one cluster of 32 set-top boxes, one rank each, at 8, 16 and 32 boxes.
    study = run.plan(request)
    assert [(p.nodes, p.ranks_per_node) for p in study.plans[0].placements] == [(8, 1), (16, 1), (32, 1)]
    assert {t.name for t in study.plans[0].tests} == {"imb.PingPong", "imb.Bcast", "imb.Allreduce"}
    # The workloads too run one rank per box, as the seed did (not one per core).
    assert {(p.nodes, p.ranks_per_node) for w in study.work.cluster for p in w.placements} == {
        (8, 1), (16, 1), (32, 1)}
    # Saved and read back for --resume: the same study.
    assert StudyRequest.from_manifest(request.to_manifest()) == request


def test_options_given_win_over_the_preset_and_drop_what_no_longer_runs():
    request = StudyRequest.create(preset="seed002", quick=True, nodes="8,16", workloads="raytrace",
                                  work_sizes={"raytrace": "256"})
    request.validate()
    assert request.nodes == "8,16" and request.work_sizes == {"raytrace": "256"}
    attached = StudyRequest.create(preset="seed002", quick=True, attach="plant")
    assert attached.emulate is None and attached.attach == "plant"


def test_an_unknown_preset_is_refused_with_what_to_do():
    with pytest.raises(ShoalError, match=r"--preset seed003: no such study preset; known: seed000, seed002"):
        StudyRequest.create(preset="seed003", quick=True)
    # The preset's own table is not changed by a request.
    StudyRequest.create(preset="seed002", quick=True, work_sizes={"msa": "S12-L40"})
    assert presets.QUICK["seed002"]["work_sizes"]["msa"] == "S20-L300,S100-L40"


# The full seed002's plan depends on the host's speed (a slower host runs at a larger dilation and
# fits fewer IMB points): these plans are made for a host of 1.53 reference cores.
PLAN_HOST_SPEED = 1.53


def test_the_full_seed002_is_128_boxes_beside_a_blade_with_what_does_not_fit_planned_as_not_run():
    request = StudyRequest.create(preset="seed002", host_speed=PLAN_HOST_SPEED)
    study = run.plan(request)  # plans only: nothing starts
    assert (request.emulate, request.nodes, str(request.reference)) == ("128xstb", "8,16,32,64,128",
                                                                         "8xxeon-blade@storage=seed002-nas")
    # The seed's 8 blades would raise the study's dilation on this 2-core host: one blade runs,
    # and one line says why.
    assert str(study.request.reference) == "xeon-blade@storage=seed002-nas"
    assert not study.request.reference_fallback
    assert study.reference_note.startswith("reference: 1 of the preset's 8 xeon-blade devices: all 8 compute at D = ")
    assert ("could not be held to their budgets (shoal bench or work --emulate 8xxeon-blade@storage=seed002-nas "
            "measures them") in study.reference_note
    bench = study.plans[0]
    # IMB's twelve tests of seed 002 §V at its six sizes.
    assert [t.name.split(".")[1] for t in bench.tests] == [
        "PingPong", "Sendrecv", "Exchange", "Allreduce", "Reduce", "Reduce_scatter", "Allgather", "Gather",
        "Scatter", "Bcast", "Alltoall", "Barrier"]
    assert bench.sizes == [64, 1024, 8192, 32768, 131072, 262144]
    # The blade runs the workloads with 8 ranks on its 8 cores, the boxes one each.
    assert {(p.label, p.nodes, p.ranks_per_node) for w in study.work.cluster for p in w.placements} == {
        ("128xstb", n, 1) for n in (8, 16, 32, 64, 128)} | {("reference", 1, 8)}
    assert {(w.workload.name, w.size) for w in study.work.cluster} >= {("raytrace", "512"), ("raytrace", "2048"),
                                                                       ("msa", "S20-L300"), ("msa", "S300-L20")}
    # A 128-box Alltoall of 256 KiB: 128 x 127 x 256 KiB through the one 27 Mbit/s upstream.
    todo, skipped = bench.points(128, "128xstb", 128)
    why = dict((f"{p.test}:{p.size_B}", reason) for p, reason in skipped)
    assert why["imb.Alltoall:262144"].startswith("not run: it would take 5.4e+03 s of host time at D = 2 "
                                                 "(one call 1.34e+03 s on the docsis-27m plant by the model, "
                                                 "35.7 s fixed at 128 ranks)")
    assert "imb.Alltoall:262144" not in {f"{p.test}:{p.size_B}" for p in todo}
    # What the preset keeps runs at 128 boxes whatever it costs: Bcast at every size (the seed's
    # 8 -> 128 ratio is of the mean over its sizes), Allreduce and Alltoall at 64 B.
    assert {f"{p.test}:{p.size_B}" for p in todo} == {f"imb.Bcast:{s}" for s in bench.sizes} | {
        "imb.Allreduce:64", "imb.Alltoall:64"}
    # At 8 boxes all but the five longest points run (Alltoall of 256 KiB, and the gathers and
    # the exchange, which cost four times their modelled calls; Gather of 256 KiB has three steps
    # of one box sending 256 KiB at its 5.12 Mbit/s).
    assert {f"{p.test}:{p.size_B}" for p, _ in bench.points(8, "128xstb", 8)[1]} == {
        "imb.Alltoall:262144", "imb.Allgather:262144", "imb.Allgather:131072", "imb.Exchange:262144",
        "imb.Gather:262144"}
    # A point that runs is not declared hung before its warm-up and call could end, six times
    # over: Bcast of 256 KiB at 128 boxes, 127 transfers of 256 KiB on the one upstream.
    bcast = call_model.call_s("imb.Bcast", 128, 262144, profiles.load_links()["docsis-27m"])
    assert ("128xstb", "imb.Bcast", 262144, 128, 128) not in bench.not_run
    assert bench.request.options.timeout_s >= 12 * bcast > 60
    # Saved and read back for --resume: the same plan.
    again = run.plan(StudyRequest.from_manifest(request.to_manifest()))
    assert again.plans[0].not_run == bench.not_run


def test_a_larger_imb_budget_runs_more_and_a_bad_one_is_refused():
    small = run.plan(StudyRequest.create(preset="seed002", host_speed=PLAN_HOST_SPEED)).plans[0].not_run
    large = run.plan(StudyRequest.create(preset="seed002", imb_budget_s=6000.0,
                                         host_speed=PLAN_HOST_SPEED)).plans[0].not_run
    assert set(large) < set(small)
    with pytest.raises(ShoalError, match=r"^--imb-budget must be a positive number of seconds, got -1$"):
        StudyRequest.create(preset="seed002", imb_budget_s=-1.0).validate()


def test_the_headline_reads_node_counts_that_start_above_one_and_skip():
    from shoal.model.resample import Interval
    from shoal.study import work_analysis
    from shoal.study.findings import Combined

    def head(energy):
        best = min(energy, key=energy.get)
        combined = Combined("sleeping", {"raytrace 512": 1.0}, {}, energy, best,
                            Interval(45.2, 31.6, 81.6, 200, 0), [], [])
        return work_analysis.headline(combined, [])

    # seed002's 8, 16, 32 boxes, perf/W still rising at 32: compared with 16, the next measured.
    rising = head({8: 1.0, 16: 0.9, 32: 0.75})
    assert rising.at_least and rising.size == 32 and rising.rising_by == pytest.approx(0.9 / 0.75 - 1)
    assert "+20.0% over N = 16" in rising.text
    best = head({8: 1.0, 16: 0.8, 32: 0.9})
    assert not best.at_least and best.gain == pytest.approx(1.25)
    assert "best perf/W at 16 device(s) of 8..32 measured (1.25x 8 devices')" in best.text
    # The default 1..N reads as before.
    one = head({1: 1.0, 2: 0.8, 3: 0.9})
    assert "of 1..3 measured (1.25x one device's)" in one.text


def test_the_full_seed002_states_its_planned_time_and_what_it_left_out():
    study = run.plan(StudyRequest.create(preset="seed002", host_speed=PLAN_HOST_SPEED))
    timing = study.timing
    # Two rounds (the warm-up and one counted) of the measured workload rounds: 8 boxes 350 s,
    # 16 boxes 228 s, 32 boxes 165 s, 64 boxes 162 s, 128 boxes 239 s, the blade 36 s.
    assert timing.work_rounds == 2 and timing.work_s == pytest.approx(2 * (350 + 228 + 165 + 162 + 239 + 36))
    # The blade's 67 IMB points, each at its measured cost.
    assert timing.reference_imb_s == pytest.approx(67 * schedule.REFERENCE_POINT_S)
    # IMB on the plant gets what is left of the 85 minutes, and plans within it.
    assert timing.imb_budget_s == pytest.approx(5100 - timing.setup_s - timing.work_s - timing.reference_imb_s)
    assert timing.imb.planned_s <= timing.imb_budget_s and timing.total_s <= 5100
    dropped = {}
    for (_test, _size, nodes, _ranks) in study.plans[0].not_run and timing.imb.not_run:
        dropped[nodes] = dropped.get(nodes, 0) + 1
    assert dropped[128] == 59 and dropped[128] > dropped[64] > dropped[32] > dropped[8]
    text = "\n".join(timing.lines())
    assert "planned: 85 min of the study's 85 min" in text
    assert "workloads: 39 min, 2 rounds (the warm-up and 1 counted)" in text
    assert f"left out to fit: {len(timing.imb.not_run)} IMB points (" in text
    assert "59 of 67 at 128 boxes" in text
    # A slower host runs the plant at a larger dilation: fewer IMB points fit the same 85 minutes.
    slower = run.plan(StudyRequest.create(preset="seed002", host_speed=0.8)).timing
    assert set(timing.imb.not_run) < set(slower.imb.not_run) and slower.total_s <= 5100


def test_a_study_budget_without_measured_workload_rounds_or_room_for_imb_is_refused():
    with pytest.raises(ShoalError, match=r"preset \(none\) does not hold; give --imb-budget SECONDS instead"):
        run.plan(StudyRequest.create(emulate="8xstb", nodes="4,8", reference="none", suite="imb.Bcast",
                                     sizes="64", workloads="raytrace", study_budget_s=600.0))
    with pytest.raises(ShoalError, match=r"^the study's 1000 s hold no IMB on the plant: its workloads are "
                                         r"planned at 2360 s"):
        run.plan(StudyRequest.create(preset="seed002", study_budget_s=1000.0, host_speed=PLAN_HOST_SPEED))


def test_seed000_is_six_minnowboards_beside_the_nuc_with_mpbench_to_32_mib():
    request = StudyRequest.create(preset="seed000", host_speed=1.0)
    assert (request.emulate, str(request.reference), request.suite) == ("6xminnowboard", "nuc", "mpbench")
    sizes = grammar.sizes(request.size_list)
    assert max(sizes) == 32 * 2**20 and 2**18 in sizes  # the thesis's "218MB" read as 2^18 B
    the_plan = run.plan(request)
    labels = {(p.label, p.nodes) for p in the_plan.plans[0].placements}
    assert labels == {("6xminnowboard", n) for n in range(1, 7)} | {("reference", 1)}
    # 18 minutes planned: the workloads' seven rounds as measured, MPBench what they leave.
    timing = the_plan.timing
    assert timing.work_rounds == 7 and timing.work_s == pytest.approx(7 * 36.2)
    assert timing.total_s <= 1080 and timing.imb.planned_s <= timing.imb_budget_s
    text = "\n".join(timing.lines())
    assert "MPBench on the ethernet-100m links: " in text and "MPBench on the reference: " in text
    # Only 32 MiB points over the wire are left out, the costliest first; one board's two
    # ranks (through memory) and every smaller size run.
    dropped = the_plan.plans[0].not_run
    assert dropped and {(label, size) for label, _test, size, _n, _r in dropped} == {
        ("6xminnowboard", 32 * 2**20)}
    assert all(nodes >= 2 for *_, nodes, _r in dropped)
    assert "left out to fit: " in text and " at 6 devices" in text
    # A 32 MiB call is seconds: a point is not hung before six times its two calls (as slowed
    # as its test was measured).
    options = the_plan.plans[0].request.options
    longest = max(call_model.slowed_call_s(t.name, n, 32 * 2**20, profiles.load_links()["ethernet-100m"])
                  for t in the_plan.plans[0].tests for n in range(2, 7)
                  if ("6xminnowboard", t.name, 32 * 2**20, n, n) not in dropped)
    assert options.timeout_s == pytest.approx(12 * longest)
    quick = StudyRequest.create(preset="seed000", quick=True)
    assert quick.nodes == "1,3,4,6" and quick.workload_list == ["raytrace"]


def test_seed002_launches_from_the_head_and_launch_box_gives_each_mpis_own():
    # The seed's OERTE started each box's rank from the head-end: the preset's default layout.
    request = StudyRequest.create(preset="seed002", quick=True)
    assert request.launch == "head" == presets.SEED002_LAUNCH
    study = run.plan(request)
    assert study.plans[0].request.launch == "head"
    assert {w.request.launch for w in study.work.cluster} == {"head"}
    assert request.layouts(study.cluster_label, run.REFERENCE) == {"32xstb": "head"}
    # Given on the command line, --launch wins, and is saved for --resume.
    box = StudyRequest.create(preset="seed002", quick=True, launch="box")
    assert run.plan(box).plans[0].request.launch == "box"
    assert StudyRequest.from_manifest(box.to_manifest()).launch == "box"
    # A study without the preset keeps the MPI's own launch; a host reference runs here.
    plain = StudyRequest.create(emulate="2xminnowboard", reference="host", launch="head")
    assert plain.layouts("2xminnowboard", run.REFERENCE) == {"2xminnowboard": "head", "reference": "local"}
    assert StudyRequest.create().launch == "box"


def test_launch_head_on_real_hosts_is_refused_before_anything_starts(tmp_path):
    inventory = tmp_path / "hosts.toml"
    inventory.write_text('[cluster]\nmode = "ssh"\n\n[[nodes]]\nname = "a"\nprofile = "minnowboard"\nslots = 2\n')
    request = StudyRequest.create(cluster=str(inventory), launch="head")
    with pytest.raises(ShoalError, match=r"--launch head starts ranks from an emulated cluster's head"):
        request.validate()
    # The preset's head layout gives way to a real inventory's own launch.
    assert StudyRequest.create(preset="seed002", quick=True, cluster=str(inventory)).launch == "box"


def test_a_reference_of_several_devices_is_parsed_saved_and_refused_out_of_range():
    from shoal.study.reference import Reference

    blades = Reference.parse("8xxeon-blade")
    assert (blades.profile, blades.count, str(blades)) == ("xeon-blade", 8, "8xxeon-blade")
    assert str(Reference.parse("xeon-blade")) == "xeon-blade" and Reference.parse("xeon-blade").count == 1
    # What its devices carry stays with them: back from a manifest, and with fewer of them.
    stored = Reference.parse("8xxeon-blade@storage=seed002-nas")
    assert (stored.profile, stored.count, stored.suffix) == ("xeon-blade", 8, "@storage=seed002-nas")
    assert Reference.parse(str(stored)) == stored
    assert stored.with_count(2).term == "2xxeon-blade@storage=seed002-nas"
    with pytest.raises(ShoalError, match=r"--reference 0xxeon-blade: give 1 to 64 devices"):
        Reference.parse("0xxeon-blade")
    # The user's reference runs as given: no fewer blades behind their back.
    given = StudyRequest.create(preset="seed002", reference="2xxeon-blade")
    assert str(given.reference) == "2xxeon-blade" and not given.reference_fallback
