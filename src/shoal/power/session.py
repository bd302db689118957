"""The power API benchmarks use: open, start, ask energy between two times, stop.

    session = power.open_session("auto", rate_hz=10)
    session.start()
    idle = session.measure_idle(2.0)          # {channel key: W}
    ... run a benchmark; it prints CLOCK_MONOTONIC start/end of each point ...
    for r in session.energy_between(t0, t1):  # same clock as time.monotonic()
        r["energy_J"], r["mean_power_W"], r["partial"], r["coverage"]
    run.append("power", session.new_samples(), columns=power.COLUMNS)
    session.stop()

Samples from other nodes join with ``attach_remote``: the stream of a
``python -m shoal.power.sampler`` process started on that node, its clock
mapped onto this one by an offset (measured over the same pipe when a
``send`` function is given).
"""

from __future__ import annotations

import bisect
import json
import math
import socket
import threading
import time
from typing import Callable, Iterable, Iterator

import numpy as np

from shoal.errors import ShoalError
from shoal.power import clock, integrate, spec
from shoal.power.base import POWER, Channel, Source
from shoal.power.sampler import DEFAULT_RATE_HZ, Recorder, Sampler

#: Columns of the ``power`` table of a run (see docs/power.md).
COLUMNS = ["t_mono_s", "node", "source", "channel", "domain", "kind", "quantity",
           "power_W", "energy_J", "interval_s", "note"]


class RemoteSource(Source):
    """Channels described by a remote sampler's hello; readings arrive by stream."""

    def poll(self):  # pragma: no cover - never polled, fed by Session.attach_remote
        return []


def open_session(spec_text: str = "auto", rate_hz: float = DEFAULT_RATE_HZ,
                 node: str | None = None) -> "Session":
    """Open the sources of ``spec_text`` on this node (not started yet).

    Raises ShoalError for a bad spec, an unavailable named source or a bad
    rate; ``auto`` always succeeds (falling back to the model).
    """
    items = spec.parse(spec_text)
    offset = clock.wall_minus_mono()
    node = node if node is not None else socket.gethostname()
    sources, notes = spec.build(items, node=node, offset_s=offset, since_mono=time.monotonic())
    try:
        sampler = Sampler(sources, rate_hz)
    except ShoalError:
        for source in sources:
            source.close()
        raise
    return Session(sampler, notes, offset, node, spec_text)


class Session:
    """Sampling on this node (and streamed from others), energy on demand."""

    def __init__(self, sampler: Sampler, notes: list[str], wall_minus_mono: float, node: str,
                 spec_text: str = "") -> None:
        self.sampler = sampler
        self.node = node
        self.spec = spec_text
        self.wall_minus_mono = wall_minus_mono
        self.notes = list(notes) + list(sampler.notes)
        for rec in sampler.recorders:
            self.notes.extend(f"{rec.source.label}: {n}" for n in rec.source.notes)
        self.recorders: list[Recorder] = list(sampler.recorders)
        # Idle power per channel: what a model knows, replaced by measure_idle where asked for.
        self.idle_W: dict[str, float] = {k: w for rec in self.recorders
                                         for k, w in rec.source.known_idle_W().items()}
        self._emitted = [0] * len(self.recorders)
        self._remote: list[tuple[threading.Thread, Callable[[str], None] | None]] = []
        self._remote_counts: list[int] = []
        self.offsets: dict[str, clock.Offset] = {}

    # -- life cycle -----------------------------------------------------------
    def start(self) -> "Session":
        known = len(self.sampler.notes)
        self.sampler.start()
        self.notes.extend(self.sampler.notes[known:])  # e.g. the C poller could not be built
        return self

    def stop(self) -> None:
        """Stop sampling; remote samplers are told to stop and their streams drained."""
        self.sampler.stop()
        for thread, send in self._remote:
            if send is not None:
                try:
                    send("stop\n")
                except OSError:
                    pass
            thread.join(timeout=5.0)

    def __enter__(self) -> "Session":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def channels(self) -> list[Channel]:
        return [ch for rec in self.recorders for ch in rec.source.channels]

    @property
    def kinds(self) -> set[str]:
        return {ch.kind for ch in self.channels}

    # -- energy ---------------------------------------------------------------
    def wait_for(self, t: float, timeout_s: float | None = None) -> None:
        """Wait until every source still sampling has a reading at or after ``t``.

        Remote streams arrive in batches, so their wait includes the stream's
        flush delay; the wait is bounded either way.
        """
        if timeout_s is None:
            timeout_s = 2.0 * max((r.period_s for r in self.recorders), default=0.0) + 0.5
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            live = list(self.sampler.recorders) if self.sampler.started else []
            live += [r for thread, recs in self._remote_recorders() if thread.is_alive() for r in recs]
            if all(len(r) and r.times[len(r) - 1] >= t for r in live):
                return
            time.sleep(0.005)

    def _remote_recorders(self):
        start = len(self.sampler.recorders)
        for (thread, _), count in zip(self._remote, self._remote_counts):
            yield thread, self.recorders[start:start + count]
            start += count

    def measure_idle(self, seconds: float) -> dict[str, float]:
        """Sleep ``seconds`` and return the mean power of each channel (W).

        The result is kept in ``idle_W`` and used by energy_between to give
        energy above idle.
        """
        if seconds <= 0:
            raise ShoalError(f"idle measurement needs a positive duration, got {seconds:g} s")
        t0 = time.monotonic()
        time.sleep(seconds)
        t1 = time.monotonic()
        self.wait_for(t1)
        self.idle_W = {r["key"]: r["mean_power_W"] for r in self.energy_between(t0, t1, wait=False)
                       if r["mean_power_W"] is not None}
        return dict(self.idle_W)

    def energy_between(self, t0_mono: float, t1_mono: float, wait: bool = True) -> list[dict]:
        """Energy of every channel between two monotonic times.

        One dict per channel: key, node, source, channel, domain, kind
        (measured|modelled), part_of, energy_J (None when nothing covers the
        window), mean_power_W, peak_power_W, idle_W and energy_above_idle_J
        (when measure_idle ran), coverage (0..1, the fraction of the window
        with counted data) and partial (coverage below 99.9%). With ``wait``
        it first waits (briefly) for readings past ``t1_mono``.
        """
        if not t1_mono > t0_mono:
            raise ShoalError(f"energy window must end after it starts ({t0_mono} .. {t1_mono})")
        if wait:
            self.wait_for(t1_mono)
        out = []
        for rec in self.recorders:
            n = len(rec)
            # Only the readings around the window: a long 1 kHz run holds millions.
            lo = max(0, bisect.bisect_left(rec.times, t0_mono, 0, n) - 1)
            hi = min(n, bisect.bisect_right(rec.times, t1_mono, 0, n) + 1)
            for ch, column in zip(rec.source.channels, rec.values):
                k = lo
                while k > 0 and math.isnan(column[k]):
                    k -= 1  # a counter's interval starts at the last valid reading
                t = np.array(rec.times[k:hi], dtype=float)
                v = np.array(column[k:hi], dtype=float)
                w = integrate.window(self._intervals(ch, t, v, rec.period_s), t0_mono, t1_mono)
                idle = self.idle_W.get(ch.key)
                above = None
                if idle is not None and w.energy_J is not None:
                    above = w.energy_J - idle * w.covered_s
                out.append({
                    "key": ch.key, "node": ch.node, "source": ch.source, "channel": ch.name,
                    "domain": ch.domain, "kind": ch.kind, "part_of": ch.part_of,
                    "energy_J": w.energy_J, "mean_power_W": w.mean_power_W,
                    "peak_power_W": w.peak_power_W, "idle_W": idle, "energy_above_idle_J": above,
                    "coverage": w.coverage, "partial": w.partial,
                })
        return out

    @staticmethod
    def _intervals(ch: Channel, t: np.ndarray, v: np.ndarray, period_s: float) -> integrate.Intervals:
        return integrate.intervals(ch, t, v, max_gap_s=_max_gap(t, v, period_s))

    # -- samples --------------------------------------------------------------
    def samples(self) -> list[dict]:
        """Every reading so far as rows of the ``power`` table (COLUMNS)."""
        rows = []
        for rec in self.recorders:
            rows.extend(_rows(rec, 0))
        rows.sort(key=lambda r: r["t_mono_s"])
        return rows

    def new_samples(self) -> list[dict]:
        """Rows of readings not returned by an earlier new_samples() call."""
        rows = []
        for i, rec in enumerate(self.recorders):
            n = len(rec)
            rows.extend(_rows(rec, self._emitted[i], n))
            self._emitted[i] = n
        rows.sort(key=lambda r: r["t_mono_s"])
        return rows

    def faults(self) -> list[str]:
        """One line per channel whose reads failed: count and the distinct errors."""
        out = []
        for rec in self.recorders:
            node = f"{rec.source.channels[0].node}:" if rec.source.channels and rec.source.channels[0].node else ""
            for name, messages in rec.source.faults.items():
                count = rec.source.fault_counts.get(name, 1)
                out.append(f"{node}{rec.source.label}/{name}: {count} failed read(s): " + "; ".join(messages))
        return out

    # -- other nodes ----------------------------------------------------------
    def attach_remote(self, lines: Iterable[str], send: Callable[[str], None] | None = None,
                      offset: clock.Offset | None = None, sync_rounds: int = 8) -> str:
        """Add the readings streamed by a sampler process on another node.

        ``lines`` yields the process's stdout lines (JSON lines format);
        ``send`` writes to its stdin (started with ``--control``). The clock
        offset is ``offset`` if given (e.g. ``Offset(0, 0)`` for emulated
        devices sharing this kernel's clock), else measured with
        ``sync_rounds`` sync exchanges through ``send``. Returns the node
        name from the stream; readings keep arriving until the stream ends.
        """
        stream = iter(lines)
        first = _next_json(stream)
        if first.get("type") != "hello":
            raise ShoalError(f"remote power stream does not start with hello: {str(first)[:80]}")
        node = first.get("node") or f"remote{len(self._remote)}"
        pending: list[dict] = []
        if offset is None:
            if send is None:
                raise ShoalError(f"node {node}: give a clock offset, or a send function to measure it")
            exchanges = []
            for k in range(sync_rounds):
                sent = time.monotonic()
                send(f"sync {k}\n")
                while True:
                    msg = _next_json(stream)
                    if msg.get("type") == "sync" and msg.get("tag") == str(k):
                        exchanges.append((sent, float(msg["t"]), time.monotonic()))
                        break
                    pending.append(msg)
            offset = clock.estimate_offset(exchanges)
        self.offsets[node] = offset
        base = len(self.recorders)
        for desc in first.get("sources", []):
            channels = [Channel(**{**c, "node": node}) for c in desc["channels"]]
            source = RemoteSource(label=desc["label"], channels=channels, notes=list(desc.get("notes", [])))
            self.recorders.append(Recorder(source, float(desc["period_s"])))
            self._emitted.append(0)
        self.notes.extend(f"{node}: {n}" for n in first.get("notes", []))
        recorders = self.recorders[base:]

        def feed(msg: dict) -> None:
            if msg.get("type") == "r":
                recorders[msg["s"]].add(offset.to_local(float(msg["t"])), msg["v"])
            elif msg.get("type") == "bye":
                for rec in recorders:
                    for name, (messages, count) in msg.get("faults", {}).get(rec.source.label, {}).items():
                        rec.source.faults[name] = list(messages)
                        rec.source.fault_counts[name] = count

        for msg in pending:
            feed(msg)

        def reader() -> None:
            for line in stream:
                if line.strip():
                    try:
                        feed(json.loads(line))
                    except (ValueError, KeyError, IndexError, TypeError):
                        recorders[0].source.fault("stream", f"bad line from {node}: {line[:60]!r}")

        thread = threading.Thread(target=reader, name=f"shoal-power-remote-{node}", daemon=True)
        thread.start()
        self._remote.append((thread, send))
        self._remote_counts.append(len(recorders))
        return node


def _next_json(stream: Iterator[str]) -> dict:
    for line in stream:
        if line.strip():
            try:
                return json.loads(line)
            except ValueError:
                raise ShoalError(f"remote power stream sent a line that is not JSON: {line[:80]!r}") from None
    raise ShoalError("remote power stream ended before it said hello (did the sampler start?)")


def _max_gap(t: np.ndarray, v: np.ndarray, period_s: float) -> float:
    """Longest interval a power channel may be integrated across.

    Five nominal periods, or five typical spacings for sources with their
    own cadence (meter logs), and never below one second.
    """
    spacing = float(np.median(np.diff(t))) if t.size > 2 else period_s
    return max(5.0 * period_s, 5.0 * spacing, 1.0)


def _rows(rec: Recorder, start: int, stop: int | None = None) -> list[dict]:
    """Rows of the power table for readings start..stop of one recorder."""
    n = len(rec) if stop is None else stop
    if start >= n:
        return []
    rows = []
    for c, ch in enumerate(rec.source.channels):
        column = rec.values[c]
        # Begin at the last valid reading before `start` so the first row has its interval.
        k = start - 1
        while k >= 0 and math.isnan(column[k]):
            k -= 1
        k = max(k, 0)
        t = np.array(rec.times[k:n], dtype=float)
        v = np.array(column[k:n], dtype=float)
        iv = integrate.intervals(ch, t, v, max_gap_s=_max_gap(t, v, rec.period_s))
        by_end = {int(e): j for j, e in enumerate(iv.end_index)}
        for i in range(start - k, n - k):
            row = {"t_mono_s": float(t[i]), "node": ch.node, "source": ch.source, "channel": ch.name,
                   "domain": ch.domain, "kind": ch.kind, "quantity": ch.quantity,
                   "power_W": "", "energy_J": "", "interval_s": "", "note": ""}
            if math.isnan(v[i]):
                row["note"] = integrate.NOTE_FAILED
            elif i in by_end:
                j = by_end[i]
                row["interval_s"] = float(iv.t1[j] - iv.t0[j])
                row["note"] = iv.note[j]
                if iv.ok[j]:
                    row["energy_J"] = float(iv.energy_J[j])
                if ch.quantity == POWER:
                    row["power_W"] = float(v[i] * ch.scale)
                elif iv.ok[j]:
                    row["power_W"] = float(iv.p1[j])
            else:
                row["note"] = integrate.NOTE_START
                if ch.quantity == POWER:
                    row["power_W"] = float(v[i] * ch.scale)
            rows.append(row)
    return rows


