"""Stopping shoal stops the MPI job behind it: launcher, daemons and ranks."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from shoal import cluster, proc
from shoal.cluster import sysns
from shoal.mpi import build
from shoal.mpi.launch import Job
from tests.interrupts import as_foreground

DEADLINE_S = 1.0


def _alive(pid: int, start: int | None) -> bool:
    """Still the same process, and not a zombie (a zombie has exited; only its reaping is left)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[19]) == start


def _with_arg(marker: str) -> set[int]:
    found = set()
    for pid, _ in proc.process_table().items():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read().split(b"\0"):
                    found.add(pid)
        except OSError:
            continue
    return found


def _snapshot(pids: set[int]) -> dict[int, int | None]:
    return {pid: sysns.process_start_time(pid) for pid in pids}


def _survivors(job: dict[int, int | None], deadline: float) -> list[str]:
    """Poll until every process of the job is gone or the deadline passes; what is left."""
    while True:
        left = [pid for pid, start in job.items() if _alive(pid, start)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    out = []
    for pid in left:
        try:
            out.append(f"{pid} {open(f'/proc/{pid}/cmdline').read().replace(chr(0), ' ')[:120]}")
        except OSError:
            pass
    return out


def _wait_for(predicate, what: str, limit_s: float = 120):
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"{what} did not happen within {limit_s:.0f} s")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_shoal_run_leaves_no_process_of_the_open_mpi_job(openmpi, signum):
    program = build.build("waittests", openmpi)
    marker = f"{300 + random.random() * 100:.6f}"  # the ranks' argv: ours alone
    shoal = subprocess.Popen([sys.executable, "-m", "shoal", "run", "--mpi", "openmpi", "-n", "3",
                              "--wait", "backoff", "--", str(program), "idle", "--seconds", marker],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=as_foreground)
    try:
        ranks = _wait_for(lambda: len(_with_arg(marker) - {shoal.pid}) >= 4 and _with_arg(marker),
                          "three ranks and their launcher starting")
        job = _snapshot((proc.descendants(proc.process_table(), {shoal.pid}) | ranks) - {shoal.pid})
        assert len(job) >= 4
        shoal.send_signal(signum)
        left = _survivors(job, time.monotonic() + DEADLINE_S)
        assert left == [], f"still running {DEADLINE_S} s after {signum.name}: {left}"
        _, err = shoal.communicate(timeout=60)
    finally:
        if shoal.poll() is None:
            shoal.kill()
    assert shoal.returncode == 128 + signum
    assert err.splitlines()[-1] == "shoal: interrupted; the program was stopped"


@pytest.mark.skipif(os.geteuid() != 0, reason="an emulated cluster in the host's namespaces needs root; an ordinary user's lives in a PID namespace that the kernel empties with its holder, daemons included (tests/cluster/test_userns.py::test_sigkill_mid_run_leaves_nothing_behind, run by every user)")
def test_open_mpi_daemons_that_lost_their_parents_are_stopped_with_the_job(openmpi):
    """PRRTE's daemons on emulated devices daemonize into sessions of their own;
    once the processes that started them are gone, only the Open MPI module can
    tell they belong to the job (their namespace names the launcher's pid)."""
    program = build.build("waittests", openmpi)
    marker = f"{300 + random.random() * 100:.6f}"
    with cluster.open(emulate="2xnuc", calibrate=False) as where:
        process = where.job(openmpi, 2, [str(program), "idle", "--seconds", marker]).start(
            stdout=proc.DEVNULL, stderr=proc.DEVNULL)
        try:
            def ranks_outside():
                table = proc.process_table()
                session = {pid for pid in table if table[pid].session == process.pid}
                return {pid for pid in _with_arg(marker) if pid not in session}

            ranks = _wait_for(lambda: len(ranks_outside()) >= 2 and ranks_outside(),
                              "two ranks starting outside the launcher's session")
            table = proc.process_table()
            session = {pid for pid in table if table[pid].session == process.pid}
            # Each rank runs under a daemon of its own device; a daemon may already
            # hang off init when the process that started it has exited.
            daemons = {table[pid].ppid for pid in ranks}
            assert {_comm(pid) for pid in daemons} == {"prted"}
            outside = ranks | daemons
            assert openmpi.impl.strays(session, table) == outside
            # Freeze the daemons and ranks (so they cannot notice anything), then
            # remove everything that links them to the job: they hang off init.
            for pid in outside:
                os.kill(pid, signal.SIGSTOP)
            starters = {table[pid].ppid for pid in daemons} - outside - {1}
            for pid in {p for p in starters if process.pid in _ancestors(table, p)} | {process.pid}:
                os.kill(pid, signal.SIGKILL)
            _wait_for(lambda: all(process.pid not in _ancestors(proc.process_table(), pid)
                                  for pid in outside), "the daemons being orphaned")
            job = _snapshot(outside)
            process.stop()
            assert _survivors(job, time.monotonic() + DEADLINE_S) == []
        finally:
            process.stop()


def _comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as fh:
        return fh.read().strip()


def _ancestors(table: dict, pid: int) -> set[int]:
    seen = set()
    while pid in table and pid not in seen and pid > 1:
        seen.add(pid)
        pid = table[pid].ppid
    return seen
