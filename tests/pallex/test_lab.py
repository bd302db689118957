"""`shoal pallex lab`, `run` and `profile` end to end."""

from __future__ import annotations

import json
import socket
import threading
import time

import pandas as pd
import pytest

from shoal.pallex import sdanalyze


def test_lab_quick_shows_pallex_ahead_and_stores_the_run(tmp_path, shoal):
    out = tmp_path / "lab"
    proc = shoal("pallex", "lab", "--profile", "rpi3", "--scenarios", "icc,icu1", "--quick", "--json",
                 "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert not result["problems"] and result["ordering"]["all_ahead"]
    rows = {r["scenario"]: r for r in result["summary"]}
    for r in rows.values():
        assert 0 < r["energy_gain"] < 1 and 0 < r["lifetime_gain"] < 1
        assert r["pallex_device_energy_J"] < r["baseline_device_energy_J"]
        assert r["pallex_lifetime_h_at_60"] > r["baseline_lifetime_h_at_60"]
    assert rows["icc"]["paper_lifetime_gain"] == pytest.approx(0.1389)
    cycles = pd.read_csv(out / "cycles.csv")
    assert set(cycles["mode"]) == {"baseline", "pallex"} and cycles["ok"].all()
    assert (out / "lifetime.png").stat().st_size > 10_000
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def _hanging_up_server():
    """A loopback port where something listens but hangs up at once (not HTTP): shoal starts no
    sink there, and an upload to it fails."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_run_cli_on_a_profile(tmp_path, shoal):
    with _hanging_up_server() as server:
        port = server.getsockname()[1]
        proc = shoal("pallex", "run", "icu1", "--profile", "rpi0w", "--time-scale", "0.1", "--power", "none",
                     "--param", f"upload_url=http://127.0.0.1:{port}/none", "--json", "--out", str(tmp_path / "r"))
    # The upload fails, the failure and the stage's own error are reported, nothing is left behind.
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["outcome"] == "failed" and out["stages"]["upl"]["status"] == "failed"
    assert out["upload_sinks"] == []
    assert out["stages"]["upl"]["reason"].startswith("exit status 1: ")
    assert out["stages"]["upl"]["reason"] != "exit status 1: "
    assert out["stages"]["upl"]["ready_s"] == pytest.approx(0.86)  # network-online.target at 8.6 s x 0.1
    stages = pd.read_csv(tmp_path / "r" / "stages.csv")
    assert list(stages["stage"]) == ["cap", "upl"]


TIME = "Startup finished in 3.112s (kernel) + 6.401s (userspace) = 9.513s\nmulti-user.target reached after 6.390s in userspace\n"
CHAIN = """The time when unit became active or started is printed after the "@" character.
multi-user.target @6.390s
└─rc-local.service @6.100s +280ms
  └─network-online.target @6.090s
    └─networking.service @2.600s +3.480s
      └─local-fs.target @900ms
"""
BLAME = "3.480s networking.service\n1min 2.5s slow.service\n  280ms rc-local.service\n"


def test_profile_from_saved_outputs_and_a_meter_log(tmp_path, shoal):
    (tmp_path / "time.txt").write_text(TIME)
    (tmp_path / "critical-chain.txt").write_text(CHAIN)
    (tmp_path / "blame.txt").write_text(BLAME)
    kstart = 1_800_000_000.0
    (tmp_path / "kernel-start.txt").write_text(f"{kstart}\n")
    # 0.5 W from power-on 3 s before the kernel, 0.7 W in the kernel, 2 W in userspace.
    rows = ["time,power_W"]
    t = -3.0
    while t <= 10.0:
        rows.append(f"{kstart + t:.3f},{0.5 if t < 0 else 0.7 if t < 3.112 else 2.0}")
        t += 0.001
    (tmp_path / "meter.csv").write_text("\n".join(rows) + "\n")
    table = sdanalyze.build(str(tmp_path), device="mypi", meter_log=str(tmp_path / "meter.csv"), bootloader_s=3.0)
    assert table["kernel_s"] == pytest.approx(3.112)
    assert table["userspace"]["EU"]["duration_s"] == pytest.approx(6.401)
    assert table["units"]["networking.service"] == pytest.approx(6.08)
    assert table["units"]["network-online.target"] == pytest.approx(6.09)
    assert table["blame"]["slow.service"] == pytest.approx(62.5)
    assert table["bootloader_kernel_J"] == pytest.approx(3.0 * 0.5 + 3.112 * 0.7, rel=2e-3)
    assert table["userspace"]["EU"]["energy_J"] == pytest.approx(6.401 * 2.0, rel=2e-3)
    out = tmp_path / "mypi.toml"
    proc = shoal("pallex", "profile", "--from", str(tmp_path), "--device", "mypi", "--meter-log",
                 str(tmp_path / "meter.csv"), "--bootloader-s", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    from shoal.pallex import boot

    loaded = boot.load(str(out))
    assert loaded.device == "mypi" and loaded.unit_ready_s("network-online.target") == pytest.approx(6.09)


def test_profile_live_without_systemd_says_what_to_do(shoal):
    proc = shoal("pallex", "profile")
    if proc.returncode == 0:  # booted with systemd: a real profile
        assert "[boot.device]" in proc.stdout
    else:
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
        assert "--from DIR" in proc.stderr


def test_a_cycle_as_a_library_call_keeps_its_run(tmp_path):
    """`pallex.run.run` without the command line: the scenario's stages run, the run directory
    holds each stage, the energy of the model and the outcome."""
    from shoal.pallex import run as pallex_run
    from shoal.runs.store import Run

    notes = []
    cycle = pallex_run.run(pallex_run.CycleRequest("ic", profile="rpi3", time_scale=0.1, power="model:1,2",
                                                   out=tmp_path / "r"),
                           ["shoal", "pallex", "run", "ic"], on_note=notes.append)
    assert cycle.ok and cycle.run == tmp_path / "r"
    run = Run.open(cycle.run)
    assert {r["stage"] for r in run.rows("stages")} == set(cycle.app.order)
    assert all(r["status"] == "ok" for r in run.rows("stages"))
    manifest = json.loads((cycle.run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["command"] == ["shoal", "pallex", "run", "ic"]
    (energy,) = cycle.energy
    assert energy["kind"] == "modelled" and energy["energy_J"] > 0
    assert json.loads(json.dumps(cycle.to_json()))["outcome"] == "done"
    with pytest.raises(Exception, match="time-scale"):
        pallex_run.run(pallex_run.CycleRequest("ic", time_scale=0), ["shoal"])
