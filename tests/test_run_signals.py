"""A signal ends every command's run as "interrupted", with the reason, every finished
row kept and nothing running: SIGTERM (systemd, Slurm, timeout), SIGHUP, and Ctrl-C twice."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.interrupts import as_foreground


def _wait_rows(table: Path, rows: int, limit_s: float = 180) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if table.exists() and len(list(csv.DictReader(table.open()))) >= rows:
            return
        time.sleep(0.05)
    pytest.fail(f"{table} did not reach {rows} rows within {limit_s:.0f} s")


def _stop(argv: list[str], out: Path, table: str, signals: list[int],
          before=lambda: None) -> tuple[subprocess.CompletedProcess, dict]:
    """Run a shoal command, send it ``signals`` once it wrote its first row (``before()``
    called just then), and return how it ended and its manifest."""
    process = subprocess.Popen([sys.executable, "-m", "shoal", *argv, "--out", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=as_foreground)
    _wait_rows(out / f"{table}.csv", 1)
    before()
    for signum in signals:
        process.send_signal(signum)
        time.sleep(0.05)
    stdout, stderr = process.communicate(timeout=120)
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    return done, json.loads((out / "manifest.json").read_text())


def _workers_left(marker: str) -> list[int]:
    """This test's processes (they inherit its PYTEST_CURRENT_TEST) whose command line
    holds ``marker``; tests running at the same time in other workers are not counted."""
    test = os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]
    left = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                mine = f"PYTEST_CURRENT_TEST={test} (".encode() in Path(f"/proc/{entry}/environ").read_bytes()
                if mine and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    left.append(int(entry))
            except OSError:
                pass
    return left


@pytest.mark.parametrize("signals, status_code, reason", [
    ([signal.SIGTERM], 128 + signal.SIGTERM, "stopped by SIGTERM"),
    ([signal.SIGINT, signal.SIGINT], 130, "stopped by SIGINT"),
], ids=["SIGTERM", "SIGINT-twice"])
def test_a_stopped_workload_run_ends_interrupted_with_its_rows(tmp_path, signals, status_code, reason):
    out = tmp_path / "run"
    done, manifest = _stop(["work", "ep", "--size", "M21", "-n", "1,2", "--reps", "50"], out, "results",
                           signals)
    assert done.returncode == status_code, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.strip().splitlines()[-1].startswith("shoal:")
    assert manifest["status"] == "interrupted" and manifest["reason"].startswith(reason)
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert rows and all(r["check"] == "off" and float(r["time_s"]) > 0 for r in rows)
    assert not _workers_left(str(out)) and not _workers_left("ep:M21")


@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
@pytest.mark.parametrize("signals", [[signal.SIGHUP], [signal.SIGTERM], [signal.SIGINT, signal.SIGINT]],
                         ids=["SIGHUP", "SIGTERM", "SIGINT-twice"])
def test_a_signal_ends_a_benchmark_sweep_interrupted_under_either_mpi(tmp_path, mpi, signals):
    out = tmp_path / "bench"
    shared: set[str] = set()

    def note_shared_memory() -> None:  # what the ranks hold in /dev/shm while they run
        # The first row may be written between two launches of the sweep: wait for ranks
        # that hold their shared memory (a loaded host starts the next ones late).
        deadline = time.monotonic() + 30
        while not shared and time.monotonic() < deadline:
            for pid in _workers_left("shoal-bench"):
                try:
                    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
                except OSError:
                    continue
                shared.update(line.split()[-1] for line in maps if " /dev/shm/" in line)
            time.sleep(0.01)

    # 14 points of 2 s each (a CI target no point reaches: on a quiet host the sweep converged
    # in about a second, before the ranks' shared memory was seen); it is stopped once its ranks
    # hold their shared memory, so its length costs nothing.
    done, manifest = _stop(["bench", "--mpi", mpi, "--tests", "imb.PingPong", "--sizes", "8..64K",
                            "--budget", "2", "--ci", "0.0001"], out, "results", signals,
                           before=note_shared_memory)
    code = 130 if signals[0] == signal.SIGINT else 128 + signals[0]
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert manifest["status"] == "interrupted"
    assert manifest["reason"].startswith(f"stopped by {signal.Signals(signals[0]).name}")
    assert len(list(csv.DictReader((out / "results.csv").open()))) >= 1
    # The whole MPI job is gone: launcher, daemons and ranks, and the shared memory its ranks
    # held (an MPI removes it only when its ranks end cleanly; it stayed in RAM for good).
    assert not _workers_left(str(out)) and not _workers_left("shoal-bench")
    assert shared and not [path for path in shared if os.path.exists(path)]


def test_doctor_fix_marks_a_run_whose_process_was_killed(tmp_path):
    """SIGKILL cannot be handled: the run stays "running" until doctor --fix sees its
    process gone; it then says so and marks it interrupted, every row kept."""
    env = {**os.environ, "SHOAL_STATE_DIR": str(tmp_path / "state")}
    out = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "shoal", "work", "ep", "--size", "M21", "-n", "1",
                                "--reps", "50", "--out", str(out)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_rows(out / "results.csv", 1)
    process.kill()
    process.wait()
    rows = len(list(csv.DictReader((out / "results.csv").open())))
    assert json.loads((out / "manifest.json").read_text())["status"] == "running"

    def doctor(*extra):
        done = subprocess.run([sys.executable, "-m", "shoal", "doctor", "--json", *extra], env=env,
                              capture_output=True, text=True, timeout=300)
        return {f["area"]: f for f in json.loads(done.stdout)}

    found = doctor()["runs"]
    assert not found["ok"] and str(out) in found["found"] and "--fix" in found["fix"]
    fixed = doctor("--fix")["runs"]
    assert fixed["ok"] and str(out) in fixed["found"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and "SIGKILL" in manifest["reason"]
    assert len(list(csv.DictReader((out / "results.csv").open()))) >= rows
    assert doctor()["runs"]["ok"]


def test_doctor_fix_leaves_a_live_run_alone(tmp_path):
    env = {**os.environ, "SHOAL_STATE_DIR": str(tmp_path / "state")}
    out = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "shoal", "work", "ep", "--size", "M21", "-n", "1",
                                "--reps", "50", "--out", str(out)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_rows(out / "results.csv", 1)
        done = subprocess.run([sys.executable, "-m", "shoal", "doctor", "--json", "--fix"], env=env,
                              capture_output=True, text=True, timeout=300)
        runs = {f["area"]: f for f in json.loads(done.stdout)}["runs"]
        assert runs["ok"] and str(out) not in runs["found"]
        assert json.loads((out / "manifest.json").read_text())["status"] == "running"
    finally:
        process.kill()
        process.wait()
