"""``shoal pallex cycle`` as a library call: the testbed's cycles on the virtual board, kept as a run
(``cycles`` appended as each ends, serial logs, blame and critical-chain per cycle, ``summary``)."""

from __future__ import annotations

import json
from typing import Callable

from shoal.errors import ShoalError
from shoal.pallex import boot, bootmonitor, testbed, unitconfig, vmboard, vmconfig, vmimage, vmlayer, vmspeed


def run(configs: list[str], cycles: int, profile_name: str, spec_for: Callable, timeout_s: float, out,
        argv: list[str], on_row: Callable[[dict], None], on_note: Callable[[str], None],
        board_speed: str = "profile", shutdowns: tuple[str, ...] = ()) -> dict:
    """``spec_for(image)`` -> (BoardSpec with its accelerator, accelerator, why). ``board_speed``:
    "profile" holds QEMU until the guest's core is the profile's (``vmspeed``), "free" leaves it.
    ``shutdowns``: the board shuts itself down in each of these modes after its report, every cycle
    (``vmlayer``); none: the power is cut."""
    from shoal import hostfacts
    from shoal.runs.store import Run

    catalog = unitconfig.load()
    for c in configs:
        catalog.config(c)
    img = vmimage.require()
    profile = boot.load(profile_name)
    spec, accel, why = spec_for(img)
    disks = {c: vmconfig.disk_for(img, catalog, c, spec, on_note=on_note) for c in configs}
    # The testbed's own files (the boot monitor, the shutdown hook) on a layer over each.
    disks = {c: vmlayer.disk_for(img, d, c, spec, on_note) for c, d in disks.items()}
    ends = {c: catalog.end_unit(catalog.config(c), {"bluetooth.service"}) for c in configs}
    group, placement = vmboard.board_group()
    on_note(placement)
    try:
        speed, program = board_speed_for(board_speed, profile_name, img, spec, group, on_note)
    except BaseException:
        vmboard.release_group(group)
        raise
    record = Run.create("pallex-cycle", argv, out, configs=configs, cycles=cycles, accel=accel, accel_reason=why,
                        cpu_placement=placement,
                        board={"cores": spec.cores, "memory_B": spec.memory_B, "read_Bps": spec.read_Bps,
                               "write_Bps": spec.write_Bps, "card": spec.card or "profile"},
                        board_speed=speed.describe() if speed else {"verdict": "free", "asked": board_speed},
                        shutdowns=list(shutdowns) or ["cut"],
                        profile=profile.describe(), image=str(img.disk), host=hostfacts.collect(),
                        energy="modelled from the boot profile's phase powers (no meter on a virtual board)")
    if speed:
        record.append("board_speed", [_speed_row("before", s, speed.target) for s in speed.steps])

    monitored: list[dict] = []

    def keep(row: dict) -> None:
        kept = {k: v for k, v in row.items() if k not in ("blame", "critical_chain", "analyze", "monitor")}
        kept["analyze"] = json.dumps(row.get("analyze"))
        kept["failed_units"] = " ".join(row.get("failed_units", []))
        record.append("cycles", [kept], testbed.CYCLE_COLUMNS)
        series = [{"config": row["config"], "shutdown": row["shutdown"], "cycle": row["cycle"], **r}
                  for r in row.get("monitor", [])]
        if series:
            record.append("monitor", series, bootmonitor.COLUMNS)
            monitored.extend(series)
        if row.get("ok"):
            name = f"{row['config']}{'' if row['shutdown'] == 'cut' else '-' + row['shutdown']}-{row['cycle']}"
            (record.path / f"blame-{name}.txt").write_text(row["blame"] + "\n")
            (record.path / f"critical-chain-{name}.txt").write_text(row["critical_chain"] + "\n")
        on_row(row)

    logs = record.path / "serial"
    logs.mkdir(exist_ok=True)
    after = None
    try:
        rows = testbed.run_cycles(configs, cycles, disks,
                                  lambda d, mode: vmboard.argv(img, spec, disk=d, cmdline=vmlayer.cmdline(mode)),
                                  ends, profile, timeout_s, keep, logs, group, tuple(shutdowns) or (None,))
        if speed:
            on_note("measuring the board's core again, after the cycles")
            try:
                after = vmspeed.check(img, spec, speed, program, group)
                record.append("board_speed", [_speed_row("after", after, speed.target)])
            except ShoalError as exc:   # the cycles are kept whatever this last probe does
                on_note(f"the board's speed after the cycles is not known: {exc}")
    finally:
        vmboard.release_group(group)
    summary = testbed.summary(rows)
    record.rewrite("summary", summary, list(summary[0].keys()))
    figure = _resources_figure(monitored, summary, record.path)
    reduction = testbed.reduction(rows)
    shut = testbed.shutdowns(rows, profile)
    failed = sum(not r["ok"] or r.get("shutdown_ok") is False for r in rows)
    record.finish("complete" if not failed else "problems", reduction=reduction, failed=failed,
                  board_speed_after=after.speed if after else None, shutdown_modes=shut)
    return {"summary": summary, "reduction": reduction, "accel": accel, "spec": spec, "failed": failed,
            "run": record.path, "board_speed": speed, "board_speed_after": after, "shutdowns": shut,
            "figure": figure}


def _resources_figure(monitored: list[dict], summary: list[dict], where):
    """Figs. 8/9 from the cycles' monitor samples (None: no cycle printed any)."""
    if not monitored:
        return None
    import matplotlib.pyplot as plt

    t_usi = {s["config"]: s["T_usi_s_median"] for s in summary if s.get("T_usi_s_median") is not None}
    fig = bootmonitor.figure(monitored, t_usi)
    path = where / "boot-resources.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def board_speed_for(asked: str, profile_name: str, img, spec, group, on_note):
    """The board's speed found and held (``vmspeed.calibrate``), or (None, None) when asked free."""
    if asked == "free":
        on_note("board speed: free (--board-speed free): QEMU's guest runs as fast as this host lets it")
        return None, None
    from shoal import profiles
    from shoal.mpi import build

    device = profiles.load()[profile_name]
    program = build.build_host("guestprobe")
    on_note("measuring the board's core inside the guest (one boot into shoal-guest-probe)")
    speed = vmspeed.calibrate(img, spec, device, program, group, on_note)
    on_note(vmspeed.describe_verdict(speed))
    return speed, program


def _speed_row(when: str, step, target) -> dict:
    """One probe step as the run's board_speed table keeps it (speeds in reference cores)."""
    return {"when": when, "step": step.index, "quota_cpus": step.quota_cpus, "speed": step.speed,
            "target_speed": target.speed, "target_kernel": target.kernel, "qemu_cpus": step.qemu_cpus,
            "wall_s": step.wall_s, "guest_cores": step.copies,
            **{f"speed_{k}": v for k, v in sorted(step.by_kernel.items())}}
