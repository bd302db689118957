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
    assert findings["network namespaces"]["ok"] is True  # CI runs as root


def test_doctor_says_why_sensors_are_missing_and_names_the_fallback(kernel):
    findings = {f["area"]: f for f in _doctor()}
    assert findings["power: rapl"]["ok"] is False
    assert "powercap" in findings["power: rapl"]["fix"]
    assert "modelled" in findings["power: fallback"]["found"]
