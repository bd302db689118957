"""Pallex against the baseline on the virtual board, cycle after cycle (``shoal pallex lab --vm``).

Each cycle boots a scenario's application layer (``vmapp``) and ends when the board powers itself
off after the application's done service (the stage file's ``poweroff-force``). Per cycle, from the
serial line and QEMU's exit:

* T_btl+knl: power-on to the start of userspace (the host's time of the initrd's last line, which
  hands over to systemd; T_knl its guest uptime);
* ``app_done_s``: userspace start to the done service's record (the guest's clock);
* ``post_kernel_s``: userspace start to power-off (QEMU's exit): the part of the cycle Pallex
  changes, whose duration and energy the seed's gains compare;
* E modelled from the boot profile's powers: bootloader+kernel, then the configuration's userspace
  power to power-off (one power: the energy gain equals the duration gain; labelled so).

A cycle whose application reports a failed stage or its deadline, or that does not power off in
time, is kept as failed with the reason, and the next cycle runs.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from pathlib import Path
from typing import Callable

from shoal.pallex import lab, testbed, vmboard, vmimage
from shoal.pallex.cloud import Cloud

DONE_MARK = '{"app": "'   # the done service's JSON record (keys sorted) on the serial line
OFF_AFTER_DONE_S = 60.0   # the board's forced power-off after its done record

COLUMNS = ["scenario", "config", "mode", "cycle", "ok", "reason", "T_btl_s", "T_knl_s", "T_btl_knl_s",
           "app_done_s", "post_kernel_s", "cycle_s", "E_btl_knl_J", "E_post_kernel_J", "E_J", "energy_kind",
           "energy_source", "stages_ok", "uploads", "note", "qemu_cpu_s"]


def _json_after(text: str, mark: str, skip: int = 0) -> dict | None:
    """The JSON object that starts at ``mark`` in one serial line (it may follow part of another
    program's line, as programs share the serial line); ``skip`` characters of the mark are not
    part of it."""
    at = text.find(mark)
    if at < 0:
        return None
    try:
        record, _ = json.JSONDecoder().raw_decode(text[at + skip:])
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def done_record(text: str) -> dict | None:
    """The done service's record in one serial line."""
    return _json_after(text, DONE_MARK)


STAGE_COLUMNS = ["scenario", "mode", "cycle", "stage", "ok", "process_start_s", "work_start_s", "inputs_s",
                 "end_s", "startup_s", "stand_in_cpu_s"]


def stage_rows(lines: list[str], userspace_s: float) -> list[dict]:
    """Each stage's report (``PALLEX`` line) as times since the start of userspace on the board's
    clock: its process started, its work began (the interpreter and its imports between the two:
    ``startup_s``), its inputs had all arrived, it ended; and the CPU its stand-in hardware took
    (the synthetic camera: numpy imported and a frame made)."""
    out = []
    for line in lines:
        rep = _json_after(line, "PALLEX {", skip=len("PALLEX "))
        if not rep or rep.get("m_start") is None:
            continue
        shift = rep["m_end"] - rep["t_end"]   # its wall clock onto its monotonic one
        start = rep.get("process_start_s")
        out.append({"stage": rep.get("stage"), "ok": rep.get("ok"),
                    "process_start_s": None if start is None else start - userspace_s,
                    "work_start_s": rep["m_start"] - userspace_s,
                    "inputs_s": None if rep.get("t_inputs") is None else rep["t_inputs"] + shift - userspace_s,
                    "end_s": rep["m_end"] - userspace_s,
                    "startup_s": None if start is None else rep["m_start"] - start,
                    "stand_in_cpu_s": rep.get("stand_in_cpu_s")})
    return out


def one_cycle(command: list[str], scenario: str, config: str, mode: str, index: int, timeout_s: float,
              profile, group: Path | None = None, log_dir: Path | None = None,
              uploads: Callable[[], int] | None = None, expected_uploads: int = 0) -> dict:
    """Power on, wait for the initrd's last line, the done record and the board's own power-off.
    ``uploads()``: what the lab's cloud server has received so far (a cycle of an upload scenario
    is done only when its ``expected_uploads`` arrived)."""
    before = uploads() if uploads else 0
    boot = vmboard.power_on(command, group)
    row = {"scenario": scenario, "config": config, "mode": mode, "cycle": index, "ok": False, "reason": ""}
    try:
        deadline = boot.power_on + timeout_s
        user = boot.wait_for(vmimage.INITRD_DONE, deadline)
        if not user:
            row["reason"] = (f"no start of userspace within {timeout_s:g} s" if not boot.closed
                             else "the board powered off before userspace")
            return row
        done = boot.wait_for(DONE_MARK, deadline, user[0])
        if not done:
            row["reason"] = (f"no done record within {timeout_s:g} s" if not boot.closed
                             else "the board powered off without a done record")
            return row
        off = boot.wait_closed(time.monotonic() + OFF_AFTER_DONE_S)
        record = done_record(done[1].text)
        userspace_s = float(user[1].text.split()[-1])
        t_btl_knl = user[1].t - boot.power_on
        row.update(T_btl_s=t_btl_knl - userspace_s, T_knl_s=userspace_s, T_btl_knl_s=t_btl_knl)
        if row["T_btl_s"] < 0:   # the guest's clock ran ahead of the host's (testbed.phases)
            row.update(T_btl_s=None, T_knl_s=None, note="the guest's clock ran ahead of the host's before "
                       "userspace: T_btl and T_knl are not known, T_btl+knl is")
        if record and "monotonic_s" in record:
            row["app_done_s"] = record["monotonic_s"] - userspace_s
        row["stages"] = stage_rows([line.text for line in boot.lines], userspace_s)
        event = (record or {}).get("event")
        reports = (record or {}).get("reports", [])
        row["stages_ok"] = sum(bool(r.get("ok")) for r in reports)
        if off is None:
            row["reason"] = f"still on {OFF_AFTER_DONE_S:g} s after the done record: power cut"
            return row
        row["cycle_s"] = off - boot.power_on
        row["post_kernel_s"] = row["cycle_s"] - t_btl_knl
        row.update(energy(profile, config, t_btl_knl, row["post_kernel_s"]))
        if event != "done":
            row["reason"] = ("the deadline passed before every stage was done" if event == "deadline" else
                             "a stage failed: " + "; ".join(str(r.get("error", r)) for r in reports if not r.get("ok")))
            return row
        row["uploads"] = (uploads() if uploads else 0) - before
        if row["uploads"] != expected_uploads:
            row["reason"] = f"the cloud received {row['uploads']} upload(s), {expected_uploads} expected"
            return row
        row["ok"] = True
        return row
    finally:
        row["qemu_cpu_s"] = boot.cpu_s()
        boot.power_off()
        if log_dir is not None:
            (log_dir / f"serial-{scenario}-{mode}-{index}.log").write_text(boot.text() + "\n")


def energy(profile, config: str, t_btl_knl: float, post_kernel_s: float) -> dict:
    """Modelled at the boot profile's powers: bootloader+kernel, then the configuration's userspace."""
    e = testbed.modelled_energy(profile, config, t_btl_knl, post_kernel_s)
    return {"E_btl_knl_J": e["E_btl_knl_J"], "E_post_kernel_J": e["E_usi_J"], "E_J": e["E_J"],
            "energy_kind": e["energy_kind"], "energy_source": e["energy_source"]}


def expected_uploads(scenario: str) -> int:
    """Frames an upload scenario sends each cycle (icuN: N), 0 for the others."""
    return int(scenario[3:]) if scenario.startswith("icu") and scenario[3:].isdigit() else 0


def run_cycles(plan: list[tuple[str, str]], cycles: int, disks: dict[tuple[str, str], Path],
               configs: dict[str, str], make_command: Callable[[Path], list[str]], profile, timeout_s: float,
               on_row: Callable[[dict], None], log_dir: Path | None = None,
               group: Path | None = None, uploads: Callable[[], int] | None = None) -> list[dict]:
    """``cycles`` rounds of every (scenario, mode) in ``plan``, interleaved (baseline and Pallex of a
    scenario one after the other) so that load drifts on the host fall on both alike."""
    rows = []
    for i in range(cycles):
        for scenario, mode in plan:
            row = one_cycle(make_command(disks[scenario, mode]), scenario, configs[scenario], mode, i, timeout_s,
                            profile, group, log_dir, uploads, expected_uploads(scenario))
            rows.append(row)
            on_row(row)
    return rows


def _spread(values: list[float]) -> tuple[float | None, float | None, float | None]:
    return (statistics.median(values), min(values), max(values)) if values else (None, None, None)


def summary(rows: list[dict]) -> list[dict]:
    """Per scenario: each mode's medians, and the gains of Pallex over the baseline cycle by cycle
    (median, min, max): post-kernel duration and energy, and lifetime from the whole cycle's energy."""
    out = []
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == scenario]
        s: dict = {"scenario": scenario, "config": mine[0]["config"], "cycles": len(mine),
                   "failed": sum(not r["ok"] for r in mine)}
        for mode in ("baseline", "pallex"):
            ok = [r for r in mine if r["ok"] and r["mode"] == mode]
            for key in ("T_btl_knl_s", "app_done_s", "post_kernel_s", "cycle_s", "E_J"):
                s[f"{mode}_{key}"] = _spread([r[key] for r in ok if r.get(key) is not None])[0]
        gains = lab.pair_gains(mine, "cycle", "post_kernel_s", "E_post_kernel_J", "E_J")
        for what, values in gains.items():
            s[f"vm_{what}_gain"], s[f"vm_{what}_gain_min"], s[f"vm_{what}_gain_max"] = _spread(values)
        s["pairs"] = len(gains["duration"])
        out.append(s)
    return out


def run(scenarios: list[str], cycles: int, profile_name: str, spec_for: Callable, board_speed: str, record,
        timeout_s: float, on_note: Callable[[str], None], on_row: Callable[[dict], None],
        deadline_s: float | None = None) -> list[dict]:
    """Every scenario's baseline and Pallex layers booted ``cycles`` times each on the virtual board,
    each cycle appended to ``record``'s ``vm_cycles`` as it ends (serial logs in ``serial/``).
    ``deadline_s``: the applications' deadline on the board (None: their stage files')."""
    from shoal.pallex import boot, cycles as board_cycles, stagefile, unitconfig, vmapp, vmconfig, vmlayer

    catalog = unitconfig.load()
    img = vmimage.require()
    profile = boot.load(profile_name)
    spec, accel, why = spec_for(img)
    apps = {s: stagefile.resolve(s) for s in scenarios}
    if deadline_s is not None:
        apps = {s: dataclasses.replace(app, deadline_s=deadline_s) for s, app in apps.items()}
    configs = {s: vmapp.config_for(app) for s, app in apps.items()}
    boards = {}
    for config in dict.fromkeys(configs.values()):
        disk = vmconfig.disk_for(img, catalog, config, spec, on_note=on_note)
        boards[config] = vmlayer.disk_for(img, disk, config, spec, on_note)
    disks = {(s, mode): vmapp.disk_for(img, boards[configs[s]], configs[s], apps[s], mode, spec, on_note)
             for s in scenarios for mode in vmapp.MODES}
    group, placement = vmboard.board_group()
    on_note(placement)
    try:
        speed, _ = board_cycles.board_speed_for(board_speed, profile_name, img, spec, group, on_note)
        record.update_manifest(vm={"accel": accel, "accel_reason": why, "cpu_placement": placement,
                                   "board": {"cores": spec.cores, "memory_B": spec.memory_B,
                                             "read_Bps": spec.read_Bps, "write_Bps": spec.write_Bps},
                                   "board_speed": speed.describe() if speed else {"verdict": "free"},
                                   "configs": configs, "image": str(img.disk),
                                   "deadline_s": {s: app.deadline_s for s, app in apps.items()},
                                   "energy": "modelled from the boot profile's phase powers (no meter on a "
                                             "virtual board)"})
        logs = record.path / "serial"
        logs.mkdir(exist_ok=True)

        def keep(row: dict) -> None:
            record.append("vm_cycles", [{k: v for k, v in row.items() if k != "stages"}], COLUMNS)
            tag = {k: row[k] for k in ("scenario", "mode", "cycle")}
            if row.get("stages"):
                record.append("vm_stages", [{**tag, **s} for s in row["stages"]], STAGE_COLUMNS)
            on_row(row)

        with Cloud() as cloud:
            forward = (vmapp.CLOUD_ADDRESS, cloud.server.server_address[1])
            return run_cycles([(s, m) for s in scenarios for m in vmapp.MODES], cycles, disks, configs,
                              lambda d: vmboard.argv(img, spec, disk=d, cmdline=vmboard.CMDLINE, forward=forward),
                              profile, timeout_s, keep, logs, group, lambda: len(cloud.received))
    finally:
        vmboard.release_group(group)


def beside(vm: list[dict], projected: list[dict]) -> list[dict]:
    """The virtual board's gains with the lab's projection to the device and the seed's, per scenario."""
    by_scenario = {r["scenario"]: r for r in projected}
    out = []
    for s in vm:
        p = by_scenario.get(s["scenario"], {})
        out.append({**s, **{f"projected_{what}_gain": p.get(f"{what}_gain")
                            for what in ("duration", "energy", "lifetime")},
                    **{f"paper_{what}_gain": p.get(f"paper_{what}_gain") for what in ("duration", "energy", "lifetime")}})
    return out
