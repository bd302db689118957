"""hwmon sensors: energy or power inputs, INA219/INA226/INA3221 current monitors, measured."""

from shoal.power.kinds import Sensor

KIND = Sensor(name="hwmon", syntax="hwmon", detect=20, order=20, source="shoal.power.hwmon:HwmonSource",
              fix="wire an INA219/INA226/INA3221 and load its driver (device tree overlay or "
                  "echo ina219 0x40 > /sys/bus/i2c/devices/i2c-1/new_device)")
