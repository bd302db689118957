"""A Pallex application on the virtual board: the layer's files, the stage programs it copies (run
from that copy alone), the relay that takes the board's uploads to the lab's cloud server, and the
cycle read from a stand-in board's serial line."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from shoal.pallex import boot, stagefile, vmapp, vmlab, vmimage
from shoal.pallex.cloud import Cloud


def test_the_layer_carries_the_stage_programs_their_units_and_the_mode():
    icc = stagefile.resolve("icc")
    pallex, pallex_links = vmapp.files(icc, "pallex")
    baseline, baseline_links = vmapp.files(icc, "baseline")
    for name in ("capture", "knn_load", "knn_classify", "knn", "image"):
        assert f"{vmapp.SHOAL_DIR}/shoal/pallex/apps/{name}.py" in pallex
    assert f"{vmapp.SHOAL_DIR}/shoal/pallex/done.py" in pallex and f"{vmapp.SHOAL_DIR}/shoal/__init__.py" in pallex
    clas = pallex["/etc/systemd/system/pallex-icc-clas.service"]
    assert f"ExecStart={vmapp.PYTHON} -m shoal.pallex.apps.knn_classify" in clas
    assert f"--record {vmapp.SERIAL}" in pallex["/etc/systemd/system/pallex-icc-done.service"]
    assert "SuccessAction=poweroff-force" in pallex["/etc/systemd/system/pallex-icc-done.service"]
    for stage in ("cap", "load", "clas"):   # each stage's report goes to the serial line
        assert pallex[f"/etc/systemd/system/pallex-icc-{stage}.service.d/shoal-serial.conf"] == vmapp.STAGE_OUTPUT
    # Pallex: the target is wanted at boot; baseline: rc.local starts it once it has signalled
    wants = "/etc/systemd/system/multi-user.target.wants/pallex-icc.target"
    assert wants in pallex_links and wants not in baseline_links and "/etc/rc.local" not in pallex
    rc = baseline["/etc/rc.local"].splitlines()
    start = rc.index("systemctl start --no-block pallex-icc.target")
    assert "SHOAL-SIGNAL rc-local" in rc[start - 1] and "shoal-report" in rc[start + 1]
    assert not baseline_links   # the baseline's units are started by rc.local only
    assert vmapp.key(icc, "pallex") != vmapp.key(icc, "baseline")
    # a slower board's deadline (lab --vm-deadline) is its units' own
    later = dataclasses.replace(icc, deadline_s=240)
    assert "OnStartupSec=240s" in vmapp.files(later, "pallex")[0]["/etc/systemd/system/pallex-icc-deadline.timer"]
    assert vmapp.key(later, "pallex") != vmapp.key(icc, "pallex")
    # the upload scenarios boot EU with networking (the seed's NET1) and send to the forwarded address
    icu2 = stagefile.resolve("icu2")
    assert vmapp.config_for(icu2) == "NET1" and vmapp.config_for(icc) == "EU"
    assert f"--url {vmapp.CLOUD_URL}" in vmapp.files(icu2, "pallex")[0]["/etc/systemd/system/pallex-icu2-upl.service"]


def test_the_copied_stage_programs_import_from_the_copy_alone(tmp_path):
    """What the layer writes under /opt/shoal is enough: every scenario's programs import from it,
    and from nowhere else (a module it missed would not be found in the copied package)."""
    programs = set()
    for scenario in stagefile.SCENARIOS:
        written, _ = vmapp.files(stagefile.resolve(scenario), "pallex")
        for path, text in written.items():
            if path.startswith(vmapp.SHOAL_DIR + "/"):
                dest = tmp_path / path[len(vmapp.SHOAL_DIR) + 1:]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text)
        programs |= set(vmapp._program_modules(stagefile.resolve(scenario)))
    code = ("import importlib, json, sys, shoal; mods = [importlib.import_module(m) for m in sys.argv[1:]]; "
            "print(json.dumps([m.__file__ for m in [shoal, *mods]]))")
    out = subprocess.run([sys.executable, "-c", code, *sorted(programs)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    files = json.loads(out.stdout)
    assert len(files) == len(programs) + 1 and all(f.startswith(str(tmp_path)) for f in files)


def test_the_relay_carries_one_upload_to_the_cloud_server_and_its_answer_back():
    body = b"frame bytes " * 1000
    request = (f"PUT /images/frame-0.pgm HTTP/1.1\r\nHost: 10.0.2.100\r\nContent-Length: {len(body)}\r\n"
               "Connection: close\r\n\r\n").encode() + body
    with Cloud() as cloud:
        port = cloud.server.server_address[1]
        out = subprocess.run([sys.executable, "-m", "shoal.pallex.relay", str(port)], input=request,
                             capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split(b"\r\n")[0].split()[1] in (b"200", b"201")
        assert len(cloud.received) == 1 and cloud.received[0]["bytes"] == len(body)
    bad = subprocess.run([sys.executable, "-m", "shoal.pallex.relay", "port"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("usage:")


def _board(lines: list[tuple[float, str]], then_s: float = 0.0) -> list[str]:
    """A stand-in board: prints each line after its pause, then powers off (exits) after ``then_s``."""
    steps = "; ".join(f"time.sleep({pause}); print({text!r}, flush=True)" for pause, text in lines)
    return [sys.executable, "-c", f"import time; {steps}; time.sleep({then_s})"]


# A stage's PALLEX report as protocol.StageIO prints it (wall clock 1000 s ahead of the board's)
STAGE = {"stage": "clas", "ok": True, "process_start_s": 0.52, "m_start": 1.27, "m_end": 1.9,
         "t_inputs": 1001.6, "t_end": 1001.9}
DONE = {"app": "icc", "event": "done", "monotonic_s": 2.02, "reports": [{"ok": True, "stage": "clas"}], "t": 1.0}


def test_a_cycle_runs_from_userspace_to_the_done_record_and_the_boards_power_off(tmp_path):
    rpi3 = boot.load("rpi3")
    # the done record follows part of the report's line, as two programs share the serial line
    board = _board([(0.0, "[    0.5] kernel"), (0.2, f"{vmimage.INITRD_DONE} 0.02"),
                    (0.1, "blame: 1.2s bar.service PALLEX " + json.dumps(STAGE)),
                    (0.1, "blame: 1.2s foo.service" + json.dumps(DONE, sort_keys=True))], then_s=0.3)
    row = vmlab.one_cycle(board, "icc", "EU", "pallex", 0, 30.0, rpi3, log_dir=tmp_path)
    assert row["ok"], row["reason"]
    # the initrd's last line (the guest's uptime 0.02 s) came at least a Python start-up after power-on
    assert row["T_knl_s"] == 0.02 and abs(row["app_done_s"] - 2.0) < 1e-9 and row["stages_ok"] == 1
    assert row["T_btl_s"] > 0 and row["cycle_s"] > row["T_btl_knl_s"]
    assert abs(row["post_kernel_s"] - (row["cycle_s"] - row["T_btl_knl_s"])) < 1e-9
    assert row["E_J"] == row["E_btl_knl_J"] + row["E_post_kernel_J"] and row["energy_kind"] == "modelled"
    assert (tmp_path / "serial-icc-pallex-0.log").read_text().count(vmimage.INITRD_DONE) == 1
    stage, = row["stages"]   # since userspace began (0.02 s on the board's clock)
    assert stage["stage"] == "clas" and stage["ok"] and abs(stage["process_start_s"] - 0.5) < 1e-9
    assert abs(stage["startup_s"] - 0.75) < 1e-9 and abs(stage["inputs_s"] - 1.58) < 1e-9
    assert abs(stage["end_s"] - 1.88) < 1e-9 and abs(stage["work_start_s"] - 1.25) < 1e-9

    late = dict(DONE, event="deadline", reports=[])
    row = vmlab.one_cycle(_board([(0, f"{vmimage.INITRD_DONE} 1.6"), (0, json.dumps(late))]),
                          "icc", "EU", "baseline", 1, 30.0, rpi3)
    assert not row["ok"] and row["reason"] == "the deadline passed before every stage was done"
    assert row["post_kernel_s"] > 0   # its time and energy are still measured
    silent = vmlab.one_cycle(_board([(0, f"{vmimage.INITRD_DONE} 1.6")], then_s=60), "icc", "EU",
                             "pallex", 2, 1.5, rpi3)
    assert not silent["ok"] and silent["reason"] == "no done record within 1.5 s"
    sent = iter([0, 0])
    row = vmlab.one_cycle(_board([(0, f"{vmimage.INITRD_DONE} 1.6"), (0, json.dumps(DONE))]),
                          "icu1", "NET1", "pallex", 0, 30.0, rpi3, uploads=lambda: next(sent), expected_uploads=1)
    assert not row["ok"] and row["reason"] == "the cloud received 0 upload(s), 1 expected"


def test_gains_are_taken_cycle_by_cycle_and_set_beside_the_projection_and_the_seed():
    def row(mode, cycle, post, energy, ok=True):
        return {"scenario": "icc", "config": "EU", "mode": mode, "cycle": cycle, "ok": ok, "post_kernel_s": post,
                "E_post_kernel_J": energy, "E_J": energy + 2.0, "T_btl_knl_s": 3.0, "app_done_s": post - 0.5,
                "cycle_s": post + 3.0}
    rows = [row("baseline", 0, 20.0, 40.0), row("pallex", 0, 15.0, 30.0),
            row("baseline", 1, 22.0, 44.0), row("pallex", 1, 11.0, 22.0), row("pallex", 2, 9.0, 18.0, ok=False)]
    s, = vmlab.summary(rows)
    assert s["pairs"] == 2 and s["failed"] == 1 and s["cycles"] == 5
    assert s["vm_duration_gain_min"] == 0.25 and s["vm_duration_gain_max"] == 0.5
    assert s["vm_duration_gain"] == 0.375 and s["baseline_post_kernel_s"] == 21.0
    both, = vmlab.beside([s], [{"scenario": "icc", "duration_gain": 0.3, "energy_gain": 0.3, "lifetime_gain": 0.2,
                                "paper_duration_gain": 0.4, "paper_energy_gain": 0.4, "paper_lifetime_gain": 0.35}])
    assert both["projected_duration_gain"] == 0.3 and both["paper_lifetime_gain"] == 0.35
    assert vmlab.expected_uploads("icu3") == 3 and vmlab.expected_uploads("icc") == 0
