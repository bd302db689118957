"""`shoal doctor` reports the power sources of the (fake) kernel it runs on."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _doctor() -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "shoal", "doctor", "--json"], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_doctor_lists_rapl_zones_found(kernel):
    kernel.rapl_zone("intel-rapl:0", "package-0", 1_000_000)
    kernel.rapl_zone("intel-rapl:0:0", "dram", 2_000)
    findings = {f["area"]: f for f in _doctor()}
    assert findings["power: rapl"]["ok"] is True
    assert "package-0" in findings["power: rapl"]["found"]
    assert findings["MPI in use"]["ok"] is True
    assert findings["network namespaces"]["ok"] is True  # as root, or in a user namespace


def test_doctor_says_why_sensors_are_missing_and_names_the_fallback(kernel):
    findings = {f["area"]: f for f in _doctor()}
    assert findings["power: rapl"]["ok"] is False
    assert "powercap" in findings["power: rapl"]["fix"]
    assert "modelled" in findings["power: fallback"]["found"]


def test_doctor_prints_a_checklist_that_fits_80_columns(kernel, monkeypatch, capsys):
    from shoal import doctor
    from shoal.cli import main

    findings = _doctor()
    # The checklist of these very findings: a second look at the host may find other things
    # (another test suite's MPI files came between two runs of doctor once).
    monkeypatch.setattr(doctor, "run_all", lambda selected_mpi, fix=False: [
        doctor.Finding(**f) for f in findings])
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["doctor"]) == 0
    stdout = capsys.readouterr().out
    lines = stdout.splitlines()
    assert max(map(len, lines)) <= 80
    def flat(text: str) -> str:   # wrapped (or folded) lines joined again
        return "".join(text.split())

    for f in findings:
        mark = "ok" if f["ok"] else "!!"
        assert any(line.startswith(f"{mark} {f['area']} ") for line in lines), f["area"]
        assert flat(f["found"]) in flat(stdout)
        if f["fix"]:
            assert flat("→ " + f["fix"]) in flat(stdout)
