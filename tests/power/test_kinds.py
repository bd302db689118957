"""A new kind of power source is one module in shoal/power/kinds: a made-up sensor proves it."""

from __future__ import annotations

import textwrap

import pytest

from shoal.power import kinds, registry, spec

WALLPLUG = textwrap.dedent('''
    """A made-up smart plug whose driver shows its draw in milliwatts under /sys."""
    from shoal.power.base import MEASURED, POWER, Channel, Source, SourceUnavailable
    from shoal.power.kinds import Kind, Opening
    from shoal.power.sysfs import IntFile, sysfs_root


    class WallplugSource(Source):
        def __init__(self, node=""):
            super().__init__(label="wallplug")
            path = sysfs_root() / "class" / "wallplug" / "power_mW"
            if not path.exists():
                raise SourceUnavailable(f"no smart plug: {path} is missing")
            self.file = IntFile(path)
            self.channels.append(Channel(source="wallplug", name="plug", domain="wall", kind=MEASURED,
                                         quantity=POWER, scale=1e-3, node=node))

        def read(self):
            return [float(self.file.value())]


    class Wallplug(Kind):
        name, syntax, detect, order = "wallplug", "wallplug", 5, 35
        fix = "plug the board into the smart plug and load its driver"

        def open(self, arg, at: Opening):
            return WallplugSource(node=at.node), []


    KIND = Wallplug()
''')

BAREKIND = textwrap.dedent('''
    """A made-up sensor that says nothing about how to get one."""
    from shoal.power.base import SourceUnavailable
    from shoal.power.kinds import Kind


    class Thermopile(Kind):
        name, syntax, detect = "thermopile", "thermopile", 40

        def open(self, arg, at):
            raise SourceUnavailable("no thermopile here")


    KIND = Thermopile()
''')


@pytest.fixture
def dropped_in(tmp_path, monkeypatch):
    """Modules written into a folder that shoal.power.kinds searches too."""
    def drop(**modules: str) -> None:
        for name, text in modules.items():
            (tmp_path / f"{name}.py").write_text(text)
        monkeypatch.setattr(kinds, "__path__", [*kinds.__path__, str(tmp_path)])
        _forget()
    yield drop
    monkeypatch.undo()
    _forget()


def _forget() -> None:
    for cached in (kinds.kinds, kinds.syntax, spec._kind_start):
        cached.cache_clear()


def test_a_new_sensor_is_one_module(dropped_in, kernel):
    dropped_in(wallplug=WALLPLUG)
    (kernel.sys / "class" / "wallplug").mkdir(parents=True)
    (kernel.sys / "class" / "wallplug" / "power_mW").write_text("2500\n")
    # The grammar and the help text know it ...
    assert "|battery|wallplug|http:" in kinds.syntax()
    assert spec.parse("wallplug, model:1,2") == [spec.Item("wallplug"), spec.Item("model", "1,2")]
    with pytest.raises(spec.SpecError, match="'wallplug' takes no argument"):
        spec.parse("wallplug:3")
    # ... auto tries it first (it declares so) and reads it ...
    (source,), notes = spec.build(spec.parse("auto"))
    assert notes == ["auto: using wallplug (measured)"]
    assert source.read() == [2500.0] and source.channels[0].scale == 1e-3
    # ... and the survey behind `shoal doctor` and `shoal power sources` lists it.
    found = registry.survey()
    assert [f.kind for f in found.found] == ["wallplug"] and found.auto == "auto uses wallplug (measured)"


def test_a_new_sensor_missing_here_says_why_and_what_to_do(dropped_in, kernel):
    dropped_in(wallplug=WALLPLUG, thermopile=BAREKIND)
    found = registry.survey()
    assert found.missing["wallplug"] == (
        f"no smart plug: {kernel.sys}/class/wallplug/power_mW is missing",
        "plug the board into the smart plug and load its driver")
    # A kind that declares no fix is listed with that said, not a KeyError.
    assert found.missing["thermopile"] == ("no thermopile here", "no fix known; see docs/power.md")
    assert "(wallplug, rapl, hwmon, battery, thermopile)" in found.auto
    entries = {e["name"]: e for e in registry.describe_sources()}
    assert entries["wallplug"]["available"] is False and "smart plug" in entries["wallplug"]["fix"]
    with pytest.raises(Exception, match="power source wallplug: no smart plug"):
        spec.build(spec.parse("wallplug"))


def test_the_shipped_kinds_and_their_one_help_text():
    assert [k.name for k in kinds.kinds()] == ["rapl", "hwmon", "battery", "http", "log", "model"]
    assert [k.name for k in kinds.sensors()] == ["rapl", "hwmon", "battery"]
    assert kinds.syntax() == ("auto|rapl|hwmon|battery|http:URL[#json.path]|log:FILE[#TIME,POWER]|"
                              "model[:IDLE_W,BUSY_W]|none")
    assert kinds.get("HTTPS") is kinds.get("http")
