"""A device's own boot profile from ``systemd-analyze`` and, where a meter logged the boot, its energy.

``systemd-analyze time`` gives the kernel and userspace phases (and firmware
and loader where the firmware reports them); ``critical-chain`` gives when
each unit on the path to the default target became active, relative to the
start of userspace (``@`` plus the ``+`` activation time); ``blame`` is kept
for reference only (it overstates units that waited for others, seed 004
§IV-A). Live, the commands run here (they refuse unless systemd is PID 1);
``--from DIR`` reads saved outputs: time.txt, critical-chain.txt, blame.txt,
and kernel-start.txt (Unix time of the kernel's start) for a meter log.

With a meter log (CSV, wall-clock times, watts: shoal.power's meter-log
format) the energy of each phase is integrated on the kernel's clock:
bootloader [-T_btl, 0], kernel [0, T_knl], userspace [T_knl, T_knl + T_usi].
Without one, energies are left out and say so.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import numpy as np

from shoal import proc
from shoal.errors import ShoalError

def seconds(text: str) -> float:
    """'1min 2.345s', '345ms', '1.2s', '120us' -> seconds."""
    text = text.strip()
    total, found = 0.0, False
    for value, unit in re.findall(r"(\d+(?:\.\d+)?)\s*(min|ms|us|µs|s|h)\b", text):
        found = True
        total += float(value) * {"h": 3600, "min": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}[unit]
    if not found:
        raise ValueError(f"no time in {text!r}")
    return total


def parse_time(text: str) -> dict[str, float]:
    """``systemd-analyze time`` -> {firmware, loader, kernel, initrd, userspace, total} seconds."""
    line = next((l for l in text.splitlines() if "Startup finished in" in l), None)
    if line is None:
        raise ShoalError("systemd-analyze time: no 'Startup finished in' line (has the boot finished?)")
    out = {}
    for value, phase in re.findall(r"([\dminµus. ]+?)\s*\((firmware|loader|kernel|initrd|userspace)\)", line):
        out[phase] = seconds(value)
    total = re.search(r"=\s*(.+)$", line)
    if total:
        out["total"] = seconds(total.group(1))
    if "kernel" not in out or "userspace" not in out:
        raise ShoalError(f"systemd-analyze time: cannot read kernel and userspace phases from {line!r}")
    return out


def parse_critical_chain(text: str) -> dict[str, float]:
    """unit -> seconds after userspace start when it was active (``@`` + ``+``)."""
    out = {}
    for line in text.splitlines():
        m = re.search(r"([\w@.\\:-]+\.(?:service|target|socket|mount|device|path|timer|swap|slice|scope))"
                      r"\s+@([^+]+?)(?:\s+\+(.+))?$", line.strip())
        if m:
            at = seconds(m.group(2))
            out[m.group(1)] = at + (seconds(m.group(3)) if m.group(3) else 0.0)
    return out


def parse_blame(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"\s*(.+?)\s+(\S+\.(?:service|target|socket|mount|device|path|timer|swap))\s*$", line)
        if m:
            try:
                out[m.group(2)] = seconds(m.group(1))
            except ValueError:
                continue
    return out


def _live(command: list[str]) -> str:
    tool = proc.tool("systemd-analyze", "to read this machine's boot", package="systemd")
    result = proc.run([tool, *command], timeout=60)
    if not result.ok:
        raise ShoalError(result.error_line(f"systemd-analyze {command[0]}")
                         + "; on a machine not booted with systemd, save the outputs on the device and use --from DIR")
    return result.stdout


def _saved(directory: Path, name: str, required: bool = True) -> str:
    path = directory / name
    try:
        return path.read_text()
    except OSError:
        if required:
            raise ShoalError(f"{path} is missing; save 'systemd-analyze {name[:-4]}' there") from None
        return ""


def phase_energy(meter_log: str, kernel_start_wall: float, windows: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Energy (J) of each window (seconds on the kernel's clock) from a meter log."""
    from shoal.power.base import SourceUnavailable
    from shoal.power.meterlog import MeterLogSource

    try:
        source = MeterLogSource(meter_log, offset_s=kernel_start_wall)
    except SourceUnavailable as exc:
        raise ShoalError(str(exc)) from None
    try:
        readings = source.poll()
    finally:
        source.close()
    if len(readings) < 2:
        raise ShoalError(f"meter log {meter_log}: fewer than two readings")
    t = np.array([r[0] for r in readings])
    p = np.array([r[1][0] for r in readings]) * source.channels[0].scale
    out = {}
    for name, (a, b) in windows.items():
        if a < t[0] or b > t[-1]:
            raise ShoalError(f"meter log {meter_log} covers {t[0]:.2f}..{t[-1]:.2f} s of the boot, "
                             f"not the {name} phase ({a:.2f}..{b:.2f} s); log the whole boot")
        inside = (t > a) & (t < b)
        tt = np.concatenate([[a], t[inside], [b]])
        pp = np.concatenate([[np.interp(a, t, p)], p[inside], [np.interp(b, t, p)]])
        out[name] = float(np.sum((pp[1:] + pp[:-1]) / 2.0 * np.diff(tt)))
    return out


def build(source: str | None, *, device: str = "device", meter_log: str | None = None,
          bootloader_s: float | None = None, config: str = "EU") -> dict:
    """The boot profile table (as a dict) of this machine, or of saved outputs in ``source``."""
    if source:
        directory = Path(source)
        if not directory.is_dir():
            raise ShoalError(f"--from {source}: not a directory; give the directory with time.txt, critical-chain.txt")
        time_text, chain_text = _saved(directory, "time.txt"), _saved(directory, "critical-chain.txt")
        blame_text = _saved(directory, "blame.txt", required=False)
        kstart_text = _saved(directory, "kernel-start.txt", required=False)
    else:
        time_text, chain_text, blame_text = _live(["time"]), _live(["critical-chain"]), _live(["blame"])
        kstart_text = str(time.time() - time.clock_gettime(time.CLOCK_BOOTTIME))
    phases = parse_time(time_text)
    btl = bootloader_s if bootloader_s is not None else phases.get("firmware", 0.0) + phases.get("loader", 0.0)
    kernel = phases["kernel"] + phases.get("initrd", 0.0)
    table: dict = {"device": device, "bootloader_s": btl, "kernel_s": kernel,
                   "systemd_ready_s": 0.0, "shutdown_s": 0.0, "shutdown_J": 0.0,
                   "userspace": {config: {"duration_s": phases["userspace"]}},
                   "units": parse_critical_chain(chain_text), "blame": parse_blame(blame_text),
                   "sources": {"phases": "systemd-analyze time", "units": "systemd-analyze critical-chain"}}
    if meter_log:
        try:
            kstart = float(kstart_text.strip())
        except ValueError:
            raise ShoalError("the kernel's start time is unknown: put its Unix time in kernel-start.txt") from None
        energy = phase_energy(meter_log, kstart, {"bootloader": (-btl, 0.0), "kernel": (0.0, kernel),
                                                  "userspace": (kernel, kernel + phases["userspace"])})
        table["bootloader_kernel_J"] = energy["bootloader"] + energy["kernel"]
        table["userspace"][config]["energy_J"] = energy["userspace"]
        table["sources"]["energy"] = f"meter log {meter_log}, integrated per phase"
    else:
        table["bootloader_kernel_J"] = math.nan
        table["userspace"][config]["energy_J"] = math.nan
        table["sources"]["energy"] = "no meter log: energies unknown (give --meter-log)"
    return table


def to_toml(table: dict) -> str:
    """The ``[boot.DEVICE]`` table for a profiles file (units with their source)."""
    def num(v: float) -> str:
        return "nan" if isinstance(v, float) and math.isnan(v) else repr(float(v))

    dev = table["device"]
    lines = [f"[boot.{dev}]"]
    for key in ("bootloader_s", "kernel_s", "bootloader_kernel_J", "systemd_ready_s", "shutdown_s", "shutdown_J"):
        lines.append(f"{key} = {num(table[key])}")
    lines.append(f'source = "shoal pallex profile: {table["sources"]["phases"]}; {table["sources"]["energy"]}"')
    for name, us in table["userspace"].items():
        lines += ["", f"[boot.{dev}.userspace.{name}]", f"duration_s = {num(us['duration_s'])}",
                  f"energy_J = {num(us['energy_J'])}", f'source = "{table["sources"]["phases"]}"']
    for unit, ready in sorted(table["units"].items(), key=lambda kv: kv[1]):
        lines += ["", f'[boot.{dev}.units."{unit}"]', f"ready_s = {num(ready)}",
                  f'source = "{table["sources"]["units"]}"']
    return "\n".join(lines) + "\n"
