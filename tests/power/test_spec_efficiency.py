"""Source spec strings and performance-per-watt helpers."""

from __future__ import annotations

import pytest

from shoal.power import efficiency, spec
from shoal.power.kinds import model as model_kind


def test_spec_items_and_commas_inside_arguments():
    items = spec.parse("auto, http:http://m:8080/rpc?id=0,1#data.power_W,model:2.5,5.9,cores=4,link_J_per_B=1e-9,"
                       "log:meter.csv#time,power_W")
    assert [i.kind for i in items] == ["auto", "http", "model", "log"]
    assert items[1].arg == "http://m:8080/rpc?id=0,1#data.power_W"
    assert items[2].arg == "2.5,5.9,cores=4,link_J_per_B=1e-9"
    assert items[3].arg == "meter.csv#time,power_W"
    assert spec.parse("http://meter/p#w") == [spec.Item("http", "http://meter/p#w")]
    assert model_kind.parse_args("2.5,5.9,cores=4,cgroup=shoal/d0") == {
        "idle_W": 2.5, "busy_W": 5.9, "cores": 4.0, "cgroup": "shoal/d0"}


@pytest.mark.parametrize("text, message", [
    ("", "empty power source"),
    ("rapl:0", "takes no argument"),
    ("none,rapl", "cannot be combined"),
    ("log:", "give a file"),
    ("model:3,2", "IDLE_W <= BUSY_W"),
    ("model:1,x", "'x' must be a number"),
    ("model:nan,nan", "'nan' must be a finite number"),
    ("model:-1,2", "'-1' must be at least 0"),
    ("model:1,inf", "'inf' must be a finite number"),
    ("model:1,2,speed=3", "unknown"),
    ("model:1,2,cores=0", "'cores=0' must be above 0"),
    ("rapl,hwmon,wattmeter", "unknown power source 'wattmeter'"),
])
def test_bad_specs(text, message):
    with pytest.raises(spec.SpecError, match=message):
        spec.parse(text)


def test_efficiency_helpers():
    assert efficiency.bytes_per_s_per_W(1e9, 2.0, 5.0) == pytest.approx(1e8)
    assert efficiency.ops_per_s_per_W(600, 3.0, 4.0) == pytest.approx(50.0)
    assert efficiency.energy_per_byte(2.0, 1e6) == pytest.approx(2e-6)
    assert efficiency.energy_per_op(10.0, 4) == pytest.approx(2.5)
    assert efficiency.above_idle(30.0, 2.5663, 10.0) == pytest.approx(4.337)
    with pytest.raises(ValueError, match="watts must be positive"):
        efficiency.bytes_per_s_per_W(1, 1, 0.0)
    with pytest.raises(ValueError, match="seconds must be positive"):
        efficiency.ops_per_s_per_W(1, -1, 1)
