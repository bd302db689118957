"""Faults on purpose, command by command: a full disk under --out, a power meter that dies
mid-sweep. After each: one clear line, no traceback, every finished row readable, and the
manifest saying what happened. Both run for every user: the full disk is a tmpfs mounted in
a user and mount namespace of the test's own."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pandas as pd
import pytest
from tests.power.test_httpmeter import Meter

BENCH = ["bench", "--tests", "imb.PingPong", "--sizes", "1..4M", "--budget", "0.2"]


# In a user and mount namespace of its own (unshare -Urm), any user may mount a small tmpfs;
# it is seen only inside, so the whole scenario runs there and copies each state out.
FULL_DISK = """
set -u
disk=$1; out=$2; shift 2
mount -t tmpfs -o size=20k tmpfs "$disk" || exit 90
"$@" --out "$disk/run" >"$out/stdout1" 2>"$out/stderr1"; echo $? >"$out/rc1"
cp -r "$disk/run" "$out/first"
# Room again. A remount cannot grow a tmpfs mounted in a user namespace (EINVAL): a bigger
# one goes over it, and the run is copied back to the same path.
mount -t tmpfs -o size=4m tmpfs "$disk" || exit 91
cp -r "$out/first" "$disk/run"
"$1" -m shoal bench --resume "$disk/run" >"$out/stdout2" 2>"$out/stderr2"; echo $? >"$out/rc2"
cp -r "$disk/run" "$out/final"
"""


def test_a_full_disk_fails_the_run_in_one_line_and_resume_finishes_it(tmp_path):
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    # At most 50 samples a point (about 2 KB of samples.csv): the first point always fits in
    # 20 KiB beside the manifest (about 5 KB with its stack), and all 23 never do (a point that
    # does not converge on a loaded host would otherwise fill the disk alone).
    scenario = subprocess.run(["unshare", "-Urm", "sh", "-c", FULL_DISK, "full-disk", str(disk), str(out),
                               sys.executable, "-m", "shoal", *BENCH, "--max-reps", "50"],
                              capture_output=True, text=True, timeout=900)
    assert scenario.returncode == 0, scenario.stderr
    run = disk / "run"   # the path shoal saw inside
    stderr = (out / "stderr1").read_text()
    assert (out / "rc1").read_text().strip() == "2", stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("shoal: cannot write") and "No space left on device" in last
    assert f"--resume {run}" in last
    first = out / "first"
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "No space left" in manifest["reason"]
    assert not (first / "manifest.json.tmp").exists()
    kept = pd.read_csv(first / "results.csv")   # no half row: every line parses
    assert 0 < len(kept) < 23
    # Room again: the resumed run measures only what is missing.
    assert (out / "rc2").read_text().strip() == "0", (out / "stderr2").read_text()
    final = pd.read_csv(out / "final" / "results.csv")
    assert len(final) == 23 and final["point_id"].is_unique
    assert list(final["time_median_s"][:len(kept)]) == list(kept["time_median_s"])
    samples = pd.read_csv(out / "final" / "samples.csv")
    assert set(samples["point_id"]) == set(final["point_id"])
    assert not samples.duplicated(["point_id", "rep"]).any()


def test_a_power_meter_that_dies_mid_sweep_is_said_and_its_gaps_flagged(tmp_path):
    meter = Meter(watts=7.5)
    out = tmp_path / "run"
    # --ci 0 never converges, so every point lasts its whole 0.3 s budget: the sweep cannot end
    # before the meter dies after its second point (points that converge take milliseconds).
    process = subprocess.Popen([sys.executable, "-m", "shoal", *BENCH, "--sizes", "1..64K", "--ci", "0",
                                "--budget", "0.3", "--power", f"http:{meter.url}#data.power_W",
                                "--out", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            # The file exists a moment before its header is written: empty is not yet.
            results = out / "results.csv"
            if results.exists() and results.stat().st_size and len(pd.read_csv(results)) >= 2:
                break
            time.sleep(0.05)
        meter.close()   # the frontend goes away mid-sweep
        stdout, stderr = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "warning: power:" in stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert any("refused" in f.lower() or "reset" in f.lower() for f in manifest["power_faults"])
    results = pd.read_csv(out / "results.csv")
    assert len(results) == 17
    # Points measured while it answered have whole energy at its 7.5 W; later ones are flagged.
    first = results.iloc[0]
    assert not first["energy_partial"]
    assert first["power_mean_W"] == pytest.approx(7.5)
    assert results["energy_partial"].iloc[-1]
