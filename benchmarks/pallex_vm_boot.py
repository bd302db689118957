"""The virtual board's boot: power-on to the end of userspace (rc.local's signal), against the same
kernel and initrd handing over to a root that exits at once, measured in the same run.

Rounds interleave the reference (``init=/bin/true``: QEMU, firmware, kernel and initrd, then a
panic that powers QEMU off) and the full boot of a configuration (default EU and ALLU), so load
on the shared host falls on both alike. Prints each round, the medians with their spread, the
ratio full/reference, and the issue's target: a boot to the end of userspace in at most 30 s of
wall time under TCG. Needs the image: shoal pallex vm build.
Run: .venv/bin/python benchmarks/pallex_vm_boot.py [--rounds 3] [--configs EU,ALLU] [--profile rpi3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from entry import run_main

from shoal.pallex import boot, testbed, unitconfig, vmboard, vmconfig, vmimage
from shoal import profiles

TARGET_S = 30.0


def reference_s(img, spec, group) -> float:
    command = vmboard.argv(img, spec, network=False,
                           cmdline="console=ttyS0 root=/dev/vda ro quiet panic=-1 init=/bin/true")
    b = vmboard.power_on(command, group)
    b.process.wait(timeout=600)
    return time.monotonic() - b.power_on


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default="EU,ALLU")
    p.add_argument("--profile", default="rpi3")
    p.add_argument("--accel", default="auto", choices=("auto", "kvm", "tcg"))
    args = p.parse_args()
    img = vmimage.require()
    device = profiles.load()[args.profile]
    bp = boot.load(args.profile)
    spec = vmboard.BoardSpec(device.cores, int(device.memory_B), bp.storage_read_Bps or None)
    accel, why = vmboard.choose_accel(img, spec, args.accel)
    spec = vmboard.BoardSpec(spec.cores, spec.memory_B, spec.read_Bps, accel)
    catalog = unitconfig.load()
    configs = [c for c in args.configs.split(",") if c]
    disks = {c: vmconfig.disk_for(img, catalog, c, spec) for c in configs}
    print(f"virtual board as {args.profile}: {spec.cores} cores, {spec.memory_B >> 20} MiB, QEMU {accel} ({why}); "
          f"load average {os.getloadavg()[0]:.1f}")
    group, placement = vmboard.board_group()  # as shoal pallex cycle places QEMU
    print(placement)
    try:
        ref, full = rounds(args.rounds, img, spec, catalog, configs, disks, bp, group)
    finally:
        vmboard.release_group(group)
    return report(ref, full)


def rounds(count, img, spec, catalog, configs, disks, bp, group):
    ref, full = [], {c: [] for c in configs}
    for r in range(count):
        ref.append(reference_s(img, spec, group))
        line = f"round {r + 1}: reference (kernel+initrd, init=/bin/true) {ref[-1]:.1f} s"
        for c in configs:
            row = testbed.one_cycle(vmboard.argv(img, spec, disk=disks[c]), testbed.CycleSpec(c, r, 300),
                                    catalog.end_unit(catalog.config(c), {"bluetooth.service"}), bp, group=group)
            if not row["ok"]:
                line += f"; {c} FAILED ({row['reason']})"
                continue
            full[c].append(row)
            line += (f"; {c} signal {row['signal_s']:.1f} s (T_btl {row['T_btl_s']:.1f}, T_knl {row['T_knl_s']:.1f}, "
                     f"T_usi {row['T_usi_s']:.1f})")
        print(line + f"; load {os.getloadavg()[0]:.1f}", flush=True)
    return ref, full


def report(ref, full) -> int:
    med_ref = statistics.median(ref)
    print(f"reference: median {med_ref:.1f} s ({min(ref):.1f}..{max(ref):.1f}), {len(ref)} rounds")
    ok = True
    for c, rows in full.items():
        if not rows:
            print(f"{c}: no boot reached the signal")
            ok = False
            continue
        sig = [r["signal_s"] for r in rows]
        usi = [r["T_usi_s"] for r in rows]
        m = statistics.median(sig)
        ok &= m <= TARGET_S
        print(f"{c}: power-on to end of userspace median {m:.1f} s ({min(sig):.1f}..{max(sig):.1f}), "
              f"T_usi {statistics.median(usi):.2f} s ({min(usi):.2f}..{max(usi):.2f}); ratio to reference "
              f"{m / med_ref:.2f}; target <= {TARGET_S:g} s: {'met' if m <= TARGET_S else 'NOT met'}")
    print(f"load average at the end {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main)
