"""How closely the link forwarder keeps its schedule under MPI traffic, against its bounds.

The timed half of tests/cluster/test_linkemu.py::test_mpi_traffic_keeps_the_link_schedule
(the test keeps what holds however busy the host is: no frame before its time, the
FIFO order, the byte counts). Two emulated MinnowBoards on a 20 Mbit/s, 2 ms link
through shoal-linkemu (the forwarder, with its frame log) run shoal-pairs (1 KiB
ping-pong, a 256 KiB-message stream of 4 MiB) once per MPI and round, and this prints:

- the host's own latency as cluster up measured it, for ranks that poll and for ranks
  that sleep: polling / sleeping (bound: <= 1, a polling rank answers no later than a
  sleeping one) and sleeping / the link's delay (bound: < 1);
- each frame's lateness from device 1 to device 2 (written minus scheduled): its median,
  99th percentile and maximum against one full frame's line time on the link (bound: the
  99th percentile below it, or frames written back to back lose the link's spacing), with
  this host's own lateness as a reference measured in the same round: how late a 1 ms
  sleep of this process wakes (99th percentile of 200);
- the stream's bandwidth / the link model's stream rate (bound: > 0.5, and never > 1.001).

Each line says "within" or "OUTSIDE" its bound; the exit status is 0 either way (a busy
host is what this measures). Run as root: .venv/bin/python benchmarks/linkemu_schedule.py
[--rounds 3] [--mpi mpich,openmpi]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import tempfile
import time
from pathlib import Path

from entry import run_main

from shoal import environment
from shoal.cluster import inventory, linkmodel, matrix, session, state
from shoal.cluster.emulated import EmulatedCluster
from shoal.errors import ShoalError
from shoal.mpi import discover
from shoal.profiles import link_from_table

RATE_BPS, LATENCY_S = 20e6, 2e-3
FULL_FRAME_WIRE_B = 1514 + 24  # a 1500-byte MTU frame with its line overhead


def _cluster(log: Path) -> session.Cluster:
    inv = inventory.from_emulate("2xminnowboard")
    link = link_from_table("schedule-link", {"rate_bps": RATE_BPS, "latency_s": LATENCY_S}, "benchmark")
    inv.nodes[:] = [node.__class__(node.name, node.profile, link, node.slots, node.address)
                    for node in inv.nodes]
    emu = EmulatedCluster(inv, calibrate=False, dilation=1)
    emu.link_log = log
    return session.EmulatedDevices(inv, emu, owns=True)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _sleep_lateness_s(count: int = 200, seconds: float = 1e-3) -> list[float]:
    """How late this process wakes from a sleep of ``seconds`` (the host's own lateness)."""
    late = []
    for _ in range(count):
        start = time.monotonic()
        time.sleep(seconds)
        late.append(time.monotonic() - start - seconds)
    return late


def one(mpi, workdir: Path) -> dict:
    log = workdir / "frames.csv"
    with _cluster(log) as c:
        record = state.read(c.emulated.id)
        if record["emulation"]["link_emulator"] != "forwarder":
            raise ShoalError("the cluster's links are not the forwarder's; "
                             f"set {environment.LINK_EMULATOR.name}=forwarder")
        host = record["emulation"]["host_latency_s"]
        row = matrix.measure(c, mpi, lat_size_B=1024, bw_size_B=256 << 10, bw_total_B=4 << 20,
                             lat_iters=20)[0]
    reference = _sleep_lateness_s()
    with open(log) as fh:
        late = [(int(f["delivered_ns"]) - int(f["scheduled_ns"])) / 1e9 for f in csv.DictReader(fh)
                if (f["in_port"], f["out_port"]) == ("1", "2")]
    if not late:
        raise ShoalError(f"the forwarder logged no frame from device 1 to device 2 in {log}")
    model = linkmodel.path(link_from_table("l", {"rate_bps": RATE_BPS, "latency_s": LATENCY_S}, "t"))
    return {"polling_s": host["polling"], "sleeping_s": host["sleeping"], "frames": len(late),
            "late_p50_s": statistics.median(late), "late_p99_s": _percentile(late, 0.99),
            "late_max_s": max(late), "reference_p99_s": _percentile(reference, 0.99),
            "bandwidth_ratio": row["bandwidth_Bps"] / model.stream_Bps()}


def _verdict(ok: bool) -> str:
    return "within" if ok else "OUTSIDE"


def report(name: str, r: dict) -> None:
    line_s = FULL_FRAME_WIRE_B * 8 / RATE_BPS
    polling_ratio = (f"{r['polling_s'] / r['sleeping_s']:.2f}" if r["sleeping_s"] > 0 else "n/a")
    print(f"{name}: host latency polling {r['polling_s'] * 1e3:.3f} ms / sleeping "
          f"{r['sleeping_s'] * 1e3:.3f} ms = {polling_ratio} (bound <= 1: "
          f"{_verdict(r['polling_s'] <= r['sleeping_s'])}); sleeping / link delay "
          f"{r['sleeping_s'] / LATENCY_S:.3f} (bound < 1: {_verdict(r['sleeping_s'] < LATENCY_S)})")
    print(f"{name}: lateness of {r['frames']} frames median {r['late_p50_s'] * 1e6:.0f} us, p99 "
          f"{r['late_p99_s'] * 1e6:.0f} us, max {r['late_max_s'] * 1e6:.0f} us; p99 / a full frame's "
          f"line time ({line_s * 1e6:.0f} us) {r['late_p99_s'] / line_s:.3f} (bound < 1: "
          f"{_verdict(r['late_p99_s'] < line_s)}); p99 / this host's own p99 of a 1 ms sleep "
          f"({r['reference_p99_s'] * 1e6:.0f} us) {r['late_p99_s'] / r['reference_p99_s']:.3f}")
    ratio = r["bandwidth_ratio"]
    print(f"{name}: stream / model {ratio:.3f} (bound 0.5-1.001: {_verdict(0.5 < ratio <= 1.001)})",
          flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--mpi", default="mpich,openmpi", help="comma-separated MPIs (default both)")
    args = p.parse_args()
    if os.geteuid() != 0:
        raise ShoalError("the forwarder's TAP ports in the host's namespaces need root; run as root")
    if args.rounds < 1:
        raise ShoalError(f"--rounds {args.rounds}: give at least 1")
    mpis = [discover.resolve(kind) for kind in args.mpi.split(",") if kind]
    with tempfile.TemporaryDirectory(prefix="shoal-linkemu-schedule-") as tmp:
        for i in range(args.rounds):
            for mpi in mpis:  # interleaved: a busy spell of the host falls on both
                report(f"round {i + 1} {mpi.name}", one(mpi, Path(tmp)))
    return 0


if __name__ == "__main__":
    run_main(main)
