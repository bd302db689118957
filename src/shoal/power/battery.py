"""Batteries through /sys/class/power_supply (entries whose ``type`` is Battery).

Power is ``power_now`` (µW) when the driver has it, else ``voltage_now`` (µV)
x ``current_now`` (µA). Drivers disagree on the sign of current while
discharging, so the magnitude is used. The reading is the system's draw only
while ``status`` is Discharging; on mains power (Charging, Full, Not
charging) it is the charge current, so the source says so in its notes.
Fuel gauges update slowly (often once per second or more), hence the
default period.
"""

from __future__ import annotations

from shoal.power.base import MEASURED, POWER, Channel, Source, SourceUnavailable, read_or_nan
from shoal.power.sysfs import IntFile, SensorError, read_text, sysfs_root


class _Supply:
    __slots__ = ("power", "voltage", "current")

    def __init__(self, power=None, voltage=None, current=None) -> None:
        self.power, self.voltage, self.current = power, voltage, current

    def microwatts(self) -> float:
        if self.power is not None:
            return abs(self.power.value())
        # µV x µA = 1e-12 W; return µW
        return abs(self.voltage.value() * self.current.value()) / 1e6

    def close(self) -> None:
        for handle in (self.power, self.voltage, self.current):
            if handle is not None:
                handle.close()


class BatterySource(Source):
    """Every battery that reports power or voltage and current."""

    def __init__(self, node: str = "") -> None:
        super().__init__(label="battery", min_period_s=0.0, default_period_s=1.0)
        base = sysfs_root() / "class" / "power_supply"
        entries = sorted(base.iterdir()) if base.is_dir() else []
        self._supplies: list[_Supply] = []
        self._names: list[str] = []
        for entry in entries:
            try:
                if read_text(entry / "type") != "Battery":
                    continue
            except SensorError:
                continue
            try:
                if (entry / "power_now").exists():
                    supply = _Supply(power=IntFile(entry / "power_now"))
                else:
                    supply = _Supply(voltage=IntFile(entry / "voltage_now"),
                                     current=IntFile(entry / "current_now"))
                supply.microwatts()
            except (SensorError, OSError) as exc:
                self.notes.append(f"battery {entry.name} skipped: {exc}")
                continue
            try:
                status = read_text(entry / "status")
            except SensorError:
                status = "Unknown"
            if status != "Discharging":
                self.notes.append(f"battery {entry.name} is {status}: its power is the system's "
                                  "draw only while Discharging; unplug mains to measure with it")
            self.channels.append(Channel(source=self.label, name=entry.name, domain="battery",
                                         kind=MEASURED, quantity=POWER, scale=1e-6, node=node))
            self._supplies.append(supply)
            self._names.append(entry.name)
        if not self._supplies:
            raise SourceUnavailable(
                f"no battery: {base} has no entry of type Battery with power_now or voltage_now/current_now")

    def read(self) -> list[float]:
        return [read_or_nan(self, name, supply.microwatts) for name, supply in zip(self._names, self._supplies)]

    def close(self) -> None:
        for supply in self._supplies:
            supply.close()
