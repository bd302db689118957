"""Emulated cluster up+down time for 16 and 32 devices (target: 16 devices <= 5 s).

Reference measured in the same run: creating and deleting the same number of
bare namespaces with `ip netns add/del` (no links, shaping or cgroups), the
least any namespace-based emulator does. Prints seconds and the ratio.
Run as root: .venv/bin/python benchmarks/cluster_updown.py
"""

from __future__ import annotations

import subprocess
import time

from shoal.cluster import inventory
from shoal.cluster.emulated import EmulatedCluster


def bare_namespaces(count: int) -> float:
    names = [f"shoalref{i}" for i in range(count)]
    start = time.perf_counter()
    for name in names:
        subprocess.run(["ip", "netns", "add", name], check=True)
    for name in names:
        subprocess.run(["ip", "netns", "del", name], check=True)
    return time.perf_counter() - start


def shoal_cluster(count: int, calibrate: bool) -> tuple[float, float]:
    inv = inventory.from_emulate(f"{count}xminnowboard")
    start = time.perf_counter()
    emu = EmulatedCluster(inv, calibrate=calibrate).up()
    up = time.perf_counter() - start
    emu.down()
    return up, time.perf_counter() - start


for count in (16, 32):
    ref = bare_namespaces(count)
    up, total = shoal_cluster(count, calibrate=False)
    _, total_cal = shoal_cluster(count, calibrate=True)
    print(f"{count} devices: up {up:.2f} s, up+down {total:.2f} s "
          f"(with CPU calibration {total_cal:.2f} s); bare ip netns add/del {ref:.2f} s; "
          f"ratio {total / ref:.2f}; target 5 s for 16: {'met' if count != 16 or total_cal <= 5 else 'MISSED'}")
