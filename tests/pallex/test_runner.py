"""The local runner: socket passing, unit timing, big data to a late receiver, crashes and hangs."""

from __future__ import annotations

import hashlib
import os
import random
import socket
import struct
import subprocess
import sys
import time

from shoal.pallex import protocol, stagefile
from shoal.pallex.runner import Runner

PY = sys.executable
SYN = [PY, "-m", "shoal.pallex.apps.synthetic"]


def _app(stages: dict, edges=(), deadline=30.0, name="t"):
    return stagefile.parse({"app": {"name": name, "deadline_s": deadline}, "stages": stages, "edges": list(edges)})


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_big_edge_to_a_receiver_that_starts_3s_after_the_sender_finished(tmp_path):
    size = 2_500_000
    app = _app({"a": {"command": SYN + ["--send", str(size)]},
                "b": {"command": SYN, "needs": ["a"], "requires_units": ["late.target"]}},
               [{"from": "a", "to": "b", "bytes": size}])
    result = Runner(app, {"late.target": 5.0}, workdir=str(tmp_path)).run()
    assert result.outcome == "done", result.problems
    a, b = result.stages["a"], result.stages["b"]
    sender_done = a.report["t_work_done"] - result.t0_wall  # the sender's own work ended here
    assert b.start_s >= 5.0 and b.start_s > sender_done  # the receiver came after the sender was done
    assert b.trigger_s is not None and b.trigger_s < b.start_s  # data waited for the unit, as under systemd
    edge = result.edges[0]
    assert edge["sent_bytes"] == edge["received_bytes"] == size and edge["identical"]
    expected = random.Random(1).randbytes(size)
    assert b.report["received"]["a"]["sha256"] == hashlib.sha256(expected).hexdigest()
    assert a.end_s >= b.start_s  # the sender's process lived until its data were read
    assert os.listdir(tmp_path) == [] and all(_gone(r.pid) for r in result.stages.values())


def test_units_hold_stages_and_needs_order_them(tmp_path):
    app = _app({"s": {"command": SYN, "requires_units": ["x.target"]},
                "t": {"command": SYN, "needs": ["s"]}})
    result = Runner(app, {"x.target": 0.6}, systemd_ready_s=0.2, workdir=str(tmp_path)).run()
    s, t = result.stages["s"], result.stages["t"]
    assert s.ready_s == 0.6 and 0.6 <= s.start_s < 0.7
    assert t.start_s >= s.end_s  # a need without data waits for the exit
    baseline = Runner(app, {"x.target": 0.6}, systemd_ready_s=0.2, not_before_s=1.0, workdir=str(tmp_path)).run()
    assert baseline.stages["s"].start_s >= 1.0


def test_a_crashing_stage_is_reported_and_ends_the_cycle(tmp_path):
    app = _app({"a": {"command": SYN + ["--fail"]}, "b": {"command": SYN + ["--sleep", "20"]}})
    t = time.monotonic()
    result = Runner(app, workdir=str(tmp_path)).run()
    assert time.monotonic() - t < 15
    assert result.outcome == "failed"
    assert result.stages["a"].status == "failed" and result.stages["a"].reason == "exit status 3"
    assert result.stages["b"].status == "killed"
    assert any("stage a failed" in p for p in result.problems)
    assert os.listdir(tmp_path) == [] and all(_gone(r.pid) for r in result.stages.values())


def test_a_hanging_stage_is_killed_at_the_deadline(tmp_path):
    app = _app({"a": {"command": SYN + ["--send", "100"]},
                "b": {"command": SYN + ["--hang"], "needs": ["a"]}},
               [{"from": "a", "to": "b", "bytes": 100}], deadline=2.0)
    result = Runner(app, workdir=str(tmp_path)).run()
    assert result.outcome == "deadline" and 2.0 <= result.end_s < 3.0
    assert result.stages["b"].status == "killed" and "deadline" in result.stages["b"].reason
    assert os.listdir(tmp_path) == [] and all(_gone(r.pid) for r in result.stages.values())


def test_missing_program_fails_cleanly(tmp_path):
    app = _app({"a": {"command": ["/nonexistent/program"]}})
    result = Runner(app, workdir=str(tmp_path)).run()
    assert result.outcome == "failed" and result.stages["a"].exit_code == 127


def test_stage_runs_unchanged_under_systemd_socket_activate(tmp_path):
    """The same stage program under systemd's own tool: fd 3, LISTEN_FDNAMES, its own LISTEN_PID."""
    path = str(tmp_path / "in.sock")
    env = dict(os.environ, PALLEX_STAGE="recv")
    proc = subprocess.Popen(["/usr/bin/systemd-socket-activate", "-l", path, "--fdname=cap", *SYN],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        payload = os.urandom(2_499_000)
        deadline = time.monotonic() + 10
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            while True:  # the path is there once bound; connections are taken once it listens
                try:
                    s.connect(path)
                    break
                except ConnectionRefusedError:
                    assert time.monotonic() < deadline, "systemd-socket-activate never listened"
                    time.sleep(0.01)
            s.sendall(struct.pack(">Q", len(payload)) + payload)
            s.shutdown(socket.SHUT_WR)
            s.recv(1)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    report = protocol.parse_reports(out)[0]
    assert report["ok"], err
    assert report["received"]["cap"]["sha256"] == hashlib.sha256(payload).hexdigest()
