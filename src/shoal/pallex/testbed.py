"""Seed 004's testbed (§III, Algorithm 1) on the virtual board: power on, wait for the completion
signal, cut the power, cycle after cycle, configuration after configuration.

The power switch is QEMU's start and SIGKILL; the completion signal is the
line ``rc.local`` writes to the serial console (seed 004's end of userspace
initialisation; a GPIO bit pattern on the seed's boards). Per cycle:

* T_btl: power-on to the kernel's start, the host's time of the signal less
  the guest's uptime in it (QEMU, firmware and kernel loading);
* T_knl: kernel start to userspace start (systemd's UserspaceTimestamp; with
  the initrd's time in it, as ``systemd-analyze time`` counts it);
* T_usi: userspace start to the seed's end unit: when rc.local runs (the
  guest's uptime in its signal), or when bluetooth.service became active for
  NET3 and ALLU where it does;
* ``systemd-analyze time``/``blame``/``critical-chain`` as the guest printed them;
* energy modelled from the boot profile's phase powers (labelled so).

A cycle without a signal in time is cut off, recorded as failed, and the next
one runs; every cycle is appended to the run as soon as it ends.
"""

from __future__ import annotations

import json

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from shoal.errors import ShoalError
from shoal.pallex import sdanalyze, vmboard, vmimage


@dataclass(frozen=True)
class CycleSpec:
    config: str
    index: int
    timeout_s: float
    report_timeout_s: float = 90.0


def sections(text: str) -> dict[str, str]:
    """The report's named sections (between SHOAL-REPORT-BEGIN/END lines)."""
    out: dict[str, str] = {}
    name, lines = None, []
    for line in text.splitlines():
        line = line.strip("\r")
        if line.startswith(vmimage.REPORT_BEGIN):
            name, lines = line.split(maxsplit=1)[1].strip(), []
        elif line.startswith(vmimage.REPORT_END) and name is not None:
            out[name] = "\n".join(lines)
            name = None
        elif name is not None:
            lines.append(line)
    return out


def properties(text: str) -> list[dict[str, str]]:
    """``systemctl show`` output (blank-line separated blocks of KEY=VALUE)."""
    blocks, cur = [], {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
            cur = {}
            continue
        key, sep, value = line.partition("=")
        if sep:
            cur[key.strip()] = value.strip()
    if cur:
        blocks.append(cur)
    return blocks


def phases(report: dict[str, str], signal_host_s: float, signal_uptime_s: float, end_rule: str) -> dict:
    """T_btl, T_knl, T_usi (seed 004's end rule) from one boot's report; seconds."""
    manager = properties(report.get("manager", ""))
    if not manager or "UserspaceTimestampMonotonic" not in manager[0]:
        raise ValueError("the report has no UserspaceTimestampMonotonic")
    userspace = int(manager[0]["UserspaceTimestampMonotonic"]) / 1e6
    units = {b.get("Id"): b for b in properties(report.get("units", ""))}
    # rc.local runs when it writes the signal: its own uptime stamp (rc-local.service is Type=forking
    # with GuessMainPID=no, so systemd records no main-process start for it)
    end_unit, end = "rc-local.service", signal_uptime_s
    note = ""
    if end_rule == "bluetooth.service":
        bt = units.get("bluetooth.service", {})
        at = int(bt.get("ActiveEnterTimestampMonotonic") or 0) / 1e6
        if at > 0:
            end_unit, end = "bluetooth.service", at
        else:
            note = "bluetooth.service never became active (no Bluetooth adapter on the virtual board): rc.local ends userspace"
    bootloader = signal_host_s - signal_uptime_s
    out = {"T_btl_s": bootloader, "T_knl_s": userspace, "T_btl_knl_s": bootloader + userspace,
           "T_usi_s": end - userspace, "end_unit": end_unit, "note": note}
    if report.get("time"):
        try:
            out["analyze"] = sdanalyze.parse_time(report["time"])
        except ShoalError:
            pass
    return out


def modelled_energy(profile, config: str, t_btl_knl: float, t_usi: float) -> dict:
    """Energy per phase from the boot profile's powers (bootloader+kernel; the configuration's userspace)."""
    key = config if config in profile.userspace else "EU"
    u = profile.userspace[key]
    w_usi = u.energy_J / u.duration_s
    e_bk = profile.bootloader_kernel_W * t_btl_knl
    return {"E_btl_knl_J": e_bk, "E_usi_J": w_usi * t_usi, "E_J": e_bk + w_usi * t_usi,
            "energy_kind": "modelled", "energy_source": f"{profile.device}: {profile.bootloader_kernel_W:.3f} W "
            f"bootloader+kernel, {w_usi:.3f} W userspace ({key}: {u.source})"}


def one_cycle(command: list[str], spec: CycleSpec, end_rule: str, profile, log_dir: Path | None = None,
              group: Path | None = None) -> dict:
    """Algorithm 1's loop body: power on, wait for the signal, read the report, cut the power."""
    boot = vmboard.power_on(command, group)
    row = {"config": spec.config, "cycle": spec.index, "ok": False, "reason": ""}
    try:
        found = boot.wait_for(f"{vmimage.SIGNAL} rc-local", boot.power_on + spec.timeout_s)
        if not found:
            row["reason"] = (f"no completion signal within {spec.timeout_s:g} s" if boot.process.poll() is None
                             else f"QEMU exited ({boot.process.returncode}) before the completion signal")
            return row
        index, line = found
        signal_s = line.t - boot.power_on
        uptime = float(line.text.split()[-1])
        stamps = boot.wait_for(f"{vmimage.SIGNAL} timestamps-done", time.monotonic() + spec.report_timeout_s, index)
        done = stamps and boot.wait_for(f"{vmimage.SIGNAL} report-done", time.monotonic() + spec.report_timeout_s,
                                        index)
        report = sections(boot.text())
        row.update(signal_s=signal_s, guest_uptime_at_signal_s=uptime)
        if not stamps:
            row["reason"] = f"signal came, but no unit timestamps within {spec.report_timeout_s:g} s"
            return row
        try:
            row.update(phases(report, signal_s, uptime, end_rule))
        except ValueError as exc:
            row["reason"] = str(exc)
            return row
        row.update(modelled_energy(profile, spec.config, row["T_btl_knl_s"], row["T_usi_s"]))
        if not done:
            row["note"] = (row.get("note", "") + "; " if row.get("note") else "") + \
                f"no systemd-analyze: the boot had not finished {spec.report_timeout_s:g} s after the signal"
        row["blame"] = report.get("blame", "")
        row["critical_chain"] = report.get("critical-chain", "")
        row["failed_units"] = [ln.split()[0] for ln in report.get("failed", "").splitlines() if ln.split()]
        carried = report.get("config", "")
        row["config_in_image"] = json.loads(carried)["config"] if carried.strip().startswith("{") else "ALLU"
        row["ok"] = True
        return row
    finally:
        row["qemu_cpu_s"] = boot.cpu_s()
        row["power_off_s"] = boot.power_off() - boot.power_on
        if log_dir is not None:
            (log_dir / f"serial-{spec.config}-{spec.index}.log").write_text(boot.text() + "\n")


def summary(rows: list[dict]) -> list[dict]:
    """Per configuration: cycles, failures, and median with spread (min..max) of each phase."""
    out = []
    for config in dict.fromkeys(r["config"] for r in rows):
        ok = [r for r in rows if r["config"] == config and r["ok"]]
        s = {"config": config, "cycles": sum(r["config"] == config for r in rows), "failed": 0}
        s["failed"] = s["cycles"] - len(ok)
        for key in ("T_btl_knl_s", "T_usi_s", "signal_s", "qemu_cpu_s", "E_usi_J", "E_J"):
            values = [r[key] for r in ok if r.get(key) is not None]
            s[f"{key}_median"] = statistics.median(values) if values else None
            s[f"{key}_min"] = min(values) if values else None
            s[f"{key}_max"] = max(values) if values else None
        out.append(s)
    return out


def reduction(rows: list[dict], better: str = "EU", worse: str = "ALLU") -> dict | None:
    """EU against ALLU: the reduction of the medians of T_usi and E_usi (seed 004: 43.62 % energy, RPi3)."""
    by = {r["config"]: r for r in summary(rows)}
    if better not in by or worse not in by:
        return None
    a, b = by[better], by[worse]
    out = {}
    for key in ("T_usi_s", "E_usi_J"):
        x, y = a[f"{key}_median"], b[f"{key}_median"]
        out[key.split("_")[0] + "_usi_reduction"] = (1 - x / y) if x is not None and y else None
    out["seed_E_usi_reduction_rpi3"] = 0.4362
    return out


def run_cycles(configs: list[str], cycles: int, disks: dict[str, Path], make_command: Callable[[Path], list[str]],
               end_rules: dict[str, str], profile, timeout_s: float, on_row: Callable[[dict], None],
               log_dir: Path | None = None, group: Path | None = None) -> list[dict]:
    """Every configuration ``cycles`` times, interleaved (EU, ALLU, EU, ALLU, ...) so that load drifts on
    the host fall on both alike; ``on_row`` gets each cycle as it ends."""
    rows = []
    for i in range(cycles):
        for config in configs:
            row = one_cycle(make_command(disks[config]), CycleSpec(config, i, timeout_s), end_rules[config],
                            profile, log_dir, group)
            rows.append(row)
            on_row(row)
    return rows


