"""CPU cost of sampling a sysfs power source at 1 kHz and 10 Hz.

Target: sampling at 1 kHz costs at most 1% of one core; at 10 Hz it is
negligible. The cost is the process CPU time (getrusage: user + system)
spent while the main thread sleeps, divided by wall time.

Reference, measured in the same run, interleaved: the same engine waking on
the same schedule without reading anything - for the C poller the poller
itself with no files, for Python a thread that only sleeps. Its cost is the
floor any periodic sampler pays on this kernel; the difference is what
reading and recording the sensor adds. On virtual machines and
small boards the wake-up itself (timer interrupt, leaving the idle state)
is most of the cost, which is why all sysfs sources of one rate share a
single sampling thread.

    .venv/bin/python benchmarks/power_overhead.py [--seconds 3] [--repeat 5] [--zones 4]

At 1 kHz it measures both engines: the C poller the sampler uses at
periods of 10 ms and below, and the pure-Python loop (its fallback when no
C compiler exists).

The source is a fake RAPL tree (package, core, uncore, dram) shaped like
the kernel's, so the script runs anywhere; pass --real to sample this
machine's own sensors (auto) instead.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path


def cpu_seconds() -> float:
    """CPU of this process and of its reaped children (the C poller)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def measure(fn, seconds: float) -> tuple[float, float]:
    """(cpu seconds, wall seconds) of the process while fn's thread works."""
    time.sleep(0.2)  # let earlier threads settle
    c0, w0 = cpu_seconds(), time.monotonic()
    fn(seconds)
    c1, w1 = cpu_seconds(), time.monotonic()
    return c1 - c0, w1 - w0


def sleep_floor(rate_hz: float):
    """A thread waking on the sampler's schedule and doing nothing else."""
    def run(seconds: float) -> None:
        stop = threading.Event()

        def loop() -> None:
            period, mono, sleep = 1.0 / rate_hz, time.monotonic, time.sleep
            next_t = mono()
            while not stop.is_set():
                next_t += period
                delay = next_t - mono()
                if delay > 0:
                    sleep(delay)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        time.sleep(seconds)
        stop.set()
        thread.join()
    return run


def c_floor(rate_hz: float):
    """The C poller with no files: the same process waking on the same schedule."""
    from shoal.power import fastpoll

    def run(seconds: float) -> None:
        batch = max(1, round(0.2 * rate_hz))
        proc = subprocess.Popen([str(fastpoll.binary()), str(int(1e9 / rate_hz)), str(batch)],
                                stdout=subprocess.DEVNULL)
        time.sleep(seconds)
        proc.terminate()
        proc.wait()
    return run


def sampler_run(spec: str, rate_hz: float, counts: list[int], engines: list[str], python_only: bool):
    from shoal.power import open_session

    def run(seconds: float) -> None:
        if python_only:
            os.environ["SHOAL_POWER_FASTPOLL"] = "0"
        try:
            session = open_session(spec, rate_hz=rate_hz, node="bench")
            session.start()
            engines.append("C poller" if session.sampler._pollers else "Python")
            time.sleep(seconds)
            session.stop()
        finally:
            os.environ.pop("SHOAL_POWER_FASTPOLL", None)
        counts.append(len(session.recorders[0]))
    return run


def fake_rapl(root: Path, zones: int) -> None:
    names = ["package-0", "core", "uncore", "dram"][:max(1, zones)]
    base = root / "class" / "powercap"
    base.mkdir(parents=True)
    for i, name in enumerate(names):
        zone = base / ("intel-rapl:0" if i == 0 else f"intel-rapl:0:{i - 1}")
        zone.mkdir()
        (zone / "name").write_text(name + "\n")
        (zone / "energy_uj").write_text(f"{123456789 + i}\n")
        (zone / "max_energy_range_uj").write_text("262143328850\n")
        (zone / "constraint_0_power_limit_uw").write_text("15000000\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repetitions (medians)")
    parser.add_argument("--zones", type=int, default=4, help="RAPL zones in the fake tree (1-4)")
    parser.add_argument("--real", action="store_true", help="sample this machine's sensors (auto)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.real:
            spec = "auto"
        else:
            fake_rapl(Path(tmp), args.zones)
            os.environ["SHOAL_SYSFS_ROOT"] = tmp
            spec = "rapl"
        print(f"source: {spec} ({'this machine' if args.real else f'fake RAPL tree, {args.zones} zones'}), "
              f"{args.seconds:g} s per measurement, {os.cpu_count()} CPUs")
        print(f"{'rate':>8} {'engine':>9} {'readings':>9} {'sampler %core':>14} {'floor %core':>12} "
              f"{'sampler-floor':>14} {'sampler/floor':>14}")
        # The machine may be shared and noisy: interleave repetitions, report medians.
        for rate, variants in ((1000.0, (False, True)), (10.0, (False,))):
            results: dict[str, list[tuple[float, float, int]]] = {}
            for _ in range(args.repeat):
                for python_only in variants:
                    counts: list[int] = []
                    engines: list[str] = []
                    floor = c_floor(rate) if rate >= 100 and not python_only else sleep_floor(rate)
                    floor_cpu, floor_wall = measure(floor, args.seconds)
                    cpu, wall = measure(sampler_run(spec, rate, counts, engines, python_only), args.seconds)
                    results.setdefault(engines[0], []).append((cpu / wall, floor_cpu / floor_wall, counts[0]))
            for engine, runs in results.items():
                share = statistics.median(r[0] for r in runs)
                floor = statistics.median(r[1] for r in runs)
                readings = int(statistics.median(r[2] for r in runs))
                ratio = share / floor if floor else float("inf")
                print(f"{rate:>6g}Hz {engine:>9} {readings:>9d} {share * 100:>13.3f}% {floor * 100:>11.3f}% "
                      f"{(share - floor) * 100:>13.3f}% {ratio:>14.2f}")


if __name__ == "__main__":
    main()
