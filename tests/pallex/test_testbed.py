"""Algorithm 1's loop on stand-in boards: real processes as the power-switched board, their output as
the serial line. A board that never signals is cut off and recorded as failed, and the next cycle runs;
a board that prints the virtual board's transcript yields the seed's phases from it."""

from __future__ import annotations

import sys
from pathlib import Path

from shoal.pallex import boot, testbed

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
                       lambda d: silent if d.name == "silent" else _board_printing(TRANSCRIPT),
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
    for argv in (["vm", "boot"], ["cycle", "--cycles", "1"], ["config", "diff", "EU", "--vm"]):
        assert cli.main(["pallex", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "build it first: shoal pallex vm build" in err, err
