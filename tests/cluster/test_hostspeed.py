"""This host's core speed in reference cores: the calibration's arithmetic on injected kernel
timings, its cache and check, the share of a host core each device gets, and the real probe."""

from __future__ import annotations

import json
import time
import math
import stat

import pytest

from shoal.cluster import hostspeed
from shoal.cluster.emulated import EmulatedCluster
from shoal.cluster.inventory import from_emulate
from shoal.errors import ShoalError
from shoal.profiles import HOST, MIX, DeviceProfile, reference_kernels

REF = {name: k.unit_s for name, k in reference_kernels().items()}


def _probe_output(times: dict[str, list[float]], units: float = 1000.0) -> dict:
    """What ``shoal-work --probe`` prints, for kernels taking ``times`` s per unit per round."""
    return {"probe": [{"name": name, "unit": "u",
                       "samples": [{"units": units, "cpu_s": t * units, "wall_s": t * units * 1.5}
                                   for t in per_round]}
                      for name, per_round in times.items()]}


def test_speed_is_the_reference_time_over_the_fastest_sample():
    # A core twice the reference on raytrace, 1.5x on the others; load slowed some rounds.
    copy_a = _probe_output({"raytrace": [REF["raytrace"] / 2, REF["raytrace"] / 1.8],
                            "videostream": [REF["videostream"] / 1.5] * 2,
                            "msa": [REF["msa"] / 1.5, REF["msa"] / 1.2],
                            "ep": [REF["ep"] / 1.5] * 2})
    copy_b = _probe_output({"raytrace": [REF["raytrace"] / 1.9] * 2,
                            "videostream": [REF["videostream"] / 1.4] * 2,
                            "msa": [REF["msa"] / 1.5] * 2, "ep": [REF["ep"] / 1.5] * 2})
    speed = hostspeed.from_probes([copy_a, copy_b])
    assert speed.by_kernel["raytrace"] == pytest.approx(2.0)
    assert speed.by_kernel["videostream"] == pytest.approx(1.5)
    assert speed.by_kernel["msa"] == pytest.approx(1.5)
    assert speed.mix == pytest.approx((2.0 * 1.5 ** 3) ** 0.25)
    assert speed.unit_s["raytrace"] == pytest.approx(REF["raytrace"] / 2)
    assert (speed.copies, speed.rounds) == (2, 2)
    # The spread: how far the median block's mix sits below the fastest block's. Four rounds
    # make blocks of two (copy a's, copy b's), each read by its own fastest samples.
    mixes = [(2 * 1.5 * 1.5 * 1.5) ** 0.25, (1.9 * 1.4 * 1.5 * 1.5) ** 0.25]
    assert speed.spread == pytest.approx(1 - (sum(mixes) / 2) / max(mixes))


def test_each_device_core_gets_the_share_of_its_own_kernel():
    speed = hostspeed.HostSpeed({"raytrace": 2.0, "videostream": 1.25, "msa": 1.6, "ep": 1.0},
                                "measured")
    box = DeviceProfile("box", speed=0.01, speed_kernel="raytrace")
    board = DeviceProfile("board", speed=0.2, speed_kernel="videostream")
    estimate = DeviceProfile("estimate", speed=0.25, speed_kernel=MIX)
    mine = DeviceProfile("mine", speed=1.0, speed_kernel=HOST)
    fast = DeviceProfile("fast", speed=3.0, speed_kernel="raytrace")
    assert speed.core_share(box) == pytest.approx(0.005)
    assert speed.core_share(board) == pytest.approx(0.16)
    assert speed.core_share(estimate) == pytest.approx(0.25 / speed.mix)
    assert speed.core_share(mine) == 1.0
    assert speed.core_share(fast) == 1.0  # never more than a whole host core


def test_emulated_budgets_follow_the_host_speed():
    inv = from_emulate("2xminnowboard+1xstb")
    slow = EmulatedCluster(inv, host=hostspeed.HostSpeed.asked(1.0))._budgets()
    fast = EmulatedCluster(inv, host=hostspeed.HostSpeed.asked(2.0))._budgets()
    assert slow["minnowboard1"] == pytest.approx((0.25, 0.5))
    assert fast["minnowboard1"] == pytest.approx((0.125, 0.25))
    assert fast["stb1"][0] == pytest.approx(0.0095 / 2)


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "fast", 1e9])
def test_a_host_speed_asked_must_be_a_positive_number(value):
    with pytest.raises(ShoalError, match="--host-speed"):
        hostspeed.HostSpeed.asked(value)


def test_an_asked_speed_is_every_kernel_and_survives_the_record():
    asked = hostspeed.HostSpeed.asked(1.8)
    assert set(asked.by_kernel) == set(REF) and asked.mix == pytest.approx(1.8)
    back = hostspeed.HostSpeed.from_record(json.loads(json.dumps(asked.describe())))
    assert back == asked
    assert hostspeed.HostSpeed.from_record(1.6).mix == pytest.approx(1.6)  # older clusters' number


def _fake_program(path, per_unit: dict[str, float]):
    """A stand-in for shoal-work --probe: prints fixed timings for the kernels it is asked."""
    data = {name: _probe_output({name: [t] * 3})["probe"][0] for name, t in per_unit.items()}
    path.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                    f"data = {json.dumps(data)}\n"
                    "names = sys.argv[sys.argv.index('--probe') + 1].split(',')\n"
                    "print(json.dumps({'probe': [data[n] for n in names]}))\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_cached_speed_is_checked_and_measured_again_when_it_disagrees(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "cache"))
    program = _fake_program(tmp_path / "probe", {k: v / 1.5 for k, v in REF.items()})
    first = hostspeed.measured(program, 2)
    assert first.source == "measured" and first.mix == pytest.approx(1.5)
    assert (tmp_path / "cache" / hostspeed.CACHE_NAME).exists()
    second = hostspeed.measured(program, 2)
    assert second.source == "cached" and second.mix == pytest.approx(1.5)
    assert "check" in second.note
    # The host changed under the same key (a frequency cap): the check reads it, it is remeasured.
    _fake_program(program, {k: v / 0.9 for k, v in REF.items()})
    third = hostspeed.measured(program, 2)
    assert third.source == "measured" and third.mix == pytest.approx(0.9)
    assert "measured again" in third.note
    again = hostspeed.measured(program, 1, recalibrate=True)
    assert again.source == "measured" and again.note == "--recalibrate"


def test_a_speed_cached_under_load_is_measured_again_when_the_check_reads_faster(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "cache"))
    # Calibrated while the host was busy: videostream (memory-bound) read 20 % slow.
    loaded = {k: v / 1.5 * (1.25 if k == "videostream" else 1.0) for k, v in REF.items()}
    program = _fake_program(tmp_path / "probe", loaded)
    assert hostspeed.measured(program, 1).by_kernel["videostream"] == pytest.approx(1.2)
    # Quiet again: load only slows a probe, so a check that reads faster replaces the cache.
    _fake_program(program, {k: v / 1.5 for k, v in REF.items()})
    again = hostspeed.measured(program, 1)
    assert again.source == "measured" and again.by_kernel["videostream"] == pytest.approx(1.5)
    assert "videostream -20.0%" in again.note
    # Within CHECK_FASTER of the cached time the cached speed stands.
    _fake_program(program, {k: v / 1.5 * 0.97 for k, v in REF.items()})
    assert hostspeed.measured(program, 1).source == "cached"


def test_another_host_key_is_not_served_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "cache"))
    program = _fake_program(tmp_path / "probe", {k: v / 1.5 for k, v in REF.items()})
    hostspeed.measured(program, 1)
    monkeypatch.setattr(hostspeed, "cpu_model", lambda: "another CPU")
    assert hostspeed.measured(program, 1).source == "measured"


def test_a_slow_spell_at_the_check_keeps_the_cached_speed_when_the_calibration_wobbles(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "cache"))
    program = _fake_program(tmp_path / "probe", {k: v / 1.5 for k, v in REF.items()})
    assert hostspeed.measured(program, 1).mix == pytest.approx(1.5)
    # Now every kernel reads slow and wobbles: the check disagrees, the calibration does not
    # hold its speed, so the cached (steady) speed is used, with the warning.
    wobbly = _probe_output({k: [v / 1.1, v / 0.7, v / 0.7] for k, v in REF.items()})
    program.write_text(f"#!/usr/bin/env python3\nprint({json.dumps(json.dumps(wobbly))})\n")
    speed = hostspeed.measured(program, 1)
    assert speed.source == "cached" and speed.mix == pytest.approx(1.5)
    assert "does not hold its speed" in speed.warning and "cached speed stays" in speed.note
    assert "does not hold its speed" in capsys.readouterr().err


def test_the_cache_keeps_only_the_newest_probe_builds(tmp_path, monkeypatch):
    # Every fresh MPI install builds its own probe program: one cache entry each, capped.
    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "cache"))
    program = _fake_program(tmp_path / "probe", {k: v / 1.5 for k, v in REF.items()})
    builds, gmtime = hostspeed.CACHE_ENTRIES + 3, time.gmtime
    for i in range(builds):
        monkeypatch.setattr(hostspeed, "host_key", lambda p, i=i: {"program": f"build-{i}"})
        monkeypatch.setattr(hostspeed.time, "gmtime", lambda i=i: gmtime(1_800_000_000 + i))
        hostspeed.measured(program, 1)
    kept = json.loads((tmp_path / "cache" / hostspeed.CACHE_NAME).read_text())
    assert [json.loads(k)["program"] for k in kept] == [f"build-{i}" for i in range(3, builds)]


def test_a_host_that_does_not_hold_its_speed_is_said_and_not_cached(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "cache"))
    program = tmp_path / "probe"
    # One fast round among slow ones: the median round ran at 1/1.5 of the fastest.
    wobbly = _probe_output({k: [v, v / 1.5, v] for k, v in REF.items()})
    program.write_text(f"#!/usr/bin/env python3\nprint({json.dumps(json.dumps(wobbly))})\n")
    program.chmod(0o755)
    speed = hostspeed.measured(program, 1)
    assert speed.spread == pytest.approx(1 - 1 / 1.5)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not hold its speed" in err[0] and "33%" in err[0]
    assert "does not hold its speed" in speed.warning
    assert not (tmp_path / "cache" / hostspeed.CACHE_NAME).exists()


def test_a_profile_may_give_its_time_per_unit_or_this_host(tmp_path):
    from shoal import profiles

    extra = {"profiles": {
        "timed": {"cores": 1, "kernel_unit_s": REF["raytrace"] * 50, "speed_kernel": "raytrace",
                  "idle_W": 1, "busy_W": 2, "link": "gigabit"},
        "mine": {"cores": 2, "speed": "host", "idle_W": 1, "busy_W": 2, "link": "gigabit"}}}
    loaded = profiles.load(extra)
    assert loaded["timed"].speed == pytest.approx(0.02)
    assert loaded["timed"].speed_kernel == "raytrace"
    assert (loaded["mine"].speed, loaded["mine"].speed_kernel) == (1.0, HOST)
    assert profiles.load()["minnowboard"].speed_kernel == MIX
    assert profiles.load()["stb"].speed_kernel == "raytrace"
    assert profiles.load()["odroid-xu4"].speed_kernel == "videostream"


def test_the_real_probe_times_every_reference_kernel(mpich):
    from shoal.mpi import build

    program = build.build("work", mpich)
    results = hostspeed.probe(program, 1, probe_s=0.01, rounds=2)
    speed = hostspeed.from_probes(results)
    assert set(speed.by_kernel) == set(REF)
    for name, value in speed.by_kernel.items():
        assert math.isfinite(value) and value > 0, name
    for entry in results[0]["probe"]:
        assert len(entry["samples"]) == 2
        # The second round repeats the first's parts: the same units of work.
        assert entry["samples"][0]["units"] == entry["samples"][1]["units"] > 0


def test_doctor_names_the_cached_speed_of_this_host(tmp_path, monkeypatch):
    from shoal import doctor

    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "cache"))
    [finding] = doctor.check_host_speed()
    assert finding.ok and "not measured yet" in finding.found
    program = _fake_program(tmp_path / "probe", {k: v / 1.25 for k, v in REF.items()})
    hostspeed.measured(program, 1)
    [finding] = doctor.check_host_speed()
    assert "host speed 1.25 reference cores" in finding.found and "--recalibrate" in finding.found
    monkeypatch.setattr(hostspeed, "cpu_model", lambda: "another CPU")
    assert hostspeed.cached_here() is None
