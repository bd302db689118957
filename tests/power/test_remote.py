"""The sampler as its own process, clock offsets, and streams from other nodes."""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import time

import pandas as pd
import pytest

from shoal.errors import ShoalError
from shoal.power import Offset, estimate_offset, open_session


def test_offset_from_the_tightest_exchange():
    exchanges = [(10.0, 1010.9, 12.0),   # slow round trip: +/- 1 s
                 (20.0, 1020.05, 20.1),  # 0.1 s round trip: offset 1000.0 +/- 0.05
                 (30.0, 1030.5, 31.0)]
    off = estimate_offset(exchanges)
    assert off.offset_s == pytest.approx(1000.0) and off.uncertainty_s == pytest.approx(0.05)
    assert off.to_local(1020.05) == pytest.approx(20.05)
    with pytest.raises(ValueError):
        estimate_offset([])
    with pytest.raises(ValueError):
        estimate_offset([(2.0, 0.0, 1.0)])


class SkewedNode:
    """A node whose monotonic clock is 1000 s ahead, speaking the sampler's stream."""

    SKEW = 1000.0

    def __init__(self, watts: float) -> None:
        self.watts = watts
        self.out: queue.Queue = queue.Queue()
        self.out.put(json.dumps({"type": "hello", "node": "far", "clock": {"mono": self.now()},
                                 "sources": [{"index": 0, "label": "http:meter", "period_s": 0.05, "notes": [],
                                              "channels": [{"source": "http:meter", "name": "W", "domain": "wall",
                                                            "kind": "measured", "quantity": "power",
                                                            "scale": 1.0}]}],
                                 "notes": ["far node note"]}))

    def now(self) -> float:
        return time.monotonic() + self.SKEW

    def send(self, line: str) -> None:
        command, _, tag = line.strip().partition(" ")
        if command == "sync":
            self.out.put(json.dumps({"type": "sync", "tag": tag, "t": self.now()}))
        elif command == "stop":
            self.out.put(None)

    def emit(self) -> None:
        self.out.put(json.dumps({"type": "r", "s": 0, "t": self.now(), "v": [self.watts]}))

    def lines(self):
        while (line := self.out.get()) is not None:
            yield line


def test_skewed_node_is_mapped_onto_local_time(kernel):
    kernel.proc_stat(user=0, idle=100)
    session = open_session("none")
    node = SkewedNode(watts=3.0)
    assert session.attach_remote(node.lines(), send=node.send) == "far"
    off = session.offsets["far"]
    assert off.offset_s == pytest.approx(SkewedNode.SKEW, abs=0.05)
    session.start()
    t0 = time.monotonic()
    for _ in range(11):
        node.emit()
        time.sleep(0.05)
    t1 = time.monotonic() - 0.06
    (result,) = session.energy_between(t0 + 0.01, t1, wait=False)
    session.stop()
    assert result["node"] == "far" and result["key"] == "far:http:meter/W"
    assert result["energy_J"] == pytest.approx(3.0 * (t1 - t0 - 0.01), rel=0.02)
    assert "far: far node note" in session.notes


def test_remote_needs_an_offset_or_a_way_to_measure_it():
    session = open_session("none")
    with pytest.raises(ShoalError, match="give a clock offset"):
        session.attach_remote(iter([json.dumps({"type": "hello", "node": "x", "sources": []})]))
    with pytest.raises(ShoalError, match="ended before it said hello"):
        session.attach_remote(iter([]), offset=Offset(0, 0))


def _sampler(*args, env=None):
    return subprocess.Popen([sys.executable, "-m", "shoal.power.sampler", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)


def test_standalone_sampler_streams_to_a_session(kernel):
    # the child reads a fake /proc/stat that never changes: the model gives exactly idle watts
    kernel.proc_stat(user=500, idle=500)
    env = {**os.environ, "SHOAL_PROC_ROOT": str(kernel.proc)}
    proc = _sampler("--source", "model:1.5,4", "--rate", "20", "--node", "devA", "--control", env=env)

    def send(line: str) -> None:
        proc.stdin.write(line)
        proc.stdin.flush()

    session = open_session("none")
    assert session.attach_remote(proc.stdout, send=send) == "devA"
    # same host, same CLOCK_MONOTONIC: the measured offset is zero within its bound
    off = session.offsets["devA"]
    assert abs(off.offset_s) <= off.uncertainty_s + 1e-3
    session.start()
    t0 = time.monotonic()
    time.sleep(0.8)
    t1 = time.monotonic()
    (result,) = session.energy_between(t0, t1)
    session.stop()
    assert proc.wait(timeout=10) == 0
    assert result["kind"] == "modelled" and result["node"] == "devA"
    assert result["energy_J"] == pytest.approx(1.5 * (t1 - t0), rel=1e-3)
    assert not result["partial"]


def test_standalone_sampler_jsonl_and_csv(kernel):
    kernel.proc_stat(user=1, idle=1)
    env = {**os.environ, "SHOAL_PROC_ROOT": str(kernel.proc)}
    proc = _sampler("--source", "model:1,2", "--rate", "50", "--duration", "0.3", env=env)
    out, _ = proc.communicate(timeout=20)
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["type"] == "hello" and lines[-1]["type"] == "bye"
    readings = [x for x in lines if x["type"] == "r"]
    # At most one reading per period of 50 Hz over the time they span (and the last reading
    # stop() takes): however late a loaded host ends the run, the sampler never bursts.
    span = readings[-1]["t"] - readings[0]["t"]
    assert 2 <= len(readings) <= span * 50 + 2, (len(readings), span)
    assert all(b["t"] > a["t"] for a, b in zip(readings, readings[1:]))
    proc = _sampler("--source", "model:1,2", "--rate", "50", "--duration", "0.3", "--format", "csv", env=env)
    out, _ = proc.communicate(timeout=20)
    table = pd.read_csv(io.StringIO(out))
    assert list(table.columns) == ["t_mono_s", "node", "source", "channel", "domain", "kind", "quantity",
                                   "value", "unit"]
    assert (table["unit"] == "J").all() and table["value"].is_monotonic_increasing


def test_standalone_sampler_bad_spec_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "shoal.power.sampler", "--source", "rapl,bogus"],
                          capture_output=True, text=True, timeout=20)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("shoal: unknown power source 'bogus'")
