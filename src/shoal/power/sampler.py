"""Background sampling of power sources, in-process or as its own process.

In-process: ``Sampler(sources, rate_hz).start()`` polls every source from
background threads and keeps raw readings (monotonic time, raw value per
channel) in flat arrays; ``stop()`` takes one last reading and closes the
sources. Sensors read through sysfs share one thread per period, so N
sources cost one wake-up per tick (on small devices and VMs the wake-up,
not the read, is most of the cost: see benchmarks/power_overhead.py).
At periods of 10 ms and below, sources that are plain integer files are
polled by a small C program instead (shoal.power.fastpoll), because the
interpreter's work per tick alone would exceed 1% of a core at 1 kHz.
Sources that may block (HTTP meters, log files) get a thread each, so a
stalled meter never delays the others.

As a process, for clusters (started inside an emulated device's namespace
and cgroup, or over ssh on a real host)::

    python -m shoal.power.sampler --source auto --rate 10 [--node NAME]
        [--duration S] [--format jsonl|csv] [--control]

it writes JSON lines to stdout: one ``hello`` (node, clock, sources and
their channels), then ``{"type": "r", "s": SOURCE_INDEX, "t": MONO, "v":
[raw values, null if failed]}`` per reading, and a final ``bye`` with the
faults. With ``--control`` it reads commands on stdin: ``sync TAG`` answers
``{"type": "sync", "tag": TAG, "t": MONO}`` at once (for clock offset
estimation), ``stop`` or end of input stops it. SIGTERM and SIGINT stop it
cleanly. ``--format csv`` writes scaled values (J of the raw counter, or W)
for reading by hand.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import signal
import sys
import threading
import time
from array import array
from dataclasses import asdict

import numpy as np

from shoal import environment
from shoal.errors import ShoalError
from shoal.power import fastpoll
from shoal.power.base import ENERGY, Source

MAX_RATE_HZ = 1000.0
DEFAULT_RATE_HZ = 10.0


def check_rate(rate_hz: float) -> float:
    if not (isinstance(rate_hz, (int, float)) and math.isfinite(rate_hz)) or not 0 < rate_hz <= MAX_RATE_HZ:
        raise ShoalError(f"sampling rate {rate_hz!r} Hz is out of range; give 0 < rate <= {MAX_RATE_HZ:g}")
    return float(rate_hz)


class Recorder:
    """Readings of one source: monotonic times and raw values, append-only.

    Values are appended before the time, so a reader that takes
    ``len(times)`` first always finds as many values per channel.
    """

    def __init__(self, source: Source, period_s: float) -> None:
        self.source = source
        self.period_s = period_s
        self.times = array("d")
        self.values = [array("d") for _ in source.channels]

    def take(self) -> None:
        try:
            readings = self.source.poll()
        except Exception as exc:  # a broken source must not stop the others
            self.source.fault("*", f"{type(exc).__name__}: {exc}")
            return
        for t, values in readings:
            self.add(t, values)

    def add(self, t: float, values) -> None:
        for column, value in zip(self.values, values):
            column.append(math.nan if value is None else value)
        self.times.append(t)

    def __len__(self) -> int:
        return len(self.times)

    def snapshot(self, start: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
        """Copies of the readings from index ``start`` on."""
        n = len(self.times)
        t = np.array(self.times[start:n], dtype=float)
        return t, [np.array(column[start:n], dtype=float) for column in self.values]


class Sampler:
    """Polls sources from background threads (see module doc)."""

    def __init__(self, sources: list[Source], rate_hz: float = DEFAULT_RATE_HZ) -> None:
        rate_hz = check_rate(rate_hz)
        self.rate_hz = rate_hz
        self.notes: list[str] = []
        self.recorders: list[Recorder] = []
        for source in sources:
            period = 1.0 / rate_hz
            if source.blocking:
                period = max(period, source.default_period_s)
            elif source.min_period_s > period:
                self.notes.append(
                    f"{source.label}: readings change only every {source.min_period_s * 1e3:g} ms; "
                    f"sampling at {1 / source.min_period_s:g} Hz instead of {rate_hz:g} Hz")
                period = source.min_period_s
            self.recorders.append(Recorder(source, period))
            self.notes.extend(wrap_warnings(source, period))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pollers: list[fastpoll.FastPoller] = []
        self.started = False

    def start(self) -> None:
        """First reading of every source now, then poll in the background."""
        if self.started:
            return
        self.started = True
        groups: dict[float, list[Recorder]] = {}
        for rec in self.recorders:
            rec.take()
            if rec.source.blocking:
                self._spawn([rec], rec.period_s)
            else:
                groups.setdefault(rec.period_s, []).append(rec)
        for period, recs in groups.items():
            if period <= fastpoll.FAST_PERIOD_S and self._fast(recs, period):
                continue
            self._spawn(recs, period)

    def _fast(self, recs: list[Recorder], period: float) -> bool:
        """Hand plain-file sources of a fast group to the C poller; False if it cannot."""
        if environment.POWER_FASTPOLL.get() == "0":
            return False
        fast = [r for r in recs if r.source.fast_fds() is not None]
        if not fast:
            return False
        try:
            self._pollers.append(fastpoll.FastPoller(fast, period))
        except fastpoll.Unavailable as exc:
            self.notes.append(f"{exc}; sampling in Python costs more CPU at this rate")
            return False
        rest = [r for r in recs if r.source.fast_fds() is None]
        if rest:
            self._spawn(rest, period)
        return True

    def _spawn(self, recs: list[Recorder], period: float) -> None:
        name = "shoal-power-" + "+".join(r.source.label for r in recs)
        thread = threading.Thread(target=self._loop, args=(recs, period), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _loop(self, recs: list[Recorder], period: float) -> None:
        # The hot path at 1 kHz: few calls per tick. Sources that are plain
        # integer files are pread inline; any error falls back to take(),
        # which records the fault.
        mono, sleep, stopped, pread = time.monotonic, time.sleep, self._stop.is_set, os.pread
        plan = [(rec, rec.source.fast_fds(), rec.values, rec.times) for rec in recs]
        next_t = mono()
        while True:
            next_t += period
            delay = next_t - mono()
            while delay > 0:
                sleep(delay if delay < 0.2 else 0.2)  # short slices keep stop() prompt
                if stopped():
                    return
                delay = next_t - mono()
            if stopped():
                return
            if delay < -period:
                next_t = mono()  # fell behind (slow poll): resume the schedule, do not burst
            for rec, fds, columns, times in plan:
                if fds is None:
                    rec.take()
                    continue
                t = mono()
                try:
                    values = [int(pread(fd, 32, 0)) for fd in fds]
                except (OSError, ValueError):
                    rec.take()
                    continue
                for column, value in zip(columns, values):
                    column.append(value)
                times.append(t)

    def stop(self) -> None:
        """Stop the threads, take a last reading of each source, close them."""
        if not self.started:
            for rec in self.recorders:
                rec.source.close()
            return
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        for poller in self._pollers:
            poller.stop()
        self._pollers.clear()
        for rec in self.recorders:
            rec.take()
            rec.source.close()
        self.started = False


def wrap_warnings(source: Source, period_s: float) -> list[str]:
    """Warnings for counters that could wrap more than once between two reads.

    A counter of range R (J) at up to P watts wraps after R/P seconds; two
    reads further apart than that cannot tell one wrap from two. Sampling at
    most every R/(2P) keeps a margin for late wake-ups.
    """
    out = []
    for ch in source.channels:
        wrap_s = ch.wrap_time_s()
        if wrap_s is not None and period_s >= wrap_s / 2.0:
            out.append(f"{ch.key}: the counter can wrap every {wrap_s:.3g} s at {ch.max_power_W:g} W; "
                       f"sampling every {period_s:g} s could miss a wrap: use a rate above "
                       f"{2.0 / wrap_s:.3g} Hz")
    return out


# -- standalone process ---------------------------------------------------------
def hello(node: str, recorders: list[Recorder], notes: list[str], offset_s: float) -> dict:
    """The first line of the stream: what will be sent."""
    return {
        "type": "hello", "node": node,
        "clock": {"mono": time.monotonic(), "wall_minus_mono": offset_s},
        "sources": [{"index": i, "label": r.source.label, "period_s": r.period_s,
                     "notes": r.source.notes,
                     "channels": [asdict(c) for c in r.source.channels]}
                    for i, r in enumerate(recorders)],
        "notes": notes,
    }


def _jsonable(values) -> list:
    return [None if math.isnan(v) else v for v in values]


class _Writer:
    """Writes new readings of every recorder, one line each, under a lock."""

    def __init__(self, out, recorders: list[Recorder], fmt: str, node: str) -> None:
        self.out, self.recorders, self.fmt, self.node = out, recorders, fmt, node
        self.lock = threading.Lock()
        self.sent = [0] * len(recorders)

    def line(self, obj: dict) -> None:
        if self.fmt != "jsonl":
            return
        with self.lock:
            self.out.write(json.dumps(obj, allow_nan=False) + "\n")
            self.out.flush()

    def header(self) -> None:
        if self.fmt == "csv":
            self.csv = csv.writer(self.out, lineterminator="\n")
            self.csv.writerow(["t_mono_s", "node", "source", "channel", "domain", "kind", "quantity",
                               "value", "unit"])

    def drain(self) -> None:
        with self.lock:
            for i, rec in enumerate(self.recorders):
                t, columns = rec.snapshot(self.sent[i])
                self.sent[i] += t.size
                for k in range(t.size):
                    values = [float(c[k]) for c in columns]
                    if self.fmt == "jsonl":
                        self.out.write(json.dumps({"type": "r", "s": i, "t": float(t[k]),
                                                   "v": _jsonable(values)}) + "\n")
                        continue
                    for ch, v in zip(rec.source.channels, values):
                        value = "" if math.isnan(v) else repr(v * ch.scale)
                        unit = "J" if ch.quantity == ENERGY else "W"
                        self.csv.writerow([repr(float(t[k])), self.node, ch.source, ch.name, ch.domain,
                                           ch.kind, ch.quantity, value, unit])
            self.out.flush()


def _control(writer: _Writer, stop: threading.Event, stream) -> None:
    for line in stream:
        command, _, tag = line.strip().partition(" ")
        if command == "sync":
            writer.line({"type": "sync", "tag": tag, "t": time.monotonic()})
        elif command == "stop":
            break
    stop.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.power.sampler",
                                     description="Stream power readings of this node to stdout.")
    parser.add_argument("--source", default="auto", help="source spec (default auto)")
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE_HZ, help="samples per second")
    parser.add_argument("--node", default="", help="node name to put in the stream")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    parser.add_argument("--control", action="store_true", help="read sync/stop commands on stdin")
    parser.add_argument("--flush", type=float, default=0.2, help="seconds between writes")
    args = parser.parse_args(argv)

    from shoal.power import clock, spec

    try:
        offset = clock.wall_minus_mono()
        sources, notes = spec.build(spec.parse(args.source), node=args.node, offset_s=offset,
                                    since_mono=time.monotonic())
        sampler = Sampler(sources, args.rate)
    except ShoalError as exc:
        print(f"shoal: {exc}", file=sys.stderr)
        return exc.exit_code
    stop = threading.Event()
    writer = _Writer(sys.stdout, sampler.recorders, args.format, args.node)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    writer.line(hello(args.node, sampler.recorders, notes + sampler.notes, offset))
    writer.header()
    sampler.start()
    if args.control:
        threading.Thread(target=_control, args=(writer, stop, sys.stdin), daemon=True).start()
    deadline = None if args.duration is None else time.monotonic() + args.duration
    try:
        while not stop.is_set():
            wait = args.flush if deadline is None else min(args.flush, deadline - time.monotonic())
            if wait <= 0:
                break
            stop.wait(wait)
            writer.drain()
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
        writer.drain()
        writer.line({"type": "bye", "faults": {r.source.label: {k: [m, r.source.fault_counts[k]]
                                                               for k, m in r.source.faults.items()}
                                              for r in sampler.recorders}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
