"""Seed 004's unit configurations applied to an offline systemd root with the real systemctl, and undone."""

from __future__ import annotations

import json

import pytest

from shoal import cli
from shoal.pallex import unitconfig
from tests.user.systemd_root import make_root, unit_state


@pytest.fixture
def root(tmp_path):
    return make_root(tmp_path / "root")


def test_the_catalogue_covers_appendix_a_and_every_configuration():
    catalog = unitconfig.load()
    assert list(catalog.configs) == ["EU", "EU+MMS", "NET1", "NET2", "NET3", "WiFi", "ALLU"]
    classes = {u.cls for u in catalog.units.values()}
    assert classes == set(unitconfig.CLASSES)
    # every unit Debian lacks says why; Appendix A-A's essential units are never acted on
    assert all(u.debian or u.missing for u in catalog.units.values())
    assert catalog.units["sshd.service"].debian == "ssh.service"


def test_eu_disables_every_optional_unit_and_masks_those_started_otherwise(root):
    catalog = unitconfig.load()
    plan = unitconfig.plan(catalog, "EU", unitconfig.unit_files(root))
    verbs = {(a.unit, a.verb) for a in plan.actions}
    assert ("ssh.service", "disable") in verbs and ("networking.service", "disable") in verbs
    assert ("alsa-restore.service", "mask") in verbs and ("avahi-daemon.socket", "mask") in verbs
    # units Appendix A does not list are disabled too (EU keeps only the essential ones) ...
    assert ("e2scrub_reap.service", "disable") in verbs
    # ... but never an essential unit, nor shoal's own
    touched = {a.unit for a in plan.actions}
    assert not touched & {"systemd-journald.service", "rc-local.service", "shoal-report.service"}


def test_net2_keeps_networking_and_ssh_and_wifi_enables_wpa_supplicant(root):
    catalog = unitconfig.load()
    states = unitconfig.unit_files(root)
    net2 = unitconfig.plan(catalog, "NET2", states)
    assert set(net2.kept) == {"networking.service", "ssh.service"}
    wifi = unitconfig.plan(catalog, "WiFi", states)
    assert ("wpa_supplicant.service", "enable") in {(a.unit, a.verb) for a in wifi.actions}
    net3 = unitconfig.plan(catalog, "NET3", states)
    assert [m["unit"] for m in net3.not_available] == ["hciuart.service"]
    assert unitconfig.plan(catalog, "ALLU", states).actions == []


def test_apply_then_undo_leaves_the_unit_state_byte_identical(root):
    catalog = unitconfig.load()
    before = unit_state(root)
    record = unitconfig.apply(catalog, "EU", root)
    after = unit_state(root)
    assert after != before
    assert "etc/systemd/system/multi-user.target.wants/ssh.service" not in after
    assert after["etc/systemd/system/alsa-restore.service"] == "-> /dev/null"
    assert record["links"]["removed"] and record["links"]["added"]
    assert json.loads((root / "etc" / unitconfig.RECORD_NAME).read_text())["config"] == "EU"
    with pytest.raises(unitconfig.ShoalError, match="already carries configuration 'EU'"):
        unitconfig.apply(catalog, "NET1", root)
    unitconfig.undo(root)
    assert unit_state(root) == before


def test_cli_dry_run_by_default_then_apply_and_undo(root, capsys):
    before = unit_state(root)
    assert cli.main(["pallex", "config", "apply", "NET1", "--root", str(root)]) == 0
    dry = capsys.readouterr().out
    assert "dry run" in dry and f"--root={root} --no-reload disable" in dry
    assert unit_state(root) == before
    assert cli.main(["pallex", "config", "apply", "NET1", "--root", str(root), "--yes"]) == 0
    assert unit_state(root) != before
    assert cli.main(["pallex", "config", "undo", "--root", str(root)]) == 0
    assert "undid NET1" in capsys.readouterr().out
    assert unit_state(root) == before


@pytest.mark.parametrize("args, says", [
    (["apply", "EU", "--root", "{tmp}"], "not a systemd root file system"),
    (["apply", "EU+XYZ", "--root", "{root}"], "no unit configuration 'EU+XYZ'"),
    (["undo", "--root", "{root}"], "carries no configuration record"),
    (["diff", "EU", "--root", "{tmp}/nowhere"], "no such directory"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, root, capsys, args, says):
    argv = [a.format(tmp=tmp_path / "plain", root=root) for a in args]
    (tmp_path / "plain").mkdir()
    assert cli.main(["pallex", "config", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
