"""``shoal pallex cycle`` as a library call: the testbed's cycles on the virtual board, kept as a run
(``cycles`` appended as each ends, serial logs, blame and critical-chain per cycle, ``summary``)."""

from __future__ import annotations

import json
from typing import Callable

from shoal.pallex import boot, testbed, unitconfig, vmboard, vmconfig, vmimage


def run(configs: list[str], cycles: int, profile_name: str, spec_for: Callable, timeout_s: float, out,
        argv: list[str], on_row: Callable[[dict], None], on_note: Callable[[str], None]) -> dict:
    """``spec_for(image)`` -> (BoardSpec with its accelerator, accelerator, why)."""
    from shoal import hostfacts
    from shoal.runs.store import Run

    catalog = unitconfig.load()
    for c in configs:
        catalog.config(c)
    img = vmimage.require()
    profile = boot.load(profile_name)
    spec, accel, why = spec_for(img)
    disks = {c: vmconfig.disk_for(img, catalog, c, spec, on_note=on_note) for c in configs}
    ends = {c: catalog.end_unit(catalog.config(c), {"bluetooth.service"}) for c in configs}
    group, placement = vmboard.board_group()
    on_note(placement)
    record = Run.create("pallex-cycle", argv, out, configs=configs, cycles=cycles, accel=accel, accel_reason=why,
                        cpu_placement=placement,
                        board={"cores": spec.cores, "memory_B": spec.memory_B, "read_Bps": spec.read_Bps},
                        profile=profile.describe(), image=str(img.disk), host=hostfacts.collect(),
                        energy="modelled from the boot profile's phase powers (no meter on a virtual board)")

    def keep(row: dict) -> None:
        kept = {k: v for k, v in row.items() if k not in ("blame", "critical_chain", "analyze")}
        kept["analyze"] = json.dumps(row.get("analyze"))
        kept["failed_units"] = " ".join(row.get("failed_units", []))
        record.append("cycles", [kept])
        if row.get("ok"):
            (record.path / f"blame-{row['config']}-{row['cycle']}.txt").write_text(row["blame"] + "\n")
            (record.path / f"critical-chain-{row['config']}-{row['cycle']}.txt").write_text(row["critical_chain"] + "\n")
        on_row(row)

    logs = record.path / "serial"
    logs.mkdir(exist_ok=True)
    try:
        rows = testbed.run_cycles(configs, cycles, disks, lambda d: vmboard.argv(img, spec, disk=d), ends,
                                  profile, timeout_s, keep, logs, group)
    finally:
        vmboard.release_group(group)
    summary = testbed.summary(rows)
    record.rewrite("summary", summary, list(summary[0].keys()))
    reduction = testbed.reduction(rows)
    failed = sum(not r["ok"] for r in rows)
    record.finish("complete" if not failed else "problems", reduction=reduction, failed=failed)
    return {"summary": summary, "reduction": reduction, "accel": accel, "spec": spec, "failed": failed,
            "run": record.path}
