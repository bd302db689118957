"""Algorithm 1's loop on stand-in boards: real processes as the power-switched board, their output as
the serial line. A board that never signals is cut off and recorded as failed, and the next cycle runs;
a board that prints the virtual board's transcript yields the seed's phases from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shoal.errors import ShoalError
from shoal.pallex import boot, testbed, vmimage

# The serial line of one ALLU boot of the virtual board (TCG, load average about 60), as the testbed reads it
TRANSCRIPT = Path(__file__).with_name("data") / "vm_serial_ALLU.txt"


def _board_printing(path: Path, after_s: float = 0.0) -> list[str]:
    """A process that prints a saved serial transcript (after a pause), then stays powered."""
    code = (f"import sys,time; time.sleep({after_s}); sys.stdout.write(open({str(path)!r}).read()); "
            "sys.stdout.flush(); time.sleep(60)")
    return [sys.executable, "-c", code]


def test_a_silent_board_times_out_is_cut_off_and_the_next_cycle_runs(tmp_path):
    # Powered on for an hour unless the testbed cuts it: the test ends only if the cut works.
    silent = [sys.executable, "-c", "import time; print('booting', flush=True); time.sleep(3600)"]
    disks = {"EU": Path("silent"), "ALLU": Path("talks")}
    rows = []
    testbed.run_cycles(["EU", "ALLU"], 1, disks,
                       lambda d, mode: silent if d.name == "silent" else _board_printing(TRANSCRIPT),
                       {"EU": "rc-local.service", "ALLU": "bluetooth.service"}, boot.load("rpi3"),
                       timeout_s=3.0, on_row=rows.append, log_dir=tmp_path)
    assert [r["ok"] for r in rows] == [False, True]
    assert rows[0]["reason"] == "no completion signal within 3 s"
    assert "booting" in (tmp_path / "serial-EU-0.log").read_text()
    assert rows[1]["end_unit"] == "rc-local.service" and "no Bluetooth adapter" in rows[1]["note"]


def test_phases_follow_the_seeds_end_of_userspace_rule():
    text = TRANSCRIPT.read_text()
    report = testbed.sections(text)
    assert {"time", "blame", "critical-chain", "manager", "units"} <= set(report)
    signal = next(line for line in text.splitlines() if line.startswith("SHOAL-SIGNAL rc-local"))
    uptime = float(signal.split()[-1])
    manager = testbed.properties(report["manager"])[0]
    units = {b["Id"]: b for b in testbed.properties(report["units"])}
    p = testbed.phases(report, uptime + 1.5, uptime, "bluetooth.service")
    assert p["T_btl_s"] == 1.5
    assert p["T_knl_s"] == int(manager["UserspaceTimestampMonotonic"]) / 1e6
    assert abs(p["T_knl_s"] - p["analyze"]["kernel"]) < 1e-3  # systemd-analyze rounds to ms
    # ALLU ends at bluetooth.service, which the virtual board never activates: rc.local's own stamp ends it
    assert units["bluetooth.service"]["ActiveState"] == "inactive"
    assert p["end_unit"] == "rc-local.service" and "no Bluetooth adapter" in p["note"]
    assert p["T_usi_s"] == uptime - p["T_knl_s"] and 0 < p["T_usi_s"] < p["analyze"]["userspace"]
    # rc.local's unit became active just after it wrote the signal
    assert 0 <= int(units["rc-local.service"]["ActiveEnterTimestampMonotonic"]) / 1e6 - uptime < 1
    blame = report["blame"].splitlines()
    assert blame[0].split()[1] == "ifupdown-pre.service" and len(blame) > 20
    e = testbed.modelled_energy(boot.load("rpi3"), "EU", p["T_btl_knl_s"], p["T_usi_s"])
    assert e["energy_kind"] == "modelled" and e["E_J"] == e["E_btl_knl_J"] + e["E_usi_J"]


def _board_shutting_down(path: Path, mode: str, off_after_s: float | None) -> list[str]:
    """A board that prints a saved boot, announces its own shutdown as the layer's shoal-shutdown does,
    and exits (QEMU powered off) after ``off_after_s``, or never (None)."""
    code = (f"import sys,time; sys.stdout.write(open({str(path)!r}).read()); "
            f"print('SHOAL-SIGNAL shutdown {mode} 70.5', flush=True); "
            f"time.sleep({off_after_s if off_after_s is not None else 3600})")
    return [sys.executable, "-c", code]


def test_a_shutdown_is_timed_from_the_boards_line_to_its_power_off(tmp_path):
    rpi3 = boot.load("rpi3")
    rows = []
    disks = {"EU": Path("EU"), "ALLU": Path("ALLU")}
    testbed.run_cycles(["EU", "ALLU"], 1, disks,
                       lambda d, mode: _board_shutting_down(TRANSCRIPT, mode, 0.2 if d.name == "EU" else 0.4),
                       {"EU": "rc-local.service", "ALLU": "bluetooth.service"}, rpi3, timeout_s=30.0,
                       on_row=rows.append, log_dir=tmp_path, shutdowns=("forced",))
    eu, allu = rows
    assert eu["ok"] and eu["shutdown"] == "forced" and eu["shutdown_ok"] is True
    assert 0 < eu["T_sdn_s"] < eu["power_off_s"]
    w_eu = rpi3.userspace["EU"].energy_J / rpi3.userspace["EU"].duration_s
    assert eu["E_sdn_J"] == w_eu * eu["T_sdn_s"]
    assert allu["shutdown_ok"] is True and allu["T_sdn_s"] > 0 and allu["config"] == "ALLU"
    assert (tmp_path / "serial-EU-forced-0.log").exists()


def test_a_board_still_on_after_its_shutdown_is_cut_and_its_boot_kept(tmp_path):
    spec = testbed.CycleSpec("ALLU", 0, 30.0, shutdown="graceful", shutdown_timeout_s=1.0)
    row = testbed.one_cycle(_board_shutting_down(TRANSCRIPT, "graceful", None), spec, "bluetooth.service",
                            boot.load("rpi3"))
    assert row["ok"] and row["T_usi_s"] > 0                      # the boot's phases stay measured
    assert row["shutdown_ok"] is False and "still on 1 s after 'systemctl poweroff' (graceful)" in row["shutdown_reason"]
    assert "T_sdn_s" not in row


def test_shutdown_modes_against_graceful_and_eu_against_allu():
    rows = []
    for config, scale in (("EU", 1.0), ("ALLU", 2.5)):
        for mode, t in (("graceful", 2.0), ("forced", 0.8), ("forced-forced", 0.05), ("graceful", 3.0)):
            rows.append({"config": config, "shutdown": mode, "ok": True, "shutdown_ok": True,
                         "T_sdn_s": t * scale, "E_sdn_J": 1.9 * t * scale})
    rows.append({"config": "EU", "shutdown": "forced", "ok": True, "shutdown_ok": False, "shutdown_reason": "x"})
    out = testbed.shutdowns(rows, boot.load("rpi3"))
    eu = out["configs"]["EU"]
    assert eu["ordered"] and eu["modes"]["graceful"]["T_sdn_s_median"] == 2.5
    assert eu["modes"]["forced"]["cycles"] == 1 and eu["modes"]["forced"]["against_graceful"] == 0.8 / 2.5
    assert out["eu_graceful_E_reduction"] == 1 - 1 / 2.5 and out["seed_eu_graceful_E_reduction"] == 0.439
    assert (out["seed_forced_forced_bound_s"], out["seed_forced_forced_bound_J"]) == (0.2, 0.7)
    rows[2]["T_sdn_s"] = 9.0                                    # EU forced-forced now the longest: not ordered
    assert not testbed.shutdowns(rows, boot.load("rpi3"))["configs"]["EU"]["ordered"]
    s = {(r["config"], r["shutdown"]): r for r in testbed.summary(rows)}
    assert (s[("EU", "forced")]["failed"], s[("EU", "forced")]["shutdown_failed"]) == (0, 1)
    assert s[("ALLU", "graceful")]["T_sdn_s_median"] == 2.5 * 2.5


def test_the_layers_shutdown_hook_runs_the_mode_the_command_line_asks_for(tmp_path):
    """The hook as the board runs it, with /proc/cmdline a file and systemctl one that prints its arguments."""
    from shoal.pallex import vmlayer

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho systemctl \"$@\"\n")
    (bin_dir / "systemctl").chmod(0o755)
    expected = {"graceful": "systemctl poweroff", "forced": "systemctl poweroff --force",
                "forced-forced": "systemctl poweroff --force --force", None: ""}
    for mode, said in expected.items():
        cmdline = tmp_path / "cmdline"
        cmdline.write_text(vmlayer.cmdline(mode) + "\n")
        hook = tmp_path / "hook"
        hook.write_text(vmlayer.SHUTDOWN.replace("/proc/cmdline", str(cmdline)))
        done = subprocess.run(["sh", str(hook)], capture_output=True, text=True, timeout=30,
                              env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
        lines = done.stdout.splitlines()
        assert done.returncode == 0 and done.stderr == ""
        if mode is None:
            assert lines == []
        else:
            assert lines[0].startswith(f"SHOAL-SIGNAL shutdown {mode} ") and float(lines[0].split()[-1]) > 0
            assert lines[1] == said
    assert vmlayer.RC_LOCAL.splitlines()[:3] == vmimage.RC_LOCAL.splitlines()[:3]   # the same signal, first


def test_a_guest_clock_that_ran_ahead_leaves_the_split_unknown_and_the_sum_and_t_usi_kept():
    text = TRANSCRIPT.read_text()
    report = testbed.sections(text)
    uptime = float(next(ln for ln in text.splitlines() if ln.startswith("SHOAL-SIGNAL rc-local")).split()[-1])
    normal = testbed.phases(report, uptime + 1.5, uptime, "rc-local.service")
    ahead = testbed.phases(report, uptime - 100.0, uptime, "rc-local.service")   # the guest's clock jumped 100 s
    assert ahead["T_btl_s"] is None and ahead["T_knl_s"] is None and "100.0 s ahead" in ahead["note"]
    assert ahead["T_usi_s"] == normal["T_usi_s"] and ahead["T_btl_knl_s"] == normal["T_btl_knl_s"] - 101.5


def test_summary_and_the_eu_against_allu_reduction():
    rows = [{"config": c, "ok": True, "T_btl_knl_s": 5.0, "T_usi_s": t, "signal_s": 5 + t, "E_usi_J": 2 * t,
             "E_J": 10 + 2 * t} for c, t in (("EU", 4.0), ("ALLU", 8.0), ("EU", 6.0), ("ALLU", 10.0))]
    rows.append({"config": "EU", "ok": False, "reason": "no completion signal within 3 s"})
    s = {r["config"]: r for r in testbed.summary(rows)}
    assert s["EU"]["cycles"] == 3 and s["EU"]["failed"] == 1 and s["EU"]["T_usi_s_median"] == 5.0
    red = testbed.reduction(rows)
    assert red["T_usi_reduction"] == 1 - 5.0 / 9.0 and red["E_usi_reduction"] == 1 - 10.0 / 18.0


def test_no_image_is_one_line_and_says_how_to_build_it(tmp_path, monkeypatch, capsys):
    from shoal import cli

    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "cache"))
    for argv in (["vm", "boot"], ["cycle", "--cycles", "1"], ["config", "diff", "EU", "--vm"],
                 ["lab", "--vm", "--rounds", "1", "--out", str(tmp_path / "lab")]):
        assert cli.main(["pallex", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "build it first: shoal pallex vm build" in err, err
    assert not (tmp_path / "lab").exists()   # lab --vm asks for the image before its host rounds


def test_the_board_layer_is_made_again_when_its_configuration_disk_is_newer(tmp_path, monkeypatch):
    """A configuration undone and applied again is a new disk: the cached layer over the old one goes."""
    import os

    from shoal.pallex import vmconfig, vmlayer

    made, settled = [], []
    monkeypatch.setattr(vmconfig, "overlay", lambda base, out: out.write_bytes(b"layer over " + bytes(base)))
    monkeypatch.setattr(vmconfig, "run_offline", lambda img, spec, disk, script, what: made.append(disk.name))
    monkeypatch.setattr(vmlayer, "settle", lambda img, spec, disk, config: settled.append((disk.name, config)))
    img = vmimage.Image(tmp_path, tmp_path / "root.img", tmp_path / "vmlinuz", tmp_path / "initrd.img",
                        tmp_path / "units.txt")
    base = img.configured("EU")
    base.parent.mkdir(parents=True)
    base.write_bytes(b"EU")
    stale = base.parent / "EU-layer-0123456789.qcow2"       # made with earlier testbed files
    stale.write_bytes(b"old layer")
    other = base.parent / "ALLU-layer-0123456789.qcow2"     # another configuration's: kept
    other.write_bytes(b"old layer")
    first = vmlayer.disk_for(img, base, "EU", None)
    assert not stale.exists() and other.exists()
    assert vmlayer.disk_for(img, base, "EU", None) == first and len(made) == 1    # cached
    assert settled == [(made[0], "EU")]     # the layer booted once, as it was being made
    later = first.stat().st_mtime_ns + 10**9
    os.utime(base, ns=(later, later))                                           # EU applied again
    assert vmlayer.disk_for(img, base, "EU", None) == first and len(made) == 2


def test_a_layer_is_settled_by_one_whole_boot_that_keeps_its_writes_and_powers_off(tmp_path, monkeypatch):
    """The board's first boot, its writes kept (dphys-swapfile's swap file: seed 004's cycles ran on
    one card), ends in the graceful shutdown the layer's hook runs; a board that stays on is cut
    after SETTLE_TIMEOUT_S, the half-made layer removed, and one line says so."""
    from shoal.pallex import vmboard, vmlayer

    asked = []

    def board(program):
        def argv(img, spec, disk=None, snapshot=True, cmdline=vmboard.CMDLINE, **kw):
            asked.append((spec, snapshot, cmdline))
            return [sys.executable, "-c", program]
        return argv

    img = vmimage.Image(tmp_path, tmp_path / "root.img", tmp_path / "vmlinuz", tmp_path / "initrd.img",
                        tmp_path / "units.txt")
    spec = vmboard.BoardSpec(4, 2 ** 30, 25e6, write_Bps=10e6)
    disk = tmp_path / "layer.qcow2"
    disk.write_bytes(b"layer")
    monkeypatch.setattr(vmboard, "argv", board("print('shoal: shutdown graceful 21.5', flush=True)"))
    vmlayer.settle(img, spec, disk, "ALLU")
    ((used, snapshot, cmdline),) = asked
    assert snapshot is False and cmdline.endswith(" shoal.shutdown=graceful")  # writes kept, then off
    assert (used.read_Bps, used.write_Bps, used.cores) == (None, None, 4)       # the state, not the card's speed
    assert disk.exists()
    monkeypatch.setattr(vmboard, "argv", board("import time; print('booting', flush=True); time.sleep(3600)"))
    monkeypatch.setattr(vmlayer, "SETTLE_TIMEOUT_S", 1.0)
    with pytest.raises(ShoalError, match=r"^the first boot of EU's board layer did not power off within 1 s "
                                         r"\(last on the serial line: booting\); the layer is not kept$"):
        vmlayer.settle(img, spec, disk, "EU")
    assert not disk.exists()


# The serial line of one EU boot with the board layer's monitor (TCG, board speed free, load average about 8)
MONITORED = Path(__file__).with_name("data") / "vm_serial_EU_monitor.txt"


def test_the_boot_monitor_samples_proc_until_stopped_and_says_what_it_cost(tmp_path):
    """The monitor as the board runs it (bash, its files redirected here), on this machine's /proc."""
    import time

    from shoal.pallex import bootmonitor, vmlayer

    out, stop = tmp_path / "monitor", tmp_path / "monitor.stop"
    script = tmp_path / "shoal-monitor"
    script.write_text(vmlayer.MONITOR.replace(vmlayer.MONITOR_STOP, str(stop)).replace(vmlayer.MONITOR_OUT, str(out)))
    monitor = subprocess.Popen(["bash", str(script)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(bootmonitor.samples(out.read_text() if out.exists() else "")) < 4:
            assert time.monotonic() < deadline and monitor.poll() is None, "no samples"
            time.sleep(0.05)
        stop.touch()
        assert monitor.wait(timeout=30) == 0 and monitor.stderr.read() == ""
    finally:
        monitor.kill()
    text = out.read_text()
    assert text.splitlines()[-1].startswith("self ")
    got = bootmonitor.samples(text)
    rows = bootmonitor.intervals(text, userspace_s=got[0][0])
    assert len(rows) == len(got) - 1 and all(r["dt_s"] > 0 for r in rows)
    assert all(0.0 <= r["cpu_busy"] <= 1.0 and r["mem_used_B"] > 0 and r["read_B_per_s"] >= 0 for r in rows)
    assert [r["t_s"] for r in rows] == sorted(r["t_s"] for r in rows)
    cost = bootmonitor.own_cost(text)
    assert cost["board_cpus"] == os.cpu_count()   # /proc/stat's cpuN lines
    assert cost["monitor_cpu_s"] >= 0 and 0 <= cost["monitor_cpu_share"] < 1


def test_a_monitored_boot_gives_its_resource_use_over_userspace_initialisation():
    from shoal.pallex import bootmonitor

    text = MONITORED.read_text()
    report = testbed.sections(text)
    start = testbed.userspace_start_s(report)
    rows = bootmonitor.intervals(report["monitor"], start)
    assert len(rows) > 100 and rows[0]["t_s"] > 0   # from the root's systemd on, after the initrd's
    uptime = float(text.splitlines()[0].split()[-1])
    t_usi = testbed.phases(report, uptime + 1.0, uptime, "rc-local.service")["T_usi_s"]
    usi = bootmonitor.over_userspace(rows, t_usi)
    within = [r for r in rows if r["t_s"] <= t_usi]
    assert usi["usi_mem_peak_B"] == max(r["mem_used_B"] for r in within)
    assert usi["usi_read_B"] == pytest.approx(sum(r["read_B_per_s"] * r["dt_s"] for r in within))
    assert 0 < usi["usi_cpu_busy"] <= 1 and usi["monitor_samples"] == len(rows)
    cost = bootmonitor.own_cost(report["monitor"])
    assert cost["board_cpus"] == 4   # the rpi3 board's cores
    assert cost["monitor_cpu_s"] == pytest.approx((86 + 99 + 14 + 6) / 100)   # its line: self 86 99 14 6 939 29.61 4
    assert cost["monitor_cpu_share"] == pytest.approx(2.05 / ((29.61 - 9.39) * 4))
    # A cut-off report: no samples, no figures, nothing made up.
    assert bootmonitor.over_userspace([], t_usi)["usi_cpu_busy"] is None
    assert bootmonitor.own_cost("")["monitor_cpu_s"] is None


def test_the_board_layer_enables_its_monitor_and_reports_it_before_its_last_line():
    from shoal.pallex import vmlayer

    script = vmlayer.script().decode()
    assert f"ln -sfn /etc/systemd/system/shoal-monitor.service {vmlayer.MONITOR_WANTED}" in script
    assert "chmod 644 /etc/systemd/system/shoal-monitor.service" in script   # a unit file is not executable
    assert "DefaultDependencies=no" in vmlayer.MONITOR_UNIT and "Before=sysinit.target" in vmlayer.MONITOR_UNIT
    lines = vmlayer.REPORT.splitlines()
    assert lines[-1] == f'echo "{vmimage.SIGNAL} report-done"' and lines[-2] == f"section monitor cat {vmlayer.MONITOR_OUT}"


def test_an_apply_cut_short_leaves_no_disk_a_cycle_would_take_for_the_configuration(tmp_path, monkeypatch):
    from shoal.pallex import unitconfig, vmboard, vmconfig

    def cut(img, spec, disk, script, what):
        assert disk.exists() and disk != img.configured("EU")   # applied under another name
        raise KeyboardInterrupt

    monkeypatch.setattr(vmconfig, "overlay", lambda base, out: out.write_bytes(b"overlay"))
    monkeypatch.setattr(vmconfig, "plan", lambda img, catalog, config: unitconfig.Plan("EU", [], []))
    monkeypatch.setattr(vmconfig, "run_offline", cut)
    img = vmimage.Image(tmp_path, tmp_path / "root.img", tmp_path / "vmlinuz", tmp_path / "initrd.img",
                        tmp_path / "units.txt")
    (tmp_path / "configs").mkdir()
    with pytest.raises(KeyboardInterrupt):
        vmconfig.apply(img, None, "EU", None)
    assert not img.configured("EU").exists() and not vmconfig.record_path(img, "EU").exists()
    monkeypatch.setattr(vmconfig, "run_offline", lambda img, spec, disk, script, what: {})
    spec = vmboard.BoardSpec(1, 2 ** 29)
    assert vmconfig.apply(img, None, "EU", spec)["config"] == "EU" and img.configured("EU").exists()
