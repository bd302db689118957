"""`shoal power` and `shoal power sources` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from shoal.power import COLUMNS

SHOAL = str(Path(sys.executable).with_name("shoal"))


@pytest.fixture
def env(kernel, tmp_path):
    kernel.proc_stat(user=100, idle=900)
    return {**os.environ, "SHOAL_SYSFS_ROOT": str(kernel.sys), "SHOAL_PROC_ROOT": str(kernel.proc),
            "SHOAL_RUNS": str(tmp_path / "runs"), "COLUMNS": "200"}


def shoal(env, *args):
    return subprocess.run([SHOAL, *args], capture_output=True, text=True, env=env, timeout=60)


def test_power_true_without_sensors_models_and_says_so(env, tmp_path):
    out = shoal(env, "power", "--out", str(tmp_path / "run"), "--", "true")
    assert out.returncode == 0, out.stderr
    assert "no RAPL" in out.stderr and "falling back to the MODEL" in out.stderr
    assert "modelled" in out.stderr and "exit code 0" in out.stderr
    table = pd.read_csv(tmp_path / "run" / "power.csv")
    assert list(table.columns) == COLUMNS
    assert set(table["kind"]) == {"modelled"} and len(table) >= 2
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["exit_code"] == 0
    assert manifest["measured_command"] == ["true"]
    assert manifest["energy"][0]["kind"] == "modelled"


def test_exit_code_and_json(env):
    out = shoal(env, "power", "--json", "--source", "model:2,4", "--", "sh", "-c", "echo hi; exit 3")
    assert out.returncode == 3
    lines = out.stdout.splitlines()
    assert lines[0] == "hi"
    summary = json.loads(lines[-1])
    assert summary["exit_code"] == 3 and summary["command"] == ["sh", "-c", "echo hi; exit 3"]
    (source,) = summary["sources"]
    assert source["kind"] == "modelled" and source["coverage"] == pytest.approx(1.0)
    # the fake /proc/stat never changes: the model sees an idle machine
    assert source["mean_power_W"] == pytest.approx(2.0)
    assert out.stderr == ""


def test_known_rapl_power_through_the_cli(kernel, env, live_counter):
    zone = kernel.rapl_zone("intel-rapl:0", "package-0", 0, max_range_uj=262143328850,
                            max_power_uw=100_000_000)
    with live_counter(zone / "energy_uj", watts=15.0, modulus=262143328851):
        out = shoal(env, "power", "--json", "--source", "rapl", "--rate", "100", "--idle", "0.3",
                    "--", "sleep", "2")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.splitlines()[-1])
    (r,) = summary["sources"]
    assert r["kind"] == "measured" and r["domain"] == "package"
    # the fake counter is rewritten by a thread of this process: on a loaded machine its
    # value can lag by tens of ms at the window edges, hence 3% over a 2 s window
    assert r["energy_J"] == pytest.approx(15.0 * summary["duration_s"], rel=0.03)
    assert r["idle_W"] == pytest.approx(15.0, rel=0.1)
    assert abs(r["energy_above_idle_J"]) < 0.1 * r["energy_J"]


def test_sources_lists_what_is_missing_and_the_fallback(env):
    out = shoal(env, "power", "sources")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "no RAPL" in text and "no battery" in text and "auto uses the MODEL" in text


def test_sources_json_with_rapl(kernel, env):
    kernel.rapl_zone("intel-rapl:0", "package-0", 10)
    kernel.rapl_zone("intel-rapl:0:0", "core", 5)
    out = shoal(env, "power", "sources", "--json")
    data = json.loads(out.stdout)
    found = [(e["kind"], e["channel"]) for e in data["sources"] if e["status"] == "found"]
    assert found == [("rapl", "package-0"), ("rapl", "package-0/core")]
    assert data["auto"] == "auto uses rapl (measured)"


@pytest.mark.parametrize("args, message, code", [
    (["--source", "bogus", "--", "true"], "shoal: argument --source: unknown power source 'bogus'", 2),
    (["--source", "rapl,nonsense", "--", "true"], "shoal: argument --source: unknown power source 'nonsense'", 2),
    (["--source", "model:1", "--", "true"], "shoal: argument --source: model takes two numbers", 2),
    (["--rate", "5000", "--", "true"], "shoal: argument --rate: must be above 0 and at most 1000, got 5000", 2),
    (["--source", "rapl", "--", "true"], "shoal: power source rapl: no RAPL", 2),
    (["--", "no-such-command-here"], "shoal: cannot run 'no-such-command-here'", 127),
    ([], "shoal: no command to measure", 2),
])
def test_bad_input_is_one_line(env, args, message, code):
    out = shoal(env, "power", *args)
    assert out.returncode == code
    assert out.stderr.startswith(message) and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr


def test_registry_for_doctor(kernel, monkeypatch):
    from shoal.power import registry, sysfs
    from test_rapl import _deny

    kernel.proc_stat(user=1, idle=1)
    kernel.rapl_zone("intel-rapl:0", "package-0", 10)
    monkeypatch.setattr(sysfs, "opener", _deny(["energy_uj"]))
    entries = {e["name"]: e for e in registry.describe_sources()}
    assert not entries["rapl"]["available"] and "chmod" in entries["rapl"]["fix"]
    assert not entries["battery"]["available"] and entries["model"]["available"]
    assert entries["auto"]["detail"].startswith("auto uses the MODEL")
