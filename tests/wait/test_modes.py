"""Wait-mode grammar: the same answers in Python and in the C library."""

from __future__ import annotations

import subprocess

import pytest

from shoal.errors import ShoalError
from shoal.mpi.launch import Job
from shoal.wait import modes
from shoal.wait.library import library_for
from tests.wait.helpers import waittest

GOOD = {
    "busy": ("busy", ()), "yield": ("yield", ()), "sleep:100": ("sleep", (100.0,)),
    "sleep:0.5": ("sleep", (0.5,)), "sleep:0": ("sleep", (0.0,)), "linear": ("linear", (1, 1000, 1)),
    "linear:0,5000,10": ("linear", (0, 5000, 10)), "backoff": ("backoff", (50.0, 10000.0)),
    "backoff:0,2000": ("backoff", (0.0, 2000.0)), "auto": ("auto", (0.05,)),
    "auto:0.2": ("auto", (0.2,)),
}
BAD = ["spin", "sleep", "sleep:", "sleep:-1", "sleep:abc", "sleep:0x10", "sleep: 5", "sleep:inf",
       "linear:1,2",
       "linear:5,1,1", "linear:1,10,0", "linear:1,2,x", "backoff:1", "backoff:1,0", "backoff:50,-10",
       "backoff:-1,100", "backoff:50,10000x",
       "auto:1.5", "auto:0", "busy:3", "yield:1", "BUSY", ""]


@pytest.mark.parametrize("text", sorted(GOOD))
def test_good_modes_parse(text):
    mode = modes.parse_mode(text)
    assert (mode.name, mode.params) == GOOD[text]
    assert mode.text == text


@pytest.mark.parametrize("text", BAD)
def test_bad_modes_are_one_line_errors(text):
    with pytest.raises(ShoalError) as err:
        modes.parse_mode(text)
    message = str(err.value)
    assert "\n" not in message
    assert (text.partition(':')[0] in message) if text else "empty" in message
    assert "use" in message or "e.g." in message or "no parameters" in message or "needs" in message


@pytest.mark.parametrize("text", ["p2p", "p2p,coll", "send,p2p,coll", "none"])
def test_classes_accepted(text):
    assert modes.parse_classes(text) == text


@pytest.mark.parametrize("text", ["p2p,io", "all", "none,p2p", ""])
def test_classes_rejected(text):
    with pytest.raises(ShoalError):
        modes.parse_classes(text)


@pytest.mark.parametrize("bad", ["spin", "sleep:-3", "sleep:0x10", "linear:9,1,1", "auto:2",
                                 "backoff:50,-10", "backoff:50,10000x", "event:0", "event:1,2"])
def test_library_refuses_bad_mode_at_init(mpich, bad):
    """Started without shoal's checks, the library itself stops at MPI_Init."""
    job = Job(mpich, 2, [str(waittest(mpich)), "result"],
              rank_env={"LD_PRELOAD": str(library_for(mpich)), "SHOAL_WAIT": bad})
    argv, _ = job.command()
    proc = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("shoalwait:")]
    assert len(lines) == 1, proc.stderr
    assert f"SHOAL_WAIT={bad}" in lines[0]
    assert '"result"' not in proc.stdout   # never silently run in another mode


@pytest.mark.parametrize("variable, value, message", [
    ("SHOAL_WAIT_CLASSES", "p2p,disk", "unknown class 'disk'"),
    ("SHOAL_WAIT_WAKE", "bell", "SHOAL_WAIT_WAKE=bell: use socket"),
    ("SHOAL_WAIT_ALLTOALL", "ring", "SHOAL_WAIT_ALLTOALL=ring: use auto"),
])
def test_library_refuses_a_bad_setting(openmpi, variable, value, message):
    job = Job(openmpi, 2, [str(waittest(openmpi)), "result"],
              rank_env={"LD_PRELOAD": str(library_for(openmpi)), "SHOAL_WAIT": "backoff",
                        variable: value})
    argv, _ = job.command()
    proc = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert '"result"' not in proc.stdout
