"""The virtual board's core, measured inside its guest, free and held to each board's profile.

Per round and profile (default rpi3 and rpi0w, interleaved): one boot into shoal-guest-probe
(shoal.pallex.vmspeed.calibrate), free first, then QEMU held by the cgroup CPU quota until the
guest's core reads within 10 % of the profile's speed. Prints each round's free and held speed
against the profile's (the reference measured in the same boot is the free step: held/free is
the share the quota left), the quota and the steps it took, then medians with their spread. The
target: the held core within 10 % of the profile's speed. Needs the image (shoal pallex vm build)
and a cgroup this user may divide.
Run: .venv/bin/python benchmarks/pallex_board_speed.py [--rounds 2] [--profiles rpi3,rpi0w]
"""

from __future__ import annotations

import argparse
import os
import statistics

from entry import run_main

from shoal import hostfacts, profiles
from shoal.mpi import build
from shoal.pallex import boot, vmboard, vmimage, vmspeed


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--profiles", default="rpi3,rpi0w")
    p.add_argument("--accel", default="auto", choices=("auto", "kvm", "tcg"))
    args = p.parse_args()
    img = vmimage.require()
    program = build.build_host("guestprobe")
    devices = profiles.load()
    names = [n for n in args.profiles.split(",") if n]
    print(f"host: {hostfacts.cpu_model()}, {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    found: dict[str, list[vmspeed.BoardSpeed]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names:
            device = devices[name]
            spec = vmboard.BoardSpec(device.cores, int(device.memory_B), boot.load(name).storage_read_Bps or None)
            accel, _ = vmboard.choose_accel(img, spec, args.accel)
            spec = vmboard.BoardSpec(spec.cores, spec.memory_B, spec.read_Bps, accel)
            group, placement = vmboard.board_group()
            try:
                speed = vmspeed.calibrate(img, spec, device, program, group)
            finally:
                vmboard.release_group(group)
            found[name].append(speed)
            quota = f"{speed.quota_cpus:.3f} CPUs" if speed.quota_cpus else "none"
            print(f"round {r + 1} {name} ({accel}, {spec.cores} vCPUs): free {speed.free:.3f}, held {speed.held:.3f} "
                  f"reference cores on {speed.target.kernel} (profile {speed.target.speed:g}; held/profile "
                  f"{speed.held / speed.target.speed:.2f}); quota {quota}; {len(speed.steps)} steps; {speed.verdict}; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    ok = True
    for name, runs in found.items():
        free, held = [s.free for s in runs], [s.held for s in runs]
        target = runs[0].target.speed
        print(f"{name}: free {statistics.median(free):.3f} ({min(free):.3f}..{max(free):.3f}), held "
              f"{statistics.median(held):.3f} ({min(held):.3f}..{max(held):.3f}) against {target:g}: "
              f"{statistics.median(held) / target:.2f} x the profile")
        ok &= all(s.verdict in ("held", "slower") for s in runs)
    print(f"target (held within {vmspeed.TOLERANCE:.0%} of the profile, or a guest already slower): "
          f"{'met' if ok else 'NOT met'}; load average {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main)
