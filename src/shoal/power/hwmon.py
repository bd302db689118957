"""hwmon sensors: energy counters, power readings, and INA2xx/INA3221 V x I.

Per chip (``/sys/class/hwmon/hwmonN``), the best quantity available wins:

1. ``energyK_input`` (µJ, cumulative) - counters, e.g. amd_energy;
2. ``powerK_input`` (µW) - e.g. ina2xx (INA219/INA226), acpi power_meter;
3. ``inK_input`` (mV) x ``currK_input`` (mA) for the same K - INA3221
   (bus voltage in1..in3 with curr1..curr3) and any chip with paired
   channels. On ina2xx ``in0`` is the shunt voltage, so it is never paired.

Current is signed (a shunt sees reverse current when a battery charges):
``-123`` parses and yields negative power; it is not an error.

``update_interval`` (ms) is how often the chip converts: polling faster only
re-reads the same value, so it bounds the sampling period.
"""

from __future__ import annotations

import re
from pathlib import Path

from shoal.power.base import ENERGY, MEASURED, POWER, Channel, Source, SourceUnavailable, read_or_nan
from shoal.power.sysfs import IntFile, SensorError, read_optional_int, read_text, sysfs_root

_ATTR = re.compile(r"^(energy|power|in|curr)(\d+)_input$")


def _domain(chip: str, label: str) -> str:
    text = f"{chip} {label}".lower()
    if "power_meter" in text:
        return "wall"
    if "socket" in text or "package" in text or "pkg" in text:
        return "package"
    if "core" in text:
        return "core"
    if "bat" in text:
        return "battery"
    return "board"


class _Reader:
    """One channel's files: a single attribute, or voltage and current."""

    __slots__ = ("first", "second")

    def __init__(self, first: IntFile, second: IntFile | None = None) -> None:
        self.first, self.second = first, second

    def value(self) -> int:
        if self.second is None:
            return self.first.value()
        return self.first.value() * self.second.value()

    def close(self) -> None:
        self.first.close()
        if self.second is not None:
            self.second.close()


class HwmonSource(Source):
    """Every hwmon chip that reports energy, power, or voltage and current."""

    def __init__(self, node: str = "") -> None:
        super().__init__(label="hwmon", default_period_s=0.1)
        base = sysfs_root() / "class" / "hwmon"
        if not base.is_dir() or not any(base.iterdir()):
            raise SourceUnavailable(f"no hwmon power sensors: {base} is empty or missing")
        self._readers: list[_Reader] = []
        self._names: list[str] = []
        min_period = 0.0
        for chip_dir in sorted(base.iterdir(), key=_natural):
            try:
                chip = read_text(chip_dir / "name")
            except SensorError:
                continue
            found = self._add_chip(chip_dir, chip, node)
            if found:
                interval_ms = read_optional_int(chip_dir / "update_interval")
                if interval_ms and interval_ms > 0:
                    min_period = max(min_period, interval_ms / 1000.0)
        if not self._readers:
            raise SourceUnavailable(
                f"no hwmon power sensors: no chip under {base} has energy*_input, power*_input "
                "or paired in*_input/curr*_input")
        self.min_period_s = min_period

    def _add_chip(self, chip_dir: Path, chip: str, node: str) -> bool:
        attrs: dict[str, dict[int, Path]] = {"energy": {}, "power": {}, "in": {}, "curr": {}}
        for path in chip_dir.iterdir():
            match = _ATTR.match(path.name)
            if match:
                attrs[match.group(1)][int(match.group(2))] = path
        tag = f"{chip_dir.name}:{chip}"
        if attrs["energy"]:
            plan = [(k, ENERGY, 1e-6, [p]) for k, p in sorted(attrs["energy"].items())]
            prefix = "energy"
        elif attrs["power"]:
            plan = [(k, POWER, 1e-6, [p]) for k, p in sorted(attrs["power"].items())]
            prefix = "power"
        else:
            pairs = sorted(set(attrs["in"]) & set(attrs["curr"]))
            if chip.startswith("ina2"):
                pairs = [k for k in pairs if k != 0]  # ina2xx in0 is the shunt voltage
            # mV x mA = µW
            plan = [(k, POWER, 1e-6, [attrs["in"][k], attrs["curr"][k]]) for k in pairs]
            prefix = "in"
        added = False
        for index, quantity, scale, paths in plan:
            label = ""
            try:
                label = read_text(chip_dir / f"{prefix}{index}_label")
            except SensorError:
                pass
            name = f"{tag}/{prefix}{index}" + (f" {label}" if label else "")
            try:
                handles = [IntFile(p) for p in paths]
                reader = _Reader(*handles)
                reader.value()
            except SensorError as exc:
                self.notes.append(f"hwmon {name} skipped: {exc}")
                continue
            self.channels.append(Channel(
                source=self.label, name=name, domain=_domain(chip, label), kind=MEASURED,
                quantity=quantity, scale=scale, node=node))
            self._readers.append(reader)
            self._names.append(name)
            added = True
        return added

    def read(self) -> list[float]:
        return [read_or_nan(self, name, reader.value) for name, reader in zip(self._names, self._readers)]

    def fast_fds(self) -> list[int] | None:
        if any(reader.second is not None for reader in self._readers):
            return None  # V x I channels need two reads each
        return [reader.first.fd for reader in self._readers]

    def close(self) -> None:
        for reader in self._readers:
            reader.close()


def _natural(path: Path):
    digits = re.sub(r"\D", "", path.name)
    return (int(digits) if digits else -1, path.name)
