"""Table 1 presets and the modelled power of a placement."""

import pytest

from shoal.dsm import placement
from shoal.errors import ShoalError


def _split(sleeps, wall=10.0):
    return [{"wall_s": wall, "sleep_s": s, "cpu_s": 1.0} for s in sleeps]


def test_a_rank_that_never_sleeps_keeps_its_core_busy():
    p = placement.preset("video-recs")
    # server, input, output spin; the four tasks sleep half of the run
    spinning = placement.modelled_power(p, _split([0, 0, 0, 5, 5, 5, 5]), 10.0)
    sleeping = placement.modelled_power(p, _split([9, 9, 9, 5, 5, 5, 5]), 10.0)
    by = {d["device"]: d for d in spinning}
    # Core i7 A (4 cores) holds input and output: 2 of 4 cores busy -> 10 + 20 * 0.5
    assert by["i7-a"]["power_W"] == pytest.approx(20.0)
    assert by["i7-b"]["power_W"] == pytest.approx(15.0)
    # a Cortex-A15 node (4 cores) with one task awake half the time: 3 + 4 * 0.125
    assert by["a15-1"]["power_W"] == pytest.approx(3.5)
    assert all(d["kind"] == "modelled" for d in spinning)
    quiet = {d["device"]: d for d in sleeping}
    assert quiet["i7-a"]["power_W"] == pytest.approx(10.0 + 20.0 * 2 / 40)
    assert sum(d["energy_J"] for d in sleeping) < sum(d["energy_J"] for d in spinning)


def test_presets_follow_table_1():
    recs = placement.preset("video-recs")
    assert len(recs.ranks) == 7 and len(recs.devices) == 6
    assert [prof for _, prof in recs.ranks[3:]] == ["cortex-a15"] * 4
    hough = placement.preset("hough-hetero")
    assert {prof for _, prof in hough.ranks} == {"core-i7", "parallella", "rpi3bplus",
                                                  "odroid-xu4"}


def test_a_preset_must_fit():
    p = placement.preset("video-recs")
    with pytest.raises(ShoalError, match="places 7 ranks, not 5"):
        placement.check_fits(p, 5)
    with pytest.raises(ShoalError, match="needs 6 devices but the cluster has 4"):
        placement.check_fits(p, 7, devices_available=4)
    with pytest.raises(ShoalError, match="unknown placement preset"):
        placement.preset("recs")


def test_a_preset_is_checked_against_the_program_it_places():
    assert placement.for_program("exp-e", "burst", 3).app in ("full", "burst", "lock")
    with pytest.raises(ShoalError, match="places video, not hough; use hough-hetero"):
        placement.for_program("video-recs", "hough", 7)
    with pytest.raises(ShoalError, match="places 7 ranks, not 3"):
        placement.for_program("video-recs", "video", 3)


def test_dsm_lab_plan_as_a_library_call(mpich):
    """`dsm.lab.plan` without the command line: --quick's contenders and rounds, the launches
    counted, bad rounds refused before anything runs."""
    from shoal.dsm import lab

    quick = lab.plan(lab.LabRequest(experiments=("E", "G"), mpis=("mpich",), quick=True))
    assert quick.modes == lab.QUICK_MODES and quick.rounds == lab.QUICK_ROUNDS
    assert quick.total == len(lab.QUICK_MODES) * (3 + 1)
    full = lab.plan(lab.LabRequest(experiments=("F",), modes="busy;seed003;sleep:100", mpis=("mpich",)))
    assert full.modes == ("busy", "seed003", "sleep:100") and full.rounds == 3 and full.total == 3 * 3 * 2
    with pytest.raises(ShoalError, match="--rounds 0: need at least 1"):
        lab.plan(lab.LabRequest(mpis=("mpich",), rounds=0))


def test_dsm_run_as_a_library_call(mpich):
    """`dsm.run.plan`/`run` without the command line: the program's ranks, the time split of
    each, the seed's message count beside ours; a preset for another program refused first."""
    import json

    from shoal.dsm import apps
    from shoal.dsm import run as dsm_run
    from shoal.execute.where import Where

    request = dsm_run.RunRequest("full", ["--writes", "100", "--sample", "0"], wait="sleep:0",
                                 where=Where(mpi="mpich"))
    planned = dsm_run.plan(request)
    assert planned.ranks == apps.app("full").default_ranks and planned.blocks is None
    done = dsm_run.run(planned)
    assert done.mpi.startswith("MPICH") and done.mode == "sleep:0" and done.devices == []
    assert [r["rank"] for r in done.time_split] == list(range(planned.ranks))
    report = json.loads(json.dumps(done.to_json()))["report"]
    assert report["messages"] > 0 and report["seed_messages"] == 360000
    with pytest.raises(ShoalError, match="places video, not full"):
        dsm_run.plan(dsm_run.RunRequest("full", preset="video-recs"))
