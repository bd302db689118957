"""A meter's CSV log (wall-clock times and watts), read as it grows, measured."""

from __future__ import annotations

from shoal.power.kinds import Kind, Opening, SpecError


class Log(Kind):
    name, syntax, takes_argument, order = "log", "log:FILE[#TIME,POWER]", True, 50
    domain, quantity = "wall", "power"
    fix = "give the meter's CSV log, e.g. log:meter.csv#time,watts"

    def check(self, arg: str, item: str) -> None:
        if not arg.split("#")[0]:
            raise SpecError(f"power source {item!r}: give a file, e.g. log:meter.csv")

    def open(self, arg: str, at: Opening):
        from shoal.power.meterlog import MeterLogSource

        path, _, columns = arg.partition("#")
        return MeterLogSource(path, columns, offset_s=at.offset_s, since_mono=at.since_mono,
                              node=at.node), []


KIND = Log()
