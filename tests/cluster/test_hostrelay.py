"""The relay through which a process in a user namespace runs a command on the host's side
(``hostrelay``): the command gets the asker's stdin, stdout and stderr and environment, its
exit status comes back, and an asker that ends stops the command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from shoal.cluster import hostrelay

ASK = ("import os, sys; from shoal.cluster import hostrelay; "
       "sys.exit(hostrelay.run(sys.argv[1], sys.argv[2:], dict(os.environ)))")


@pytest.fixture
def relay(tmp_path):
    served = hostrelay.Relay(str(tmp_path / "relay.sock")).start()
    yield served
    served.close()


def _ask(relay, *argv: str, **options) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", ASK, relay.path, *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)


def test_the_command_has_the_askers_descriptors_environment_and_status(relay):
    asked = _ask(relay, "sh", "-c", 'read line; echo "got $line $WHO"; echo oops >&2; exit 3',
                 env={**os.environ, "WHO": "inside"})
    out, err = asked.communicate("hello\n", timeout=30)
    assert (asked.returncode, out, err) == (3, "got hello inside\n", "oops\n")


def test_a_command_killed_by_a_signal_gives_its_shell_status(relay):
    asked = _ask(relay, "sh", "-c", "kill -TERM $$")
    asked.communicate(timeout=30)
    assert asked.returncode == 128 + signal.SIGTERM


def test_an_asker_that_ends_stops_its_command(relay, tmp_path):
    marker = tmp_path / "pid"
    asked = _ask(relay, "sh", "-c", f"echo $$ > {marker}; exec sleep 600")
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text().strip()):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    command = int(marker.read_text())
    asked.kill()  # as a launcher kills its ssh
    asked.wait(timeout=30)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{command}") and open(f"/proc/{command}/stat").read().split()[2] != "Z":
        assert time.monotonic() < deadline, "the command outlived its asker"
        time.sleep(0.02)


def test_a_relay_that_is_gone_gives_ssh_s_status_and_one_line(tmp_path):
    asked = subprocess.run([sys.executable, "-c", ASK, str(tmp_path / "none.sock"), "true"],
                           capture_output=True, text=True, timeout=30)
    assert asked.returncode == 255
    assert asked.stderr.count("\n") == 1 and "relay" in asked.stderr
