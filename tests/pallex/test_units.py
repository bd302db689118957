"""Generated units: verify clean, install into a temporary root, dependency graph as designed."""

from __future__ import annotations

import configparser
import os
from pathlib import Path

import pytest

from shoal.pallex import stagefile, units


def _read(path: Path) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read_string(path.read_text())
    return cp


@pytest.mark.parametrize("scenario", stagefile.SCENARIOS)
def test_scenario_units_verify_with_zero_warnings(scenario, tmp_path):
    app = stagefile.resolve(scenario)
    paths = units.write(units.generate(app), tmp_path)
    verdict = units.verify(paths)
    assert verdict.returncode == 0 and verdict.warnings == [], verdict.warnings
    assert verdict.ok


def test_verify_catches_a_broken_unit(tmp_path):
    app = stagefile.resolve("icc")
    paths = units.write(units.generate(app), tmp_path)
    svc = tmp_path / "pallex-icc-clas.service"
    svc.write_text(svc.read_text().replace("Requires=", "Requires=no-such-unit.service ", 1)
                   if "Requires=" in svc.read_text() else svc.read_text().replace("[Unit]\n", "[Unit]\nRequires=no-such-unit.service\n"))
    verdict = units.verify(paths)
    assert not verdict.ok and any("no-such-unit" in w for w in verdict.warnings)


def test_install_into_root_and_read_back_graph(tmp_path):
    app = stagefile.resolve("icu3")
    out = tmp_path / "units"
    units.write(units.generate(app), out)
    root = tmp_path / "root"
    units.install(out, root, app)
    system = root / "etc" / "systemd" / "system"
    link = system / "multi-user.target.wants" / "pallex-icu3.target"
    assert link.is_symlink() and os.readlink(link).endswith("pallex-icu3.target")
    target = _read(system / "pallex-icu3.target")
    wants = set(target["Unit"]["Wants"].split())
    # Sources, every data socket, completion and deadline start with the target; the receiver does not.
    assert wants == {"pallex-icu3-cap.service", "pallex-icu3-cap-upl.socket", "pallex-icu3-done.socket",
                     "pallex-icu3-deadline.timer"}
    upl = _read(system / "pallex-icu3-upl.service")
    assert upl["Unit"]["DefaultDependencies"] == "no"
    assert upl["Unit"]["Requires"].split() == ["network-online.target"]
    after = upl["Unit"]["After"].split()
    assert "network-online.target" in after and "pallex-icu3-cap.service" not in after  # no wait on the sender
    assert upl["Service"]["Sockets"] == "pallex-icu3-cap-upl.socket"
    sock = _read(system / "pallex-icu3-cap-upl.socket")
    assert sock["Socket"]["Service"] == "pallex-icu3-upl.service"
    assert sock["Socket"]["FileDescriptorName"] == "cap"
    cap = _read(system / "pallex-icu3-cap.service")
    assert "PALLEX_OUTPUTS=upl=/run/pallex/icu3/cap-upl.sock" in cap["Service"]["Environment"]
    done = _read(system / "pallex-icu3-done.service")
    assert done["Unit"]["SuccessAction"] == "poweroff-force"
    assert "--expect 1" in done["Service"]["ExecStart"]


def test_ordering_need_without_data_is_requires_and_after(tmp_path):
    app = stagefile.parse({"app": {"name": "o", "on_success": "none", "on_failure": "none"}, "stages": {
        "a": {"command": ["/bin/true"]}, "b": {"command": ["/bin/true"], "needs": ["a"]}}})
    text = units.generate(app)["pallex-o-b.service"]
    assert "Requires=pallex-o-a.service" in text and "After=pallex-o-done.socket pallex-o-a.service" in text
    assert "SuccessAction" not in units.generate(app)["pallex-o-done.service"]


def test_units_cli_writes_verifies_and_installs(tmp_path, shoal):
    proc = shoal("pallex", "units", "icc", "--out", str(tmp_path / "u"), "--root", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "systemd-analyze verify: exit 0, 0 warning(s)" in proc.stdout
    assert (tmp_path / "r" / "etc/systemd/system/multi-user.target.wants/pallex-icc.target").is_symlink()
