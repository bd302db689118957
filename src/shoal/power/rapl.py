"""RAPL energy counters through the powercap sysfs interface (Intel and AMD).

Layout read (the kernel's)::

    /sys/class/powercap/intel-rapl:0/          -> package zone ("package-0")
        name  energy_uj  max_energy_range_uj  enabled  constraint_N_*
        intel-rapl:0:0/                        -> subzone ("core", "uncore", "dram")
    /sys/class/powercap/intel-rapl:1/          -> "psys" on some clients
    /sys/class/powercap/amd-rapl:0/ ...        -> same files, AMD naming
    /sys/class/powercap/intel-rapl-mmio:0/     -> same package counter via MMIO

Wraparound. ``energy_uj`` is the hardware's 32-bit energy-status counter
times the energy unit, truncated to µJ; ``max_energy_range_uj`` is the value
of the all-ones counter. The counter runs 0 .. max and then restarts at 0,
so deltas are taken modulo ``max + 1``::

    d = now - prev            if now >= prev
    d = now + (max - prev) + 1  otherwise (one wrap)

The true step at the wrap is one hardware unit (15-61 µJ), not 1 µJ: the
error is at most one unit per wrap, below 1e-9 of the counter range. Two
reads cannot tell one wrap from two: an interval longer than the range
divided by the zone's maximum power is flagged ambiguous and not counted,
and the sampler warns before it starts when its period could allow that.

Permissions: since CVE-2020-8694 (Nov 2020) ``energy_uj`` is readable only
by root.
"""

from __future__ import annotations

import re
from pathlib import Path

from shoal.power.base import ENERGY, MEASURED, Channel, Source, SourceUnavailable, read_or_nan
from shoal.power.sysfs import IntFile, SensorError, read_optional_int, read_text, sysfs_root

_ZONE = re.compile(r"^(intel-rapl|amd-rapl|intel-rapl-mmio)((?::\d+)+)$")
#: Assumed ceiling when a zone publishes no power figure (wrap checks only).
DEFAULT_MAX_POWER_W = 500.0
#: RAPL updates its counters about every millisecond.
UPDATE_PERIOD_S = 0.001

PERMISSION_HINT = (
    "energy_uj is readable only by root since CVE-2020-8694; run as root, or let a group read it: "
    "sudo chmod g+r /sys/class/powercap/*/energy_uj && sudo chgrp power /sys/class/powercap/*/energy_uj "
    "(or a udev rule doing the same at boot)"
)


def _domain(zone_name: str) -> str:
    if zone_name.startswith("package"):
        return "package"
    if zone_name == "psys":
        return "board"
    return zone_name  # core, uncore, dram


def _max_power_w(zone: Path) -> float | None:
    """Largest power the zone declares (max_power, else power limits)."""
    maxima, limits = [], []
    for path in zone.glob("constraint_*_max_power_uw"):
        value = read_optional_int(path)
        if value and value > 0:
            maxima.append(value / 1e6)
    for path in zone.glob("constraint_*_power_limit_uw"):
        value = read_optional_int(path)
        if value and value > 0:
            limits.append(value / 1e6)
    if maxima:
        return max(maxima)
    if limits:
        # Short bursts may exceed the long-term limit (PL2 > PL1): keep a margin.
        return 2.0 * max(limits)
    return None


class RaplSource(Source):
    """All readable RAPL zones and subzones as energy counters."""

    def __init__(self, node: str = "") -> None:
        super().__init__(label="rapl", min_period_s=UPDATE_PERIOD_S, default_period_s=0.1)
        base = sysfs_root() / "class" / "powercap"
        if not base.is_dir():
            raise SourceUnavailable(
                f"no RAPL: {base} does not exist (no powercap driver; usual inside VMs and on ARM boards)")
        zones = []
        for entry in base.iterdir():
            match = _ZONE.match(entry.name)
            if match:
                zones.append((match.group(1), tuple(int(x) for x in match.group(2)[1:].split(":")), entry))
        zones.sort(key=lambda z: (z[0], z[1]))  # each zone, then its subzones, in number order
        if not zones:
            raise SourceUnavailable(
                f"no RAPL: {base} has no intel-rapl/amd-rapl zones (CPU or VM without RAPL)")

        names: dict[tuple[str, tuple[int, ...]], str] = {}
        msr_names = set()
        for kind, ids, path in zones:
            try:
                names[(kind, ids)] = read_text(path / "name")
            except SensorError as exc:
                self.notes.append(f"rapl zone {path.name} skipped: {exc}")
        for (kind, ids), name in names.items():
            if kind != "intel-rapl-mmio" and len(ids) == 1:
                msr_names.add(name)

        self._files: list[IntFile] = []
        denied = []
        have_psys = "psys" in names.values()
        for kind, ids, path in zones:
            if (kind, ids) not in names:
                continue
            name = names[(kind, ids)]
            if kind == "intel-rapl-mmio" and name in msr_names:
                continue  # the same package counter, read through MMIO: would count twice
            parent = names.get((kind, ids[:-1])) if len(ids) > 1 else None
            label = f"{parent}/{name}" if parent else name
            max_range = read_optional_int(path / "max_energy_range_uj")
            if not max_range or max_range <= 0:
                self.notes.append(f"rapl zone {path.name} ({label}) skipped: "
                                  "no usable max_energy_range_uj, wraparound could not be corrected")
                continue
            try:
                handle = IntFile(path / "energy_uj")
                handle.value()
            except SensorError as exc:
                if exc.errno in (1, 13):  # EPERM, EACCES
                    denied.append(str(path / "energy_uj"))
                else:
                    self.notes.append(f"rapl zone {path.name} ({label}) skipped: {exc}")
                continue
            max_power = _max_power_w(path)
            if max_power is None and parent:
                max_power = _max_power_w(path.parent / _zone_dirname(kind, ids[:-1]))
            if name in ("core", "uncore") and parent:
                part_of = parent
            elif have_psys and name != "psys" and not parent:
                part_of = "psys"
            else:
                part_of = ""
            self.channels.append(Channel(
                source=self.label, name=label, domain=_domain(name), kind=MEASURED,
                quantity=ENERGY, scale=1e-6, modulus=float(max_range) + 1.0,
                max_power_W=max_power or DEFAULT_MAX_POWER_W, part_of=part_of, node=node))
            self._files.append(handle)
        if not self._files:
            if denied:
                raise SourceUnavailable(f"RAPL present but {denied[0]} is not readable: {PERMISSION_HINT}")
            raise SourceUnavailable("RAPL zones present but none is readable: " + "; ".join(self.notes))
        if denied:
            self.notes.append(f"{len(denied)} RAPL zone(s) not readable ({denied[0]}): {PERMISSION_HINT}")
        self._names = [c.name for c in self.channels]

    def read(self) -> list[float]:
        return [read_or_nan(self, name, handle.value) for name, handle in zip(self._names, self._files)]

    def fast_fds(self) -> list[int]:
        return [handle.fd for handle in self._files]

    def close(self) -> None:
        for handle in self._files:
            handle.close()


def _zone_dirname(kind: str, ids: tuple[int, ...]) -> str:
    return kind + "".join(f":{i}" for i in ids)
