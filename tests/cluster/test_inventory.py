"""Inventories, profiles and node-count parsing: validation names file, line and field."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shoal import profiles
from shoal.cluster import inventory, parse_nodes
from shoal.errors import ShoalError

GOOD = """\
[cluster]
mode = "ssh"
link = "ethernet-100m"

[[nodes]]
name = "minnow1"
address = "192.168.1.11"
profile = "minnowboard"

[[nodes]]
name = "big"
profile = "myboard"
link = "slow"
slots = 3

[profiles.myboard]
cores = 4
speed = 0.5
idle_W = 1.5
busy_W = 4.0
link = "slow"

[links.slow]
rate_bps = 5e6
latency_s = 0.01
"""


def write(tmp_path, text):
    path = tmp_path / "inv.toml"
    path.write_text(text)
    return path


def test_builtin_profiles_have_sources_and_the_papers_numbers():
    found = profiles.load()
    minnow = found["minnowboard"]
    # Seed 000 Table 5.6: idle 2.5663 W; busy = mean of the MAX row over the eight tests.
    table_5_6_max = (5.6139, 5.875, 5.934, 5.823, 5.749, 5.853, 5.761, 5.703)
    assert (minnow.cores, minnow.idle_W) == (2, 2.5663)
    assert minnow.busy_W == pytest.approx(sum(table_5_6_max) / 8)
    assert sorted(minnow.per_test.max_W.values()) == sorted(table_5_6_max)
    assert minnow.per_test.average_W["reduce"] == 2.231 and minnow.max_W == 5.934
    assert "Table 5.6" in minnow.sources["idle"]
    assert found["nuc"].idle_W == 4.4801 and "Table 5.7" in found["nuc"].sources["idle"]
    assert (found["odroid-xu4"].idle_W, found["odroid-xu4"].busy_W) == (3.0, 7.0)
    assert (found["core-i7"].idle_W, found["core-i7"].busy_W) == (10.0, 30.0)
    assert found["stb"].link == "docsis-27m"
    assert profiles.load_links()["docsis-27m"].rate_bps == 27e6
    for profile in found.values():
        for key in ("idle", "busy", "speed", "cores"):
            assert profile.sources.get(key), f"{profile.name}.{key} has no source"


def test_user_profiles_from_environment(tmp_path, monkeypatch):
    extra = tmp_path / "mine.toml"
    extra.write_text('[profiles.minnowboard]\ncores = 2\nspeed = 0.3\nidle_W = 2.0\nbusy_W = 5.0\n'
                     'link = "gigabit"\n[profiles.jetson]\ncores = 6\nspeed = 0.4\nidle_W = 5\nbusy_W = 15\n')
    monkeypatch.setenv("SHOAL_PROFILES", str(extra))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    found = profiles.load()
    assert found["minnowboard"].speed == 0.3 and found["jetson"].cores == 6
    monkeypatch.setenv("SHOAL_PROFILES", str(tmp_path / "missing.toml"))
    with pytest.raises(ShoalError, match="missing.toml"):
        profiles.load()


def test_good_inventory(tmp_path):
    inv = inventory.load(write(tmp_path, GOOD))
    assert inv.mode == "ssh"
    assert [n.name for n in inv.nodes] == ["minnow1", "big"]
    assert inv.nodes[0].address == "192.168.1.11" and inv.nodes[0].slots == 2
    assert inv.nodes[0].link.rate_bps == 100e6
    assert inv.nodes[1].profile.cores == 4 and inv.nodes[1].link.rate_bps == 5e6
    assert inv.nodes[1].address == "big" and inv.nodes[1].slots == 3
    described = inv.describe()
    assert described["profiles"]["myboard"]["busy_W"] == 4.0


@pytest.mark.parametrize("old,new,expected", [
    ('slots = 3', 'slots = "three"', r"inv.toml:14: nodes\[1\].slots: must be a whole number"),
    ('profile = "myboard"\nlink', 'profile = "nosuch"\nlink', r"inv.toml:12: nodes\[1\].profile: unknown profile 'nosuch'"),
    ('name = "big"', 'name = "Big Box"', r"inv.toml:11: nodes\[1\].name: needs a name"),
    ('address = "192.168.1.11"', 'address = "a;rm -rf /"', r"inv.toml:7: nodes\[0\].address: is not a host"),
    ('mode = "ssh"', 'mode = "cloud"', r"inv.toml:2: cluster.mode: must be one of"),
    ('slots = 3', 'slots = 3\ncolour = "red"', r"inv.toml:15: nodes\[1\].colour: unknown field"),
    ('rate_bps = 5e6', 'rate_bps = -1', r"inv.toml:24: links.slow.rate_bps: must be above 0, got -1"),
    ('busy_W = 4.0', '', r"inv.toml:16: profiles.myboard.busy_W: is missing; every profile needs cores"),
    ('name = "big"', 'name = "minnow1"', r"inv.toml:11: nodes\[1\].name: node 'minnow1' is listed twice"),
])
def test_inventory_errors_name_file_line_and_field(tmp_path, old, new, expected):
    assert old in GOOD
    with pytest.raises(ShoalError, match=expected):
        inventory.load(write(tmp_path, GOOD.replace(old, new, 1)))


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(ShoalError, match=r"inv.toml: not valid TOML"):
        inventory.load(write(tmp_path, "[[nodes]\nname="))
    with pytest.raises(ShoalError, match="cannot read inventory"):
        inventory.load(tmp_path / "absent.toml")


def test_emulate_shorthand():
    inv = inventory.from_emulate("4xminnowboard+1xnuc", link="docsis-27m")
    assert [n.name for n in inv.nodes] == ["minnowboard1", "minnowboard2", "minnowboard3",
                                           "minnowboard4", "nuc1"]
    assert {n.link.rate_bps for n in inv.nodes} == {27e6}
    assert inventory.from_emulate("2xrpi3").nodes[0].link.name == "ethernet-100m"
    for bad, message in [("4minnowboard", "COUNTxPROFILE"), ("2xnosuch", "unknown profile"),
                         ("0xnuc", "at least 1")]:
        with pytest.raises(ShoalError, match=message):
            inventory.from_emulate(bad)
    with pytest.raises(ShoalError, match="unknown link type"):
        inventory.from_emulate("2xnuc", link="carrier-pigeon")


def test_parse_nodes():
    assert parse_nodes("1..4") == [1, 2, 3, 4]
    assert parse_nodes("1,2,4,6") == [1, 2, 4, 6]
    assert parse_nodes("2..8:2, 1") == [1, 2, 4, 6, 8]
    for bad in ("0..2", "4..1", "x", "1..", ""):
        with pytest.raises(ShoalError):
            parse_nodes(bad)
    with pytest.raises(ShoalError, match="6 is more than the 4 available"):
        parse_nodes("1..6", available=4)


def test_cli_bad_inventory_is_one_line(tmp_path):
    path = write(tmp_path, GOOD.replace('slots = 3', 'slots = 0'))
    proc = subprocess.run([sys.executable, "-m", "shoal", "cluster", "up", "--cluster", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "inv.toml:14: nodes[1].slots" in lines[0]
    assert "Traceback" not in proc.stderr
