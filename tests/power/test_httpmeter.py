"""A real HTTP meter on loopback: JSON paths, stalls, garbage, a meter that goes away."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from shoal.errors import ShoalError
from shoal.power import open_session
from shoal.power.httpmeter import HttpMeterSource, MeterError, extract_watts, parse_path


class Meter:
    """A loopback HTTP server answering like a REST power frontend."""

    def __init__(self, watts: float = 12.5) -> None:
        self.watts = watts
        self.mode = "ok"
        self.requests = 0
        meter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                meter.requests += 1
                if meter.mode == "stall":
                    meter.mode = "garbage"  # one stalled answer, then error pages
                    time.sleep(1.5)
                if meter.mode == "garbage":
                    body = b"<html>502 Bad Gateway</html>"
                else:
                    body = json.dumps({"node": "n0", "data": {"power_W": meter.watts,
                                                             "channels": [{"W": 1.5}, {"W": 2.5}]}}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a stalled answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/power"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def meter():
    m = Meter()
    yield m
    m.close()


def test_paths_dotted_and_pointer():
    body = b'{"data": {"power_W": 4.5, "list": [{"W": 1}, {"W": "2.25"}]}, "a/b": {"~x": 7}}'
    assert extract_watts(body, parse_path("data.power_W")) == 4.5
    assert extract_watts(body, parse_path("data.list.1.W")) == 2.25
    assert extract_watts(body, parse_path("/a~1b/~0x")) == 7
    assert extract_watts(b"3.5", []) == 3.5
    for bad, path, message in ((body, "data.nope", "no key 'nope'"), (body, "data.list.5.W", "no element"),
                               (b"<html>", "", "not JSON"), (b'{"x": true}', "x", "not a number"),
                               (b'{"x": "NaN"}', "x", "not finite")):
        with pytest.raises(MeterError, match=message):
            extract_watts(bad, parse_path(path))


def test_meter_reading(meter):
    source = HttpMeterSource(meter.url, "data.channels.1.W")
    assert source.read() == [2.5]
    assert source.channels[0].domain == "wall" and source.channels[0].kind == "measured"


def test_stall_and_garbage_mid_run_are_gaps_and_the_run_continues(meter):
    session = open_session(f"http:{meter.url}#data.power_W", rate_hz=10, node="recs")
    session.start()
    t0 = time.monotonic()
    time.sleep(0.6)
    meter.mode = "stall"      # the next poll waits past the 1 s timeout,
    time.sleep(1.5)           # then the frontend answers error pages
    assert meter.mode == "garbage"
    meter.mode = "ok"
    time.sleep(0.8)
    t1 = time.monotonic()
    (result,) = session.energy_between(t0, t1)
    session.stop()
    faults = "\n".join(session.faults())
    assert "timed out" in faults and "not JSON" in faults
    assert result["partial"] and 0.2 < result["coverage"] < 0.9
    # constant 12.5 W: the counted part integrates exactly, the gaps add nothing
    assert result["energy_J"] == pytest.approx(12.5 * result["coverage"] * (t1 - t0), rel=1e-6)
    rows = session.samples()
    assert any(r["note"] == "read failed" for r in rows)
    assert any(r["note"] == "gap" for r in rows)
    assert all(r["power_W"] in ("", 12.5) for r in rows)


def test_meter_that_disappears(meter):
    session = open_session(f"http:{meter.url}#data.power_W", rate_hz=10)
    t0 = time.monotonic()
    session.start()
    # Readings before the meter goes (a crowded host may delay the first ones).
    deadline = t0 + 30
    while sum(r["power_W"] != "" for r in session.samples()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    meter.close()
    time.sleep(0.6)
    t1 = time.monotonic()
    session.stop()
    (result,) = session.energy_between(t0, t1, wait=False)
    assert result["partial"] and result["energy_J"] > 0
    (fault,) = session.faults()
    # the request in flight is reset, the next ones are refused; polling went on all along
    assert "refused" in fault.lower() or "reset" in fault.lower()
    assert int(fault.split(": ")[1].split()[0]) >= 3


def test_bad_http_spec_is_one_line():
    with pytest.raises(ShoalError, match="give a URL"):
        open_session("http:nowhere")


def test_a_named_meter_that_does_not_answer_is_refused_before_the_run(meter, tmp_path):
    url = meter.url
    meter.close()  # nothing listens on its port any more
    proc = subprocess.run([sys.executable, "-m", "shoal", "bench", "--tests", "imb.PingPong",
                           "--sizes", "8", "--power", f"http:{url}#data.power_W",
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("shoal: power source http:") and "refused" in line.lower()
    assert "check the URL" in line and "Traceback" not in proc.stderr


def test_a_meter_that_fails_mid_sweep_is_a_warning_and_in_the_manifest(meter, tmp_path):
    out = tmp_path / "run"
    # Five points after the first, each at least its 0.5 s budget: time for the sampler's
    # next reads to find the meter gone (with two, a fast sweep ended before it looked).
    cmd = [sys.executable, "-m", "shoal", "bench", "--tests", "imb.PingPong", "--sizes", "8,1K,8K,64K,256K,1M",
           "--budget", "0.5", "--ci", "0", "--min-reps", "4", "--power", f"http:{meter.url}#data.power_W",
           "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "results.csv").exists():
        time.sleep(0.05)
    meter.close()  # the meter goes away during the sweep
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("shoal: warning: power:")]
    assert warnings and "http:127.0.0.1" in warnings[0] and "Traceback" not in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["power_faults"] and "refused" in " ".join(manifest["power_faults"]).lower()
