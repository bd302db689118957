"""The shipped scenarios run as they are: a loopback upload sink where nothing listens, and a
failed stage's own error in the summary.

Each CLI run is in a network namespace of its own (``unshare -Urn``, which an ordinary user may
make too), so the scenarios' fixed port 8080 is theirs alone on a shared machine, and an address
that is not loopback can be given to it: 192.0.2.1 (TEST-NET-1) on its lo, nothing listening,
answers as a closed port of another host would.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from contextlib import ExitStack

import pytest

from shoal.pallex import stagefile
from shoal.pallex.cloud import Cloud, sinks_for
from shoal.pallex.runner import Runner

PY = sys.executable
IN_OWN_NET = ["unshare", "-Urn", "sh", "-c",
              'ip link set lo up && ip addr add 192.0.2.1/32 dev lo && exec "$@"', "own-net"]


def _shoal_in_own_net(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*IN_OWN_NET, PY, "-m", "shoal", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("scenario", stagefile.SCENARIOS)
def test_every_shipped_scenario_completes_as_it_is(scenario, tmp_path):
    run = _shoal_in_own_net("pallex", "run", scenario, "--time-scale", "0.1", "--power", "none", "--json",
                            "--out", str(tmp_path / "run"))
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout)
    assert out["outcome"] == "done" and out["problems"] == []
    assert all(e["identical"] for e in out["edges"])
    if scenario.startswith("icu"):
        frames = int(scenario[3:])
        assert "nothing listened at http://127.0.0.1:8080/images: started shoal's loopback upload sink" in run.stderr
        assert out["upload_sinks"] == [{"url": "http://127.0.0.1:8080/images", "uploads": frames,
                                        "bytes": frames * 2499000}]
        sent = out["stages"]["cap"]["report"]["result"]["frames"]
        uploaded = out["done_reports"][0]["result"]["uploads"]
        assert sorted(f["sha256"] for f in sent) == sorted(u["sha256"] for u in uploaded)
    else:
        assert out["upload_sinks"] == [] and "upload sink" not in run.stderr


def test_a_closed_port_elsewhere_fails_with_the_stage_s_own_error(tmp_path):
    run = _shoal_in_own_net("pallex", "run", "icu1", "--time-scale", "0.1", "--power", "none",
                            "--param", "upload_url=http://192.0.2.1:9/images", "--out", str(tmp_path / "run"))
    assert run.returncode == 1
    assert "upload sink" not in run.stderr + run.stdout   # not loopback: nothing started there
    summary = " ".join(run.stdout.split())                 # the table wraps long lines
    assert "problem: stage upl failed: exit status 1: URLError: <urlopen error [Errno 111] Connection refused>" \
        in summary


def test_a_failed_stage_s_last_line_is_its_reason(tmp_path):
    app = stagefile.parse({"app": {"name": "t", "deadline_s": 30},
                           "stages": {"a": {"command": [PY, "-c", "import sys; print('working'); "
                                                                  "sys.exit('the disk is full')"]}}})
    result = Runner(app, workdir=str(tmp_path)).run()
    assert result.stages["a"].reason == "exit status 1: the disk is full"
    assert result.problems == ["stage a failed: exit status 1: the disk is full"]


def _put(url: str, body: bytes) -> int:
    request = urllib.request.Request(url, data=body, method="PUT")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def test_a_sink_starts_only_on_a_free_loopback_port():
    with socket.socket() as probe:   # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    with Cloud() as taken, ExitStack() as stack:
        sinks = sinks_for({"a": f"http://localhost:{free}/up", "b": taken.url, "c": "http://192.0.2.1:9/x",
                           "d": "not a url", "e": f"http://127.0.0.1:{free}/again"}, stack)
        assert [s.url for s in sinks] == [f"http://127.0.0.1:{free}/up"]
        assert _put(f"http://127.0.0.1:{free}/up/0", b"frame") == 201
        assert sinks[0].received[0]["bytes"] == 5 and taken.received == []
    with socket.socket() as again:   # closed with the stack: nothing listens there any more
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", free))
        again.listen(1)
