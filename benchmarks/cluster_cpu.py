"""CPU limits: a CPU-bound kernel inside each device vs the profile's speed (target +-10%).

The reference is the same kernel on this host in the same run (iterations per
CPU second). One device at a time, so devices do not compete.
Run as root: .venv/bin/python benchmarks/cluster_cpu.py [profile ...]
"""

from __future__ import annotations

import sys

from shoal.cluster import cpulimit, inventory
from shoal.cluster.emulated import EmulatedCluster

names = sys.argv[1:] or ["minnowboard", "rpi3", "rpi0w", "odroid-xu4", "stb", "nuc"]
for name in names:
    inv = inventory.from_emulate(f"1x{name}")
    with EmulatedCluster(inv, calibrate=True) as emu:
        record = emu.describe()["emulation"]
        node = inv.nodes[0]
        groups = emu.record["nodes"][node.name]["cgroups"]
        target = min(1.0, node.profile.speed / inv.host_speed)
        check = cpulimit.calibrate(groups, node.profile.cores, target)
    ratio = check["achieved_fraction"] / target
    print(f"{name:12s} target {target:.3f} of a host core, measured {check['achieved_fraction']:.3f} "
          f"({check['workers']} workers), ratio {ratio:.3f} "
          f"{'within 10%' if abs(ratio - 1) <= 0.10 else 'OUTSIDE 10%'}")
