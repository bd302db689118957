"""The virtual board's speed: its core measured inside the guest, QEMU held until it is the board's.

A device profile's speed is in reference cores on a named kernel
(``shoal.profiles``), and the host's core is measured on the same kernels
(``shoal.cluster.hostspeed``). The board's core is measured the same way, but
inside the guest: ``shoal-guest-probe`` (the workloads' serial kernels without
MPI, linked statically, native/guestprobe) goes to the board on a second disk,
and the image's ``shoal-offline`` init (the one that applies unit
configurations, before any systemd) runs it, one copy per guest core, step
after step. Inside the guest a process's CPU time runs on while QEMU's thread
waits on the host, so what the guest measures is the core the guest gets.

QEMU runs in the board's cgroup (``vmboard.board_group``); between steps its
CPU quota (``shoal.cluster.cpulimit``: the whole QEMU process, every vCPU and
its I/O thread) is set from the last step: first free, then the CPUs QEMU used
scaled by target / measured, until a step reads within ``TOLERANCE`` of the
profile's speed. A guest already no faster than the board is left free, and
the run says so: its times are then those of a slower board.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from shoal.errors import ShoalError
from shoal.pallex import vmboard, vmimage
from shoal.profiles import HOST, MIX, DeviceProfile, reference_kernels

TOLERANCE = 0.10      # a held board within 10 % of its profile's speed is taken as the board
MAX_STEPS = 6         # the free step and up to five held ones
PROBE_S = 0.2         # guest CPU seconds per kernel and round
ROUNDS = 2
PAUSE_S = 1.0         # between steps: the host sets the next quota
STEP_TIMEOUT_S = 180.0
SCRIPT_B = 4096       # the probe disk's shell script, padded; the program follows it
PROBE_LINE = "SHOAL-PROBE"
INIT_CMDLINE = "console=ttyS0 root=/dev/vda rw quiet init=/usr/local/sbin/shoal-offline"

# Run by the image's shoal-offline init as `sh /dev/vdb` (its output goes to a file it prints at the
# end), so every line meant for the host is written to the serial port itself.
SCRIPT = """set -e
tail -c +{offset} /dev/vdb | head -c {size} > /tmp/shoal-guest-probe
chmod 755 /tmp/shoal-guest-probe
test -s /tmp/shoal-guest-probe
n=$(nproc)
k=0
while [ $k -lt {steps} ]; do
  k=$((k + 1))
  echo "{signal} probe-start $k $n" > /dev/ttyS0
  i=0
  while [ $i -lt $n ]; do
    /tmp/shoal-guest-probe --probe {kernels} --probe-s {probe_s} --rounds {rounds} > /tmp/probe-$i.json &
    i=$((i + 1))
  done
  wait
  for f in /tmp/probe-*.json; do echo "{line} $k $(cat $f)" > /dev/ttyS0; done
  echo "{signal} probe-done $k" > /dev/ttyS0
  sleep {pause}
done
exit 0
"""


@dataclass(frozen=True)
class Target:
    """The profile's core: ``speed`` reference cores on ``kernel`` (a kernel's name or MIX)."""

    device: str
    kernel: str
    speed: float

    @classmethod
    def of(cls, device: DeviceProfile) -> "Target":
        if device.speed_kernel == HOST:
            raise ShoalError(f"--profile {device.name}: its speed is 'host' (this machine's core), so there is "
                             "no board speed to hold the virtual board to; give --board-speed free")
        return cls(device.name, device.speed_kernel, float(device.speed))

    def kernels(self) -> list[str]:
        """The kernels the guest is probed on: every reference kernel (MIX needs them all)."""
        return list(reference_kernels())


@dataclass
class Step:
    """One probe of the guest's cores under one QEMU quota."""

    index: int
    quota_cpus: float | None          # None: QEMU free
    speed: float                      # the target's kernel (or the mix), reference cores per guest core
    by_kernel: dict[str, float]
    qemu_cpus: float                  # host CPUs QEMU used during the step
    wall_s: float
    copies: int


@dataclass
class BoardSpeed:
    """What the calibration found and what QEMU is held to."""

    target: Target
    steps: list[Step] = field(default_factory=list)
    quota_cpus: float | None = None   # what the cycles run under; None: free
    verdict: str = ""                 # held | slower | not-held | no-cgroup

    @property
    def free(self) -> float | None:
        return self.steps[0].speed if self.steps else None

    @property
    def held(self) -> float | None:
        return self.steps[-1].speed if self.steps else None

    def describe(self) -> dict:
        return {"target": asdict(self.target), "verdict": self.verdict, "quota_cpus": self.quota_cpus,
                "free_speed": self.free, "held_speed": self.held,
                "steps": [asdict(s) for s in self.steps]}


def speeds(results: list[dict], target: Target) -> tuple[float, dict[str, float]]:
    """The guest core's speed on the target's kernel (MIX: the geometric mean) and per kernel, from
    the probes of every guest core: the reference core's time per unit over the median of the
    samples (every core and round), since a held core's samples vary with the quota's periods."""
    kernels = reference_kernels()
    per: dict[str, list[float]] = {}
    for result in results:
        for entry in result.get("probe", []):
            if entry["name"] in kernels:
                per.setdefault(entry["name"], []).extend(s["cpu_s"] / s["units"] for s in entry["samples"]
                                                         if s["units"] > 0 and s["cpu_s"] > 0)
    by_kernel = {name: kernels[name].unit_s / statistics.median(ts) for name, ts in per.items() if ts}
    if not by_kernel:
        raise ValueError("the guest's probe returned no samples of the reference kernels")
    if target.kernel == MIX:
        if set(by_kernel) != set(kernels):
            raise ValueError(f"the guest's probe lacks kernels {sorted(set(kernels) - set(by_kernel))}")
        speed = math.exp(sum(math.log(v) for v in by_kernel.values()) / len(by_kernel))
    elif target.kernel in by_kernel:
        speed = by_kernel[target.kernel]
    else:
        raise ValueError(f"the guest's probe has no samples of {target.kernel}")
    return speed, by_kernel


def close_enough(speed: float, target: float) -> bool:
    return abs(speed / target - 1) <= TOLERANCE


def next_quota(step: Step, target: float, cores: int, floor_cpus: float) -> float:
    """The quota (CPUs for the whole QEMU) for the next step: the last one's, or from free the CPUs
    QEMU used, scaled by target / measured; within [floor_cpus, cores]."""
    base = step.quota_cpus if step.quota_cpus is not None else step.qemu_cpus
    return min(float(cores), max(floor_cpus, base * target / step.speed))


def probe_disk(program: Path, target: Target, steps: int, out: Path) -> Path:
    """The second disk: the script, padded to SCRIPT_B bytes, then the program, padded to sectors."""
    data = program.read_bytes()
    script = SCRIPT.format(offset=SCRIPT_B + 1, size=len(data), steps=steps, signal=vmimage.SIGNAL,
                           line=PROBE_LINE, kernels=",".join(target.kernels()), probe_s=PROBE_S,
                           rounds=ROUNDS, pause=PAUSE_S).encode()
    if len(script) + 2 > SCRIPT_B:
        raise AssertionError("the probe script outgrew its padding")
    header = script + b"#" + b" " * (SCRIPT_B - len(script) - 2) + b"\n"
    out.write_bytes(header + data + b"\0" * (-len(data) % 512))
    return out


def _step_results(boot: vmboard.Boot, k: int, start: int, end: int) -> list[dict]:
    """Step k's probe results. A line the guest kernel's own messages broke on the shared serial port is
    left out (the step's ``copies`` says how many were read); none at all is an error."""
    prefix = f"{PROBE_LINE} {k} "
    results, broken = [], []
    for line in boot.lines[start:end]:
        if line.text.startswith(prefix):
            try:
                results.append(json.loads(line.text[len(prefix):]))
            except ValueError:
                broken.append(line.text)
    if not results and broken:
        raise ValueError(f"step {k}: no guest core's probe printed JSON: {broken[0][:120]!r}")
    return results


def probe_boot(img: vmimage.Image, spec: vmboard.BoardSpec, target: Target, program: Path, group: Path | None,
               decide: Callable[[Step], float | None | bool], first_quota: float | None = None,
               steps: int = MAX_STEPS, on_step: Callable[[Step], None] | None = None) -> list[Step]:
    """One boot into the probe: ``decide(step)`` returns the next step's quota (None: free), or False
    to stop; QEMU's quota is set before power-on (``first_quota``) and between steps."""
    out: list[Step] = []
    with tempfile.TemporaryDirectory(prefix="shoal-guest-probe-") as tmp:
        disk = probe_disk(program, target, steps, Path(tmp) / "probe.img")
        command = vmboard.argv(img, spec, extra_disk=disk, network=False, cmdline=INIT_CMDLINE)
        quota = first_quota
        hold(group, quota)
        boot = vmboard.power_on(command, group)
        try:
            index = 0
            for k in range(1, steps + 1):
                started = boot.wait_for(f"{vmimage.SIGNAL} probe-start {k} ", boot.power_on + STEP_TIMEOUT_S * k,
                                        index)
                if not started:
                    raise ShoalError(f"the board's speed probe: no step {k} on the serial line"
                                     f"{_why(boot)}; the serial log ends: {_tail(boot)}")
                t0, cpu0 = started[1].t, boot.cpu_s() or 0.0
                done = boot.wait_for(f"{vmimage.SIGNAL} probe-done {k}", time.monotonic() + STEP_TIMEOUT_S,
                                     started[0])
                if not done:
                    raise ShoalError(f"the board's speed probe: step {k} did not finish within "
                                     f"{STEP_TIMEOUT_S:g} s{_why(boot)}")
                wall, cpu = done[1].t - t0, (boot.cpu_s() or cpu0) - cpu0
                results = _step_results(boot, k, started[0], done[0])
                try:
                    speed, by_kernel = speeds(results, target)
                except ValueError as exc:
                    raise ShoalError(f"the board's speed probe: {exc}") from None
                step = Step(k, quota, speed, by_kernel, cpu / wall if wall > 0 else 0.0, wall, len(results))
                out.append(step)
                if on_step:
                    on_step(step)
                index = done[0]
                decided = decide(step)
                if decided is False:
                    break
                quota = decided
                hold(group, quota)
        finally:
            boot.power_off()
    return out


def _why(boot: vmboard.Boot) -> str:
    return f" (QEMU exited with {boot.process.returncode})" if boot.process.poll() is not None else ""


def _tail(boot: vmboard.Boot) -> str:
    lines = [ln.text for ln in boot.lines if ln.text.strip()][-2:]
    return " | ".join(lines) or "nothing"


def hold(group: Path | None, cpus: float | None) -> None:
    """QEMU's group held to ``cpus`` host CPUs in all (None: free)."""
    if group is None:
        return
    from shoal.cluster import cpulimit

    cpulimit.hold_group(cpulimit.detect(), group, cpus)


@dataclass(frozen=True)
class Controller:
    """How the quota follows the measured speed, step after step (pure: tests drive it with a model
    board). ``can_hold``: QEMU is in a cgroup whose quota shoal may set."""

    target: Target
    cores: int
    floor_cpus: float
    can_hold: bool

    def faster(self, speed: float) -> bool:
        return speed > self.target.speed * (1 + TOLERANCE)

    def decide(self, step: Step) -> float | bool:
        """The next step's quota (CPUs), or False: done."""
        if step.quota_cpus is None and not self.faster(step.speed):
            return False                      # free and already no faster than the board
        if not self.can_hold or (step.quota_cpus is not None and close_enough(step.speed, self.target.speed)):
            return False
        return next_quota(step, self.target.speed, self.cores, self.floor_cpus)

    def result(self, steps: list[Step]) -> BoardSpeed:
        """What the steps found: the verdict and the quota the cycles run under."""
        out = BoardSpeed(self.target, steps)
        last = steps[-1]
        if last.quota_cpus is None:
            out.verdict = "no-cgroup" if self.faster(last.speed) else "slower"
        else:
            out.verdict = "held" if close_enough(last.speed, self.target.speed) else "not-held"
            out.quota_cpus = last.quota_cpus
        return out


def calibrate(img: vmimage.Image, spec: vmboard.BoardSpec, device: DeviceProfile, program: Path,
              group: Path | None, on_note: Callable[[str], None] = lambda _: None) -> BoardSpeed:
    """Measure the guest's core free, then hold QEMU until the guest core is the profile's."""
    from shoal.cluster import cpulimit

    control = Controller(Target.of(device), spec.cores, cpulimit.smallest_core_budget(pinned=False),
                         group is not None)

    def said(step: Step) -> None:
        state = "free" if step.quota_cpus is None else f"QEMU held to {step.quota_cpus:.3f} CPUs"
        on_note(f"board speed step {step.index}: {state}: guest core {step.speed:.3f} reference cores on "
                f"{control.target.kernel} (target {control.target.speed:g}; QEMU used {step.qemu_cpus:.2f} CPUs)")

    result = control.result(probe_boot(img, spec, control.target, program, group, control.decide, None,
                                       MAX_STEPS, said))
    hold(group, result.quota_cpus)
    return result


def check(img: vmimage.Image, spec: vmboard.BoardSpec, speed: BoardSpeed, program: Path,
          group: Path | None) -> Step:
    """One probe step under the quota the cycles ran with: the guest's speed after them."""
    steps = probe_boot(img, spec, speed.target, program, group, lambda _: False, speed.quota_cpus, 1)
    return steps[0]


def describe_verdict(speed: BoardSpeed) -> str:
    """One line for the run's output."""
    t = speed.target
    if speed.verdict == "held":
        return (f"board speed: guest core {speed.free:.3f} reference cores free, {speed.held:.3f} with QEMU held "
                f"to {speed.quota_cpus:.3f} CPUs ({t.device}: {t.speed:g} on {t.kernel})")
    if speed.verdict == "slower":
        return (f"board speed: guest core {speed.free:.3f} reference cores free, already no faster than "
                f"{t.device}'s {t.speed:g} on {t.kernel}: QEMU runs free, the board is a slower {t.device}")
    if speed.verdict == "no-cgroup":
        return (f"board speed: guest core {speed.free:.3f} reference cores, faster than {t.device}'s {t.speed:g} "
                f"on {t.kernel}, and no cgroup to hold QEMU in: the board is a faster {t.device}")
    return (f"board speed: guest core {speed.free:.3f} free, {speed.held:.3f} after {len(speed.steps)} steps "
            f"at {speed.quota_cpus:.3f} CPUs: not within {TOLERANCE:.0%} of {t.device}'s {t.speed:g} "
            "(the host's load moved under it)")
