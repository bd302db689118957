"""The clock as a variable: a profile's P-states drive an emulated device's CPU budget and its
modelled watts (``--freq``, ``--governor``, ``COUNTxPROFILE@CLOCK``), and this machine's governor
is read from, set in and restored to a fake cpufreq tree shaped as the kernel's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shoal import profiles
from shoal.bench.runner import BenchRequest
from shoal.cluster import governor, hostspeed, inventory
from shoal.cluster.emulated import EmulatedCluster
from shoal.errors import ShoalError
from shoal.execute.where import Where
from shoal.power.model import linear_energy_J
from shoal.runs.store import Run
from shoal.study.request import StudyRequest

MINNOW = profiles.builtin("minnowboard")


def test_every_minnowboard_pstate_is_sourced_and_the_top_one_is_the_measured_board():
    states = sorted(MINNOW.pstates, key=lambda s: s.Hz)
    assert len(states) >= 3 and all(s.source for s in states)
    top = states[-1]
    # The top state is the profile itself (Table 5.6); lower states are slower and draw less.
    assert (top.relative_speed, top.idle_W, top.busy_W) == (1.0, MINNOW.idle_W, MINNOW.busy_W)
    assert [s.relative_speed for s in states] == sorted(s.relative_speed for s in states)
    assert [s.busy_W for s in states] == sorted(s.busy_W for s in states)
    assert "E3825" in top.source and "1.33 GHz" in top.source


def test_a_clock_sets_the_devices_cpu_budget_and_its_modelled_watts():
    host = hostspeed.HostSpeed.asked(1.0)
    nominal = EmulatedCluster(inventory.from_emulate("2xminnowboard"), host=host)._budgets()
    slow_inventory = inventory.from_emulate("2xminnowboard@500M")
    slow = EmulatedCluster(slow_inventory, host=host)._budgets()
    state = min(MINNOW.pstates, key=lambda s: s.Hz)
    for (name, (per_core, _)), (slow_name, (slow_core, _)) in zip(nominal.items(), slow.items()):
        assert slow_core == pytest.approx(per_core * state.relative_speed)
        assert slow_name.startswith("minnowboard-500mhz")
    profile = slow_inventory.nodes[0].profile
    assert (profile.clock_Hz, profile.idle_W, profile.busy_W) == (5e8, state.idle_W, state.busy_W)
    assert profile.sources["busy"] == state.source and profile.per_test is None
    # The power model of the device draws the state's watts: a second of one busy core of two.
    assert linear_energy_J(profile.idle_W, profile.busy_W, 2, 1.0, 1.0) == \
        pytest.approx(state.idle_W + (state.busy_W - state.idle_W) / 2)


def test_the_governors_of_an_emulated_device_are_its_highest_and_lowest_states():
    fast = inventory.from_emulate("1xminnowboard@performance").nodes[0].profile
    slow = inventory.from_emulate("1xminnowboard@powersave").nodes[0].profile
    assert (fast.clock_Hz, slow.clock_Hz) == (max(s.Hz for s in MINNOW.pstates),
                                              min(s.Hz for s in MINNOW.pstates))
    # At its nominal clock the device is the profile, measured per-test watts included.
    assert (fast.speed, fast.per_test) == (MINNOW.speed, MINNOW.per_test)


def test_freq_and_governor_fold_into_the_emulated_spec_and_the_study_keeps_its_reference_apart():
    assert BenchRequest(emulate="2xminnowboard", freq=1e9).emulate == "2xminnowboard@1G"
    assert BenchRequest(emulate="2xminnowboard", governor="powersave").emulate == "2xminnowboard@powersave"
    # A term with its own clock keeps it.
    assert BenchRequest(emulate="1xminnowboard@500M+1xminnowboard", freq=1e9).emulate == \
        "1xminnowboard@500M+1xminnowboard@1G"
    request = StudyRequest.create(freq=7.5e8)
    assert request.emulate == "4xminnowboard@750M" and str(request.reference) == "nuc"


@pytest.mark.parametrize("spec, message", [
    ("2xminnowboard@900M", "no P-state at 900 MHz; choose one of its P-states: 500 MHz, 750 MHz, 1000 MHz, 1333 MHz"),
    ("2xnuc@1G", "profile nuc has no P-states"),
    ("2xminnowboard@fast", "@fast is neither a clock"),
])
def test_a_clock_the_profile_has_no_state_for_is_refused(spec, message):
    with pytest.raises(ShoalError, match=message):
        inventory.from_emulate(spec)


def _cpufreq_tree(root: Path, governors: str = "performance powersave", current: str = "powersave") -> list[Path]:
    files = []
    for cpu in (0, 1):
        policy = root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq"
        policy.mkdir(parents=True)
        for name, text in {"scaling_governor": current, "scaling_available_governors": governors,
                           "scaling_driver": "intel_pstate", "scaling_cur_freq": "800000",
                           "scaling_min_freq": "800000", "scaling_max_freq": "3400000"}.items():
            (policy / name).write_text(text + "\n")
        files.append(policy / "scaling_governor")
    return files


def test_the_governor_is_set_for_the_block_and_restored(tmp_path, monkeypatch):
    files = _cpufreq_tree(tmp_path)
    monkeypatch.setenv("SHOAL_SYSFS_ROOT", str(tmp_path))
    with governor.held("performance") as record:
        assert [f.read_text() for f in files] == ["performance", "performance"]
        assert record["set"] and record["before"]["cpus"]["0"]["governor"] == "powersave"
        assert record["during"]["cpus"]["1"]["governor"] == "performance"
        assert record["before"]["cpus"]["0"]["max_Hz"] == 3.4e9
    assert [f.read_text().strip() for f in files] == ["powersave", "powersave"]


def test_a_run_on_this_machine_records_the_governor_it_ran_with(tmp_path, monkeypatch):
    files = _cpufreq_tree(tmp_path / "sysfs")
    monkeypatch.setenv("SHOAL_SYSFS_ROOT", str(tmp_path / "sysfs"))
    run = Run.create("bench", ["shoal", "bench", "--governor", "performance"], tmp_path / "run")
    where = Where(governor="performance")
    where.validate()
    with where.open(run):
        assert files[0].read_text() == "performance"
    record = json.loads((tmp_path / "run" / "manifest.json").read_text())["governor"]
    assert record["set"] and record["asked"] == "performance"
    assert record["before"]["cpus"]["1"]["governor"] == "powersave"
    assert files[1].read_text().strip() == "powersave"


def test_a_governor_the_host_does_not_offer_or_no_cpufreq_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_SYSFS_ROOT", str(tmp_path))
    with pytest.raises(ShoalError, match="no cpufreq policy"):
        governor.check("performance")
    _cpufreq_tree(tmp_path, governors="performance schedutil")
    with pytest.raises(ShoalError, match="offers performance, schedutil; choose one of them"):
        governor.check("powersave")


def test_without_permission_the_run_keeps_the_current_governor_says_so_and_records_it(tmp_path):
    """A tree the run may read and not write, as an ordinary user meets the kernel's: as root
    (CI), the run goes without the capability that lets root write what its mode forbids."""
    files = _cpufreq_tree(tmp_path)
    for path in files:
        os.chmod(path, 0o444)
    code = ("import json; from shoal.cluster import governor\n"
            "with governor.held('performance') as r: print(json.dumps(r))")
    without_override = ["setpriv", "--bounding-set=-dac_override", "--inh-caps=-all", "--"] \
        if os.geteuid() == 0 else []
    done = subprocess.run([*without_override, sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "SHOAL_SYSFS_ROOT": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert not record["set"] and "needs root" in record["reason"]
    assert record["during"]["cpus"]["0"]["governor"] == "powersave"
    assert "running with the current governor powersave" in done.stderr
    assert [f.read_text().strip() for f in files] == ["powersave", "powersave"]
