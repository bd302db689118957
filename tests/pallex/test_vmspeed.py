"""The virtual board's speed (shoal.pallex.vmspeed) without booting it: the guest's probe program is
static and speaks shoal-work's --probe; the probe disk's own script runs under sh here, with the guest's
device names pointed at files, and its serial lines go through the same step loop as a boot's; the
quota follows the measured speed on a model board until it is within the tolerance."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
from pathlib import Path

import pytest

from shoal import proc
from shoal.errors import ShoalError
from shoal.mpi import build
from shoal.pallex import vmboard, vmimage, vmspeed
from shoal.profiles import DeviceProfile, load as load_profiles, reference_kernels

REF = {name: k.unit_s for name, k in reference_kernels().items()}


def _probe_output(per_unit: dict[str, list[float]], units: float = 100.0) -> dict:
    """What a probe prints for kernels taking ``per_unit`` s per unit in each round."""
    return {"probe": [{"name": name, "unit": "u",
                       "samples": [{"units": units, "cpu_s": t * units, "wall_s": t * units} for t in ts]}
                      for name, ts in per_unit.items()]}


@pytest.fixture(scope="module")
def guest_probe() -> Path:
    return build.build_host("guestprobe")


def _interpreter(elf: Path) -> bool:
    """Whether a 64-bit ELF asks for a dynamic loader (a PT_INTERP program header)."""
    data = elf.read_bytes()
    assert data[:5] == b"\x7fELF\x02"
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return any(struct.unpack_from("<I", data, phoff + i * phentsize)[0] == 3 for i in range(phnum))


def test_the_guest_probe_is_static_and_times_every_reference_kernel_in_shoal_works_json(guest_probe, tmp_path):
    assert not _interpreter(guest_probe)           # runs in a guest that has no MPI and no matching libc
    done = subprocess.run([str(guest_probe), "--probe", ",".join(REF), "--probe-s", "0.01", "--rounds", "2"],
                          capture_output=True, text=True, env={}, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [e["name"] for e in result["probe"]] == list(REF)
    for entry in result["probe"]:
        first, second = entry["samples"]
        assert first["units"] > 0 and first["cpu_s"] > 0
        assert second["units"] == first["units"]   # later rounds repeat the first round's parts
    raytrace = next(e for e in result["probe"] if e["name"] == "raytrace")
    assert raytrace["samples"][0]["units"] % (512 * 512 / 8) == 0   # whole parts: every 8th row of 512x512


def test_the_guest_probe_refuses_bad_input_in_one_line(guest_probe):
    for argv in (["--probe", "is"], ["--probe", "raytrace", "--rounds", "0"], ["--probe-s", "1"],
                 ["--probe", "raytrace", "--check"]):
        done = proc.run([str(guest_probe), *argv])
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, (argv, done.stderr)


def test_speed_is_the_reference_time_over_the_median_sample():
    rpi3 = vmspeed.Target.of(load_profiles()["rpi3"])
    assert (rpi3.kernel, rpi3.speed) == ("videostream", 0.17)
    slow = {k: [v / 0.2, v / 0.25, v / 0.1] for k, v in REF.items()}   # medians: 0.2 reference cores
    core_a, core_b = _probe_output(slow), _probe_output({k: [v / 0.2] * 3 for k, v in REF.items()})
    speed, by_kernel = vmspeed.speeds([core_a, core_b], rpi3)
    assert speed == pytest.approx(0.2) and set(by_kernel) == set(REF)
    mixed = {"raytrace": 0.1, "videostream": 0.4, "msa": 0.2, "ep": 0.2}
    mix_target = vmspeed.Target("rpi0w", "mix", 0.05)
    speed, _ = vmspeed.speeds([_probe_output({k: [REF[k] / s] for k, s in mixed.items()})], mix_target)
    assert speed == pytest.approx(math.prod(mixed.values()) ** 0.25)
    with pytest.raises(ValueError, match="lacks kernels"):
        vmspeed.speeds([_probe_output({"raytrace": [REF["raytrace"]]})], mix_target)
    with pytest.raises(ValueError, match="no samples"):
        vmspeed.speeds([{"probe": []}], rpi3)


def test_a_board_whose_speed_is_this_host_has_nothing_to_hold_to():
    with pytest.raises(ShoalError, match="--board-speed free") as err:
        vmspeed.Target.of(DeviceProfile("mine", speed=1.0, speed_kernel="host"))
    assert len(str(err.value).splitlines()) == 1


def _model_board(free_speed: float, free_cpus: float):
    """A board whose guest core's speed follows the CPUs QEMU gets, a little less than in proportion
    (a held QEMU also loses its caches), as a Step the way a probe boot makes it."""
    def step(index: int, quota: float | None) -> vmspeed.Step:
        cpus = free_cpus if quota is None else min(quota, free_cpus)
        speed = free_speed * (cpus / free_cpus) ** 1.15
        return vmspeed.Step(index, quota, speed, {"videostream": speed}, cpus, 2.0, 4)
    return step


@pytest.mark.parametrize("free_speed", [0.9, 0.3, 0.19])
def test_the_quota_follows_the_measured_speed_until_the_board_is_the_profiles(free_speed):
    target = vmspeed.Target("rpi3", "videostream", 0.17)
    control = vmspeed.Controller(target, cores=4, floor_cpus=0.01, can_hold=True)
    board = _model_board(free_speed, free_cpus=1.8)
    steps, quota = [board(1, None)], None
    while (quota := control.decide(steps[-1])) is not False and len(steps) < vmspeed.MAX_STEPS:
        steps.append(board(len(steps) + 1, quota))
    result = control.result(steps)
    assert result.verdict == "held" and result.free == free_speed
    assert abs(result.held / 0.17 - 1) <= vmspeed.TOLERANCE and result.quota_cpus == steps[-1].quota_cpus
    assert 0.01 <= result.quota_cpus < 1.8 and len(steps) <= 4
    record = result.describe()
    assert record["free_speed"] == free_speed and record["steps"][0]["quota_cpus"] is None
    json.dumps(record)                                  # numbers as numbers, nothing else


def test_a_board_already_slower_runs_free_and_one_without_a_cgroup_is_said():
    target = vmspeed.Target("rpi3", "videostream", 0.17)
    slow = vmspeed.Controller(target, 4, 0.01, True)
    first = _model_board(0.12, 1.9)(1, None)
    assert slow.decide(first) is False
    assert (slow.result([first]).verdict, slow.result([first]).quota_cpus) == ("slower", None)
    unheld = vmspeed.Controller(target, 4, 0.01, can_hold=False)
    fast = _model_board(0.6, 1.9)(1, None)
    assert unheld.decide(fast) is False and unheld.result([fast]).verdict == "no-cgroup"
    assert "no cgroup to hold QEMU" in vmspeed.describe_verdict(unheld.result([fast]))


def test_the_probe_disks_script_extracts_the_program_and_its_lines_make_the_steps(guest_probe, tmp_path,
                                                                                 monkeypatch):
    """The disk's script, run by sh with /dev/vdb, /dev/ttyS0 and /tmp pointed at this test's files, as
    the stand-in board: what it prints goes through probe_boot's loop as a guest's serial line would."""
    monkeypatch.setattr(vmspeed, "PROBE_S", 0.01)
    monkeypatch.setattr(vmspeed, "ROUNDS", 1)
    monkeypatch.setattr(vmspeed, "PAUSE_S", 0.1)
    scratch = tmp_path / "guest-tmp"
    scratch.mkdir()

    def stand_in(img, spec, extra_disk=None, network=True, cmdline=""):
        assert "init=/usr/local/sbin/shoal-offline" in cmdline and not network
        disk = Path(extra_disk).read_bytes()
        assert disk[vmspeed.SCRIPT_B:vmspeed.SCRIPT_B + 4] == b"\x7fELF" and len(disk) % 512 == 0
        script = disk[:vmspeed.SCRIPT_B].decode().replace("/tmp/", f"{scratch}/")
        script = script.replace("/dev/vdb", str(extra_disk)).replace("/dev/ttyS0", "/dev/stdout")
        (tmp_path / "guest.sh").write_text(script)
        return ["sh", str(tmp_path / "guest.sh")]

    monkeypatch.setattr(vmspeed.vmboard, "argv", stand_in)
    img = vmimage.Image(tmp_path, tmp_path / "root.img", tmp_path / "vmlinuz", tmp_path / "initrd", tmp_path / "u")
    spec = vmboard.BoardSpec(4, 2 ** 30)
    quotas = iter([0.5, False])
    seen = []
    steps = vmspeed.probe_boot(img, spec, vmspeed.Target("rpi3", "videostream", 0.17), guest_probe, None,
                               lambda step: next(quotas), steps=3, on_step=seen.append)
    assert [s.index for s in steps] == [1, 2] and seen == steps
    assert [s.quota_cpus for s in steps] == [None, 0.5]
    cores = len(os.sched_getaffinity(0))                # nproc: one copy per core the "guest" has
    for s in steps:
        assert s.copies == cores and set(s.by_kernel) == set(REF) and s.speed == s.by_kernel["videostream"] > 0
        assert s.wall_s > 0 and s.qemu_cpus >= 0


def test_a_board_that_never_starts_the_probe_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(vmspeed, "STEP_TIMEOUT_S", 1.0)
    monkeypatch.setattr(vmspeed.vmboard, "argv",
                        lambda *a, **k: ["sh", "-c", "echo 'initrd: cannot mount /dev/vda'; exec sleep 60"])
    img = vmimage.Image(tmp_path, tmp_path / "root.img", tmp_path / "vmlinuz", tmp_path / "initrd", tmp_path / "u")
    program = tmp_path / "program"
    program.write_bytes(b"\x7fELF" + b"\0" * 100)
    with pytest.raises(ShoalError) as err:
        vmspeed.probe_boot(img, vmboard.BoardSpec(1, 2 ** 28), vmspeed.Target("rpi0w", "mix", 0.05), program,
                           None, lambda step: False, steps=1)
    assert "no step 1" in str(err.value) and "cannot mount /dev/vda" in str(err.value)
    assert len(str(err.value).splitlines()) == 1
