"""RAPL energy counters of Intel and AMD CPUs (powercap), measured."""

from shoal.power.kinds import Sensor

KIND = Sensor(name="rapl", syntax="rapl", detect=10, order=10, source="shoal.power.rapl:RaplSource",
              fix="RAPL needs an Intel or AMD CPU on bare metal (not a VM); elsewhere use a meter "
                  "or the model")
