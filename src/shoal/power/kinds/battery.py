"""A battery's power_supply readings (power, or voltage times current), measured."""

from shoal.power.kinds import Sensor

KIND = Sensor(name="battery", syntax="battery", detect=30, order=30,
              source="shoal.power.battery:BatterySource", fix="only battery-powered devices have one")
