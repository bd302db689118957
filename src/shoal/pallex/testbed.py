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
from shoal.pallex import bootmonitor, sdanalyze, vmboard, vmimage


@dataclass(frozen=True)
class CycleSpec:
    config: str
    index: int
    timeout_s: float
    report_timeout_s: float = 90.0
    # graceful | forced | forced-forced: the board shuts itself down after its report (seed 004 §V,
    # vmlayer); None: the testbed cuts the power
    shutdown: str | None = None
    shutdown_timeout_s: float = 120.0


# What the cycles table holds, in this order (a failed cycle leaves the later columns empty).
CYCLE_COLUMNS = ["config", "shutdown", "cycle", "ok", "reason", "signal_s", "guest_uptime_at_signal_s", "T_btl_s",
                 "T_knl_s", "T_btl_knl_s", "T_usi_s", "end_unit", "note", "E_btl_knl_J", "E_usi_J", "E_J",
                 "energy_kind", "energy_source", "T_sdn_s", "E_sdn_J", "shutdown_ok", "shutdown_reason",
                 "config_in_image", "failed_units", "analyze", "qemu_cpu_s", "power_off_s",
                 "usi_cpu_busy", "usi_read_B", "usi_write_B", "usi_mem_peak_B", "monitor_samples",
                 "monitor_cpu_s", "monitor_cpu_share", "board_cpus"]


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


def userspace_start_s(report: dict[str, str]) -> float:
    """When userspace started, on the guest's monotonic clock (its uptime); seconds."""
    manager = properties(report.get("manager", ""))
    if not manager or "UserspaceTimestampMonotonic" not in manager[0]:
        raise ValueError("the report has no UserspaceTimestampMonotonic")
    return int(manager[0]["UserspaceTimestampMonotonic"]) / 1e6


def phases(report: dict[str, str], signal_host_s: float, signal_uptime_s: float, end_rule: str) -> dict:
    """T_btl, T_knl, T_usi (seed 004's end rule) from one boot's report; seconds."""
    userspace = userspace_start_s(report)
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
    if bootloader < 0:
        # The guest's clock ran ahead of the host's before userspace (seen on a TCG guest whose QEMU is
        # held by a CPU quota): its split of power-on to userspace is wrong, the sum and T_usi are not.
        out.update(T_btl_s=None, T_knl_s=None, note=(note + "; " if note else "") +
                   f"the guest's clock ran {-bootloader:.1f} s ahead of the host's before userspace: T_btl and "
                   "T_knl are not known, T_btl+knl and T_usi are")
    if report.get("time"):
        try:
            out["analyze"] = sdanalyze.parse_time(report["time"])
        except ShoalError:
            pass
    return out


def _userspace(profile, config: str):
    """The boot profile's userspace phase for ``config`` (EU where the profile has no row for it)."""
    key = config if config in profile.userspace else "EU"
    return key, profile.userspace[key]


def modelled_energy(profile, config: str, t_btl_knl: float, t_usi: float) -> dict:
    """Energy per phase from the boot profile's powers (bootloader+kernel; the configuration's userspace)."""
    key, u = _userspace(profile, config)
    w_usi = u.energy_J / u.duration_s
    e_bk = profile.bootloader_kernel_W * t_btl_knl
    return {"E_btl_knl_J": e_bk, "E_usi_J": w_usi * t_usi, "E_J": e_bk + w_usi * t_usi,
            "energy_kind": "modelled", "energy_source": f"{profile.device}: {profile.bootloader_kernel_W:.3f} W "
            f"bootloader+kernel, {w_usi:.3f} W userspace ({key}: {u.source})"}


def shutdown_energy(profile, config: str, t_sdn: float) -> float:
    """Modelled: the configuration's userspace power (its units still run while they are stopped)."""
    _, u = _userspace(profile, config)
    return u.energy_J / u.duration_s * t_sdn


def _shutdown(boot: vmboard.Boot, spec: CycleSpec, index: int, profile) -> dict:
    """After the report: the board's own shutdown line, then QEMU's exit (the board is off)."""
    said = boot.wait_for(f"{vmimage.SIGNAL} shutdown ", time.monotonic() + spec.report_timeout_s, index)
    if not said:
        return {"shutdown_ok": False, "shutdown_reason": f"the board did not start its {spec.shutdown} shutdown"}
    off = boot.wait_closed(time.monotonic() + spec.shutdown_timeout_s)
    if off is None:
        return {"shutdown_ok": False, "shutdown_reason": f"still on {spec.shutdown_timeout_s:g} s after "
                f"'systemctl poweroff' ({spec.shutdown}): power cut"}
    t = off - said[1].t
    return {"shutdown_ok": True, "T_sdn_s": t, "E_sdn_J": shutdown_energy(profile, spec.config, t)}


def one_cycle(command: list[str], spec: CycleSpec, end_rule: str, profile, log_dir: Path | None = None,
              group: Path | None = None) -> dict:
    """Algorithm 1's loop body: power on, wait for the signal, read the report, then cut the power or
    (``spec.shutdown``) time the board's own shutdown until QEMU exits."""
    boot = vmboard.power_on(command, group)
    row = {"config": spec.config, "shutdown": spec.shutdown or "cut", "cycle": spec.index, "ok": False, "reason": ""}
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
        # The board layer's monitor, where the boot finished and the report printed it.
        row["monitor"] = bootmonitor.intervals(report.get("monitor", ""), userspace_start_s(report))
        row.update(bootmonitor.over_userspace(row["monitor"], row["T_usi_s"]))
        row.update(bootmonitor.own_cost(report.get("monitor", "")))
        carried = report.get("config", "")
        row["config_in_image"] = json.loads(carried)["config"] if carried.strip().startswith("{") else "ALLU"
        row["ok"] = True
        if spec.shutdown:
            row.update(_shutdown(boot, spec, index, profile))
        return row
    finally:
        row["qemu_cpu_s"] = boot.cpu_s()
        row["power_off_s"] = boot.power_off() - boot.power_on
        if log_dir is not None:
            mode = f"-{spec.shutdown}" if spec.shutdown else ""
            (log_dir / f"serial-{spec.config}{mode}-{spec.index}.log").write_text(boot.text() + "\n")


def _spread(values: list[float], key: str) -> dict:
    return {f"{key}_median": statistics.median(values) if values else None,
            f"{key}_min": min(values) if values else None, f"{key}_max": max(values) if values else None}


def summary(rows: list[dict]) -> list[dict]:
    """Per configuration and shutdown: cycles, failures, and median with spread (min..max) of each phase."""
    out = []
    for config, mode in dict.fromkeys((r["config"], r.get("shutdown", "cut")) for r in rows):
        mine = [r for r in rows if r["config"] == config and r.get("shutdown", "cut") == mode]
        ok = [r for r in mine if r["ok"]]
        s = {"config": config, "shutdown": mode, "cycles": len(mine), "failed": len(mine) - len(ok),
             "shutdown_failed": sum(r.get("shutdown_ok") is False for r in mine)}
        for key in ("T_btl_knl_s", "T_usi_s", "signal_s", "qemu_cpu_s", "E_usi_J", "E_J", "T_sdn_s", "E_sdn_J",
                    "usi_cpu_busy", "usi_read_B", "usi_write_B", "usi_mem_peak_B"):
            s.update(_spread([r[key] for r in ok if r.get(key) is not None], key))
        out.append(s)
    return out


def reduction(rows: list[dict], better: str = "EU", worse: str = "ALLU") -> dict | None:
    """EU against ALLU: the reduction of the medians of T_usi and E_usi over every cycle of each, whatever
    its shutdown (seed 004: 43.62 % energy, RPi3)."""
    def median(config: str, key: str) -> float | None:
        values = [r[key] for r in rows if r["config"] == config and r["ok"] and r.get(key) is not None]
        return statistics.median(values) if values else None

    if not any(r["config"] == better for r in rows) or not any(r["config"] == worse for r in rows):
        return None
    out = {}
    for key in ("T_usi_s", "E_usi_J"):
        x, y = median(better, key), median(worse, key)
        out[key.split("_")[0] + "_usi_reduction"] = (1 - x / y) if x is not None and y else None
    out["seed_E_usi_reduction_rpi3"] = 0.4362
    return out


# Seed 004 §V-A: EU's graceful shutdown energy below ALLU's, WiFi disconnected (Fig. 10).
SEED_SHUTDOWN_EU_REDUCTION = {"rpi3": 0.439, "rpi0w": 0.574}


def shutdowns(rows: list[dict], profile) -> dict | None:
    """The shutdown modes measured (Figs. 10-12): per configuration the median T_sdn and E_sdn of each
    mode, each against graceful, whether forced-forced < forced < graceful, and EU's graceful
    energy against ALLU's beside the seed's; the boot profile's forced-forced bounds (§V-B) beside."""
    timed = [r for r in rows if r.get("shutdown_ok")]
    if not timed:
        return None
    out: dict = {"configs": {}}
    for config in dict.fromkeys(r["config"] for r in timed):
        modes = {}
        for mode in dict.fromkeys(r["shutdown"] for r in timed if r["config"] == config):
            mine = [r for r in timed if r["config"] == config and r["shutdown"] == mode]
            modes[mode] = {**_spread([r["T_sdn_s"] for r in mine], "T_sdn_s"),
                           **_spread([r["E_sdn_J"] for r in mine], "E_sdn_J"), "cycles": len(mine)}
        graceful = modes.get("graceful", {}).get("T_sdn_s_median")
        for m in modes.values():
            m["against_graceful"] = m["T_sdn_s_median"] / graceful if graceful else None
        order = [modes[m]["T_sdn_s_median"] for m in ("forced-forced", "forced", "graceful") if m in modes]
        out["configs"][config] = {"modes": modes, "ordered": len(order) == 3 and order[0] < order[1] < order[2]}
    eu, allu = (out["configs"].get(c, {}).get("modes", {}).get("graceful") for c in ("EU", "ALLU"))
    out["eu_graceful_E_reduction"] = 1 - eu["E_sdn_J_median"] / allu["E_sdn_J_median"] if eu and allu else None
    out["seed_eu_graceful_E_reduction"] = SEED_SHUTDOWN_EU_REDUCTION.get(profile.device)
    out["seed_forced_forced_bound_s"], out["seed_forced_forced_bound_J"] = profile.shutdown_s, profile.shutdown_J
    return out


def run_cycles(configs: list[str], cycles: int, disks: dict[str, Path],
               make_command: Callable[[Path, str | None], list[str]], end_rules: dict[str, str], profile, timeout_s: float, on_row: Callable[[dict], None],
               log_dir: Path | None = None, group: Path | None = None,
               shutdowns: tuple[str | None, ...] = (None,)) -> list[dict]:
    """Every configuration ``cycles`` times with each shutdown (None: the power is cut), interleaved
    (EU, ALLU, EU, ALLU, ...) so that load drifts on the host fall on all alike; ``on_row`` gets each
    cycle as it ends."""
    rows = []
    for i in range(cycles):
        for config in configs:
            for mode in shutdowns:
                row = one_cycle(make_command(disks[config], mode), CycleSpec(config, i, timeout_s, shutdown=mode),
                                end_rules[config], profile, log_dir, group)
                rows.append(row)
                on_row(row)
    return rows
