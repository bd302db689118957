"""hwmon chips (INA219/INA226/INA3221, energy counters) and batteries."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.power import integrate, spec
from shoal.power.base import SourceUnavailable
from shoal.power.battery import BatterySource
from shoal.power.hwmon import HwmonSource
from shoal.power.sampler import Sampler


def _ina219(kernel, index=0):
    # ina2xx driver: in0 = shunt voltage (mV), in1 = bus voltage (mV), curr1 (mA), power1 (µW)
    return kernel.hwmon(index, "ina219", {"in0_input": 12, "in1_input": 5080, "curr1_input": 640,
                                          "power1_input": 3251200, "shunt_resistor": 100000})


def _ina3221(kernel, index=1):
    # three channels: in1..in3 bus (mV), in4..in6 shunt (mV), curr1..curr3 (mA), labels from the DT
    return kernel.hwmon(index, "ina3221", {
        "in1_input": 5000, "in2_input": 3300, "in3_input": 1800,
        "in4_input": 10, "in5_input": 3, "in6_input": 1,
        "curr1_input": 400, "curr2_input": -250, "curr3_input": 120,
        "in1_label": "VDD_IN", "in2_label": "VDD_CPU", "in3_label": "VDD_SOC",
        "in1_enable": 1, "in2_enable": 1, "in3_enable": 1, "update_interval": 3,
    }, device="i2c-1/1-0040")


def test_ina219_uses_its_power_register(kernel):
    _ina219(kernel)
    source = HwmonSource()
    (ch,) = source.channels
    assert ch.name == "hwmon0:ina219/power1" and ch.quantity == "power" and ch.domain == "board"
    assert source.read()[0] * ch.scale == pytest.approx(3.2512)
    source.close()


def test_ina3221_pairs_bus_voltage_and_signed_current(kernel):
    _ina3221(kernel)
    source = HwmonSource()
    names = [c.name for c in source.channels]
    assert names == ["hwmon1:ina3221/in1 VDD_IN", "hwmon1:ina3221/in2 VDD_CPU", "hwmon1:ina3221/in3 VDD_SOC"]
    watts = [v * c.scale for v, c in zip(source.read(), source.channels)]
    # 5 V x 0.4 A, 3.3 V x -0.25 A (reverse current parses and stays negative), 1.8 V x 0.12 A
    assert watts == pytest.approx([2.0, -0.825, 0.216])
    assert source.min_period_s == pytest.approx(0.003)
    source.close()


def test_update_interval_bounds_the_sampling_rate(kernel):
    kernel.hwmon(0, "ina226", {"in0_input": 2, "in1_input": 12000, "curr1_input": 1500,
                               "power1_input": 18000000, "update_interval": 35})
    sampler = Sampler([HwmonSource()], rate_hz=1000)
    assert sampler.recorders[0].period_s == pytest.approx(0.035)
    assert any("change only every 35 ms" in n for n in sampler.notes)
    sampler.stop()


def test_energy_counter_chip_and_counter_reset(kernel):
    kernel.hwmon(2, "amd_energy", {"energy1_input": 1000000, "energy1_label": "Ecore000",
                                   "energy2_input": 5000000, "energy2_label": "Esocket0"})
    source = HwmonSource()
    assert [(c.domain, c.quantity) for c in source.channels] == [("core", "energy"), ("package", "energy")]
    ch = source.channels[1]
    # no published range: a decrease is a reset, not counted, never negative
    iv = integrate.intervals(ch, [0.0, 1.0, 2.0, 3.0], [5e6, 6e6, 2e6, 4e6])
    assert iv.ok.tolist() == [True, False, True]
    assert iv.note[1] == integrate.NOTE_RESET
    assert np.nansum(iv.energy_J) == pytest.approx(3.0)
    source.close()


def test_chip_without_power_attributes_is_ignored_and_absence_explained(kernel):
    kernel.hwmon(0, "coretemp", {"temp1_input": 45000})
    with pytest.raises(SourceUnavailable, match="no chip under .* has energy"):
        HwmonSource()


def test_broken_channel_is_skipped_with_a_note(kernel):
    chip = _ina3221(kernel)
    (chip / "curr3_input").write_text("\n")  # the driver returns nothing for a disabled channel
    source = HwmonSource()
    assert len(source.channels) == 2
    assert any("in3 VDD_SOC skipped" in n and "not an integer" in n for n in source.notes)
    source.close()


def test_battery_power_now_and_voltage_times_current(kernel):
    kernel.supply("AC", {"type": "Mains", "online": 0})
    kernel.supply("BAT0", {"type": "Battery", "status": "Discharging", "present": 1, "power_now": 7350000})
    kernel.supply("BAT1", {"type": "Battery", "status": "Discharging", "present": 1,
                           "voltage_now": 3900000, "current_now": -512000})
    source = BatterySource()
    assert [c.name for c in source.channels] == ["BAT0", "BAT1"]
    assert all(c.domain == "battery" for c in source.channels)
    watts = [v * c.scale for v, c in zip(source.read(), source.channels)]
    assert watts == pytest.approx([7.35, 3.9 * 0.512])
    assert source.notes == []
    source.close()


def test_charging_battery_is_flagged(kernel):
    kernel.supply("BAT0", {"type": "Battery", "status": "Charging", "power_now": 20000000})
    source = BatterySource()
    assert any("Charging" in n and "Discharging" in n for n in source.notes)
    source.close()


def test_no_battery_and_auto_order(kernel):
    kernel.supply("AC", {"type": "Mains", "online": 1})
    with pytest.raises(SourceUnavailable, match="no battery"):
        BatterySource()
    _ina219(kernel)
    kernel.supply("BAT0", {"type": "Battery", "status": "Discharging", "power_now": 1})
    sources, notes = spec.build(spec.parse("auto"))
    assert [s.label for s in sources] == ["hwmon"] and notes == ["auto: using hwmon (measured)"]
    kernel.rapl_zone("intel-rapl:0", "package-0", 1)
    sources, _ = spec.build(spec.parse("auto"))
    assert [s.label for s in sources] == ["rapl"]
