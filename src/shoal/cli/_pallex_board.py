"""`shoal pallex vm|config|cycle`: the virtual board, seed 004's unit configurations and its testbed.

    shoal pallex vm build                       Debian 12 image (mmdebstrap), kernel and initrd, cached
    shoal pallex vm boot [--config EU]          one boot to the end of userspace, its phases
    shoal pallex vm shell [--config EU]         the board's serial console (root, no password)
    shoal pallex config show [CONFIG]           the paper's Appendix A units, class and Debian unit
    shoal pallex config diff CONFIG --root DIR | --vm      the systemctl commands CONFIG means there
    shoal pallex config apply CONFIG --root DIR | --vm [--yes]   dry run unless --yes; writes a record
    shoal pallex config undo --root DIR | --vm CONFIG      back to the state before, from the record
    shoal pallex cycle --configs EU,ALLU --cycles N        Algorithm 1: power on, signal, power off
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from shoal import render
from shoal.errors import ShoalError
from shoal.inputs import options as typed
from shoal.inputs.grammar import Bounds


def add(sub) -> None:
    vm = sub.add_parser("vm", help="the virtual board: a Debian 12 image booted under QEMU")
    vsub = vm.add_subparsers(dest="vm_command", metavar="ACTION")
    vm.set_defaults(func=lambda args: (vm.print_help(), 0)[1])
    b = vsub.add_parser("build", help="build the image (mmdebstrap) and cache it with its kernel and initrd")
    b.add_argument("--force", action="store_true", help="build again even if cached")
    b.set_defaults(func=cmd_vm_build)
    for name, helptext, func in (("boot", "boot once to the end of userspace and show the phases", cmd_vm_boot),
                                 ("shell", "the board's serial console (Ctrl-A X quits)", cmd_vm_shell)):
        p = vsub.add_parser(name, help=helptext)
        _board_args(p)
        p.add_argument("--config", default="ALLU", help="unit configuration to boot (default ALLU: as shipped)")
        if name == "boot":
            _speed_arg(p)
            p.add_argument("--timeout", type=typed.number(Bounds(1, 3600)), default=120.0,
                           help="seconds to wait for the completion signal (default 120)")
            p.add_argument("--json", action="store_true", help="print the boot as JSON")
            p.add_argument("--log-dir", default=None, type=typed.out_dir,
                           help="keep the serial console's log here (serial-CONFIG-0.log)")
        else:
            p.add_argument("--write", action="store_true", help="keep what the shell changes on the disk")
        p.set_defaults(func=func)

    cf = sub.add_parser("config", help="the duty-cycling paper's unit configurations (EU, NET1, ..., ALLU)")
    csub = cf.add_subparsers(dest="config_command", metavar="ACTION")
    cf.set_defaults(func=lambda args: (cf.print_help(), 0)[1])
    s = csub.add_parser("show", help="Appendix A's units, or what one configuration keeps")
    s.add_argument("config", nargs="?", default=None)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_config_show)
    for name, helptext in (("diff", "the systemctl commands a configuration means for a root"),
                           ("apply", "apply a configuration (a dry run unless --yes)")):
        p = csub.add_parser(name, help=helptext)
        p.add_argument("config")
        _target_args(p)
        if name == "apply":
            p.add_argument("--yes", action="store_true", help="make the change (default: show it only)")
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=cmd_config_apply if name == "apply" else cmd_config_diff)
    u = csub.add_parser("undo", help="undo an applied configuration from its record")
    u.add_argument("config", nargs="?", default=None, help="with --vm: the configuration whose overlay to drop")
    _target_args(u)
    u.set_defaults(func=cmd_config_undo)

    c = sub.add_parser("cycle", help="the duty-cycling paper's testbed on the virtual board: boot cycles per configuration")
    _board_args(c)
    c.add_argument("--configs", default="EU,ALLU", help="comma list of configurations (default EU,ALLU)")
    c.add_argument("--cycles", type=typed.whole(1, 1000), default=10, help="cycles per configuration (default 10)")
    c.add_argument("--timeout", type=typed.number(Bounds(1, 3600)), default=120.0,
                   help="seconds from power-on to the completion signal before a cycle counts as failed (default 120)")
    _speed_arg(c)
    c.add_argument("--shutdown", default=None, type=_shutdown_modes, metavar="MODES",
                   help="after each boot the board shuts itself down, once per mode: graceful, forced, "
                        "forced-forced (comma list; default: the power is cut)")
    c.add_argument("--out", default=None, type=typed.out_dir, help="run directory (default runs/pallex-cycle-...)")
    c.add_argument("--json", action="store_true", help="print the summary as JSON")
    c.set_defaults(func=cmd_cycle)


def _board_args(p) -> None:
    p.add_argument("--profile", default="rpi3", help="the board's device and boot profile (default rpi3)")
    p.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto",
                   help="auto: KVM where a guest really runs on it, else TCG (default)")
    p.add_argument("--card", choices=("u1", "u3"), default=None,
                   help="the SD card's UHS speed class: u1 writes at its 10 MB/s minimum, u3 at its "
                        "30 MB/s held to the 25 MB/s bus (default: the boot profile's card, u1)")


def _speed_arg(p) -> None:
    p.add_argument("--board-speed", choices=("profile", "free"), default="profile",
                   help="profile: measure the guest's core inside it and hold QEMU's CPU until it is as fast "
                        "as the profile's (default); free: leave QEMU unheld")


def _shutdown_modes(text: str) -> tuple[str, ...]:
    from shoal.pallex import vmlayer

    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    wrong = [m for m in modes if m not in vmlayer.MODES]
    if wrong or not modes:
        raise argparse.ArgumentTypeError(f"{', '.join(wrong) or text!r}: give shutdown modes from "
                                         f"{', '.join(vmlayer.MODES)} (comma list)")
    return tuple(dict.fromkeys(modes))


def _target_args(p) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--root", default=None, help="an offline root file system (a board's card, mounted or unpacked)")
    g.add_argument("--vm", action="store_true", help="the virtual board's image")


# -- the board -------------------------------------------------------------------------
def _spec(img, profile_name: str, asked_accel: str, card: str | None = None):
    """The virtual board of device profile ``profile_name``: its cores and memory, its card's
    rates (``card``, else its boot profile's), and QEMU's accelerator (``asked_accel``)."""
    from shoal import profiles as device_profiles
    from shoal.pallex import boot, vmboard

    devices = device_profiles.load()
    if profile_name not in devices:
        raise ShoalError(f"--profile {profile_name!r}: no such device (known: {', '.join(sorted(devices))})")
    device = devices[profile_name]
    if not device.memory_B:
        raise ShoalError(f"--profile {profile_name}: the device profile gives no memory_B; add it to the profile")
    try:
        profile = boot.load(profile_name)
        bus_Bps, profile_write_Bps = profile.storage_read_Bps or None, profile.storage_write_Bps or None
    except ShoalError:
        bus_Bps = profile_write_Bps = None
    read_Bps, write_Bps = vmboard.card_rates(card, bus_Bps, profile_write_Bps)
    spec = vmboard.BoardSpec(device.cores, int(device.memory_B), read_Bps, write_Bps=write_Bps, card=card)
    accel, why = vmboard.choose_accel(img, spec, asked_accel)
    held = [f"{render.bandwidth(rate)} {way}" for rate, way in ((read_Bps, "read"), (write_Bps, "write")) if rate]
    said = f"{card or 'card'} {', '.join(held)}" if held else "card unthrottled"
    print(f"virtual board as {profile_name}: {device.cores} core(s), {render.byte_size(device.memory_B)}, {said}; "
          f"QEMU {accel.upper()} ({why})", file=sys.stderr)
    from dataclasses import replace

    return replace(spec, accel=accel), accel, why


def cmd_vm_build(args) -> int:
    from shoal.pallex import vmimage

    print(f"building the virtual board's image with mmdebstrap ({len(vmimage.PACKAGES)} packages; minutes)",
          file=sys.stderr)
    img, took = vmimage.build(force=args.force)
    size = img.disk.stat().st_blocks * 512
    state = f"built in {took:.0f} s" if took else "cached"
    print(f"image {img.disk} ({size / 1e6:.0f} MB used), kernel {img.kernel.name}, initrd {img.initrd.name}: {state}")
    return 0


def cmd_vm_boot(args) -> int:
    from shoal.pallex import boot, cycles, testbed, unitconfig, vmboard, vmconfig, vmimage

    img = vmimage.require()
    catalog = unitconfig.load()
    catalog.config(args.config)
    spec, accel, why = _spec(img, args.profile, args.accel, args.card)
    disk = vmconfig.disk_for(img, catalog, args.config, spec, on_note=lambda n: print(n, file=sys.stderr))
    group, note = vmboard.board_group()
    print(note, file=sys.stderr)
    try:
        speed, _ = cycles.board_speed_for(args.board_speed, args.profile, img, spec, group,
                                          lambda n: print(n, file=sys.stderr))
        row = testbed.one_cycle(vmboard.argv(img, spec, disk=disk), testbed.CycleSpec(args.config, 0, args.timeout),
                                catalog.end_unit(catalog.config(args.config), {"bluetooth.service"}),
                                boot.load(args.profile), log_dir=_log_dir(args.log_dir), group=group)
    finally:
        vmboard.release_group(group)
    row.update(accel=accel, accel_reason=why, board_speed=speed.describe() if speed else None)
    if args.json:
        print(json.dumps(row))
    elif row["ok"]:
        print(f"{args.config} on the virtual board ({accel}): signal {render.seconds(row['signal_s'])} after power-on; "
              f"T_btl {render.seconds(row['T_btl_s'])}, T_knl {render.seconds(row['T_knl_s'])}, "
              f"T_usi {render.seconds(row['T_usi_s'])} (to {row['end_unit']}); "
              f"E {render.joules(row['E_J'])} modelled")
        if row.get("note"):
            print(row["note"])
    else:
        print(f"{args.config}: boot failed: {row['reason']}")
    return 0 if row["ok"] else 1


def _log_dir(path: str | None):
    from pathlib import Path

    if path is None:
        return None
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


def cmd_vm_shell(args) -> int:
    from shoal.pallex import unitconfig, vmboard, vmconfig, vmimage

    img = vmimage.require()
    catalog = unitconfig.load()
    spec, _, _ = _spec(img, args.profile, args.accel, args.card)
    disk = vmconfig.disk_for(img, catalog, args.config, spec, on_note=lambda n: print(n, file=sys.stderr))
    command = vmboard.argv(img, spec, disk=disk, snapshot=not args.write, interactive=True,
                           cmdline=vmboard.SHELL_CMDLINE)
    print("serial console: log in as root (no password); Ctrl-A X powers the board off", file=sys.stderr)
    os.execv(command[0], command)
    return 0


# -- configurations ----------------------------------------------------------------------
def cmd_config_show(args) -> int:
    from shoal.pallex import unitconfig

    catalog = unitconfig.load()
    if args.config:
        c = catalog.config(args.config)
        units = [u for u in catalog.units.values() if "*" in c.keep or u.seed in c.keep or u.cls == "EU"]
    else:
        c, units = None, list(catalog.units.values())
    if args.json:
        print(json.dumps({"config": c.name if c else None, "keep": list(c.keep) if c else None,
                          "end": c.end if c else None,
                          "units": [{"unit": u.seed, "class": u.cls, "debian": u.debian or None,
                                     "missing": u.missing or None, "mask": u.mask, "source": u.source} for u in units]}))
        return 0
    from rich.console import Console

    title = (f"{c.name}: EU plus {', '.join(c.keep) or 'nothing'}; userspace ends at {c.end} ({c.source})"
             if c else "seed 004 Appendix A: units, class, Debian 12 unit")
    t = render.narrow_table(["unit (seed)", "class", "Debian 12"], left=("unit (seed)", "class", "Debian 12"), title=title)
    for u in units:
        t.add_row(u.seed, u.cls, u.debian or f"- ({u.missing})")
    Console().print(t)
    if not c:
        print("configurations: " + ", ".join(f"{x.name} (+{', '.join(x.keep) or 'none'})" for x in catalog.configs.values()))
    return 0


def _plan(args):
    from shoal.pallex import unitconfig, vmconfig, vmimage

    catalog = unitconfig.load()
    if args.vm:
        img = vmimage.require()
        return catalog, vmconfig.plan(img, catalog, args.config), "/"
    root = unitconfig.check_root(args.root)
    return catalog, unitconfig.plan(catalog, args.config, unitconfig.unit_files(root)), str(root)


def _print_plan(p, root: str) -> None:
    for cmd in p.commands(root):
        print(" ".join(cmd))
    if not p.actions:
        print(f"# {p.config}: nothing to change")
    for m in p.not_available:
        print(f"# not available: {m['unit']}: {m['reason']}")


def cmd_config_diff(args) -> int:
    _, p, root = _plan(args)
    if args.json:
        print(json.dumps(p.to_json()))
    else:
        _print_plan(p, root)
    return 0


def cmd_config_apply(args) -> int:
    from shoal.pallex import unitconfig, vmconfig, vmimage

    catalog, p, root = _plan(args)
    if not args.yes:
        if args.json:
            print(json.dumps({"dry_run": True, **p.to_json()}))
        else:
            _print_plan(p, root)
            print("# dry run: add --yes to apply")
        return 0
    if args.vm:
        img = vmimage.require()
        spec, _, _ = _spec(img, "rpi3", "auto")
        record = vmconfig.apply(img, catalog, args.config, spec)
        where = f"{vmconfig.record_path(img, args.config)}"
    else:
        record = unitconfig.apply(catalog, args.config, args.root)
        where = f"{args.root}/etc/{unitconfig.RECORD_NAME}"
    if args.json:
        print(json.dumps(record))
    else:
        change = record["links"]
        print(f"applied {args.config}: {len(change['removed'])} unit link(s) removed, {len(change['added'])} added; "
              f"record {where}")
    return 0


def cmd_config_undo(args) -> int:
    from shoal.pallex import unitconfig, vmconfig, vmimage

    if args.vm:
        if not args.config:
            raise ShoalError("config undo --vm: name the configuration whose overlay to drop (e.g. EU)")
        had = vmconfig.undo(vmimage.require(), args.config)
        print(f"{args.config}: overlay dropped; the image is as built" if had else f"{args.config}: nothing applied")
        return 0
    record = unitconfig.undo(args.root)
    change = record["links"]
    print(f"undid {record['config']}: {len(change['added'])} link(s) removed, {len(change['removed'])} restored")
    return 0


# -- the testbed -------------------------------------------------------------------------
def cmd_cycle(args) -> int:
    from shoal.pallex import cycles, vmspeed

    configs = [c for c in args.configs.split(",") if c]
    spec_for = lambda img: _spec(img, args.profile, args.accel, args.card)  # noqa: E731

    def on_row(row: dict) -> None:
        state = (f"T_btl+knl {render.seconds(row['T_btl_knl_s'])}, T_usi {render.seconds(row['T_usi_s'])}"
                 if row.get("ok") else f"FAILED: {row['reason']}")
        if row.get("shutdown_ok"):
            state += f"; {row['shutdown']} shutdown {render.seconds(row['T_sdn_s'])}"
        elif row.get("shutdown_ok") is False:
            state += f"; SHUTDOWN FAILED: {row['shutdown_reason']}"
        print(f"cycle {row['cycle'] + 1}/{args.cycles} {row['config']}: {state}", file=sys.stderr)

    result = cycles.run(configs, args.cycles, args.profile, spec_for, args.timeout, args.out,
                        ["shoal", "pallex", "cycle", *sys.argv[3:]], on_row,
                        on_note=lambda n: print(n, file=sys.stderr), board_speed=args.board_speed,
                        shutdowns=args.shutdown or ())
    summary, reduction, accel, spec, failed = (result["summary"], result["reduction"], result["accel"],
                                               result["spec"], result["failed"])
    record_path = result["run"]
    if args.json:
        speed, after = result["board_speed"], result["board_speed_after"]
        print(json.dumps({"summary": summary, "reduction": reduction, "accel": accel, "run": str(record_path),
                          "shutdowns": result["shutdowns"],
                          "resources_figure": str(result["figure"]) if result["figure"] else None,
                          "board_speed": speed.describe() if speed else None,
                          "board_speed_after": after.speed if after else None}))
        return 0 if not failed else 1
    from rich.console import Console

    timed = bool(args.shutdown)   # then one row per configuration and shutdown, and a table of the shutdowns
    t = render.narrow_table(["config", *(["shutdown"] if timed else []), "cycles", "failed", "T_btl+knl", "T_usi",
                             "E_usi\n(modelled)"], left=("config", "shutdown"),
                            title=f"virtual board ({accel}, {spec.cores} cores) as {args.profile}: median (min..max)")

    def cell(s, key, fmt):
        if s[f"{key}_median"] is None:
            return "-"
        return f"{fmt(s[f'{key}_median'])} ({fmt(s[f'{key}_min'])}..{fmt(s[f'{key}_max'])})"

    for s in summary:
        t.add_row(s["config"], *([s["shutdown"]] if timed else []), str(s["cycles"]),
                  str(s["failed"] + s["shutdown_failed"]), cell(s, "T_btl_knl_s", render.seconds),
                  cell(s, "T_usi_s", render.seconds), cell(s, "E_usi_J", render.joules))
    tables = [t]
    shut = result["shutdowns"]
    if timed:
        sd = render.narrow_table(["config", "shutdown", "T_sdn", "E_sdn (modelled)", "of graceful"],
                                 left=("config", "shutdown"), title="the board's own shutdown: median (min..max)")
        for s in summary:
            mode = (shut or {}).get("configs", {}).get(s["config"], {}).get("modes", {}).get(s["shutdown"], {})
            sd.add_row(s["config"], s["shutdown"], cell(s, "T_sdn_s", render.seconds), cell(s, "E_sdn_J", render.joules),
                       render.percent(mode.get("against_graceful")))
        tables.append(sd)
    console = Console()
    for table in tables:
        console.print(table)
    if reduction:
        console.print(f"EU against ALLU: T_usi {render.percent(reduction['T_usi_reduction'])} shorter, E_usi "
                      f"{render.percent(reduction['E_usi_reduction'])} less (seed 004, RPi3: 43.62 % less energy)",
                      highlight=False)
    for config, c in (shut or {}).get("configs", {}).items():
        against = ", ".join(f"{m} {render.percent(x['against_graceful'])}" for m, x in c["modes"].items()
                            if x["against_graceful"] is not None and m != "graceful")
        order = "forced-forced < forced < graceful" if c["ordered"] else "NOT forced-forced < forced < graceful"
        console.print(f"{config} shutdown: {order}" + (f"; of graceful's time: {against}" if against else ""),
                      highlight=False)
    if shut and shut["eu_graceful_E_reduction"] is not None:
        seed = shut["seed_eu_graceful_E_reduction"]
        console.print(f"EU against ALLU, graceful shutdown: {render.percent(shut['eu_graceful_E_reduction'])} less "
                      f"energy (modelled)" + (f"; seed 004 §V-A: {render.percent(seed)} less" if seed else ""),
                      highlight=False)
    for s in summary:  # the monitor's reading of userspace initialisation (seed 004 Figs. 8/9)
        if s.get("usi_cpu_busy_median") is not None:
            console.print(f"{s['config']} during T_usi (median): CPU {render.percent(s['usi_cpu_busy_median'])} busy, "
                          f"{render.byte_size(s['usi_read_B_median'])} read, {render.byte_size(s['usi_write_B_median'])} "
                          f"written, memory in use up to {render.byte_size(s['usi_mem_peak_B_median'])}", highlight=False)
    if result["figure"]:
        console.print(f"boot resources (Figs. 8/9): {result['figure']}", highlight=False)
    speed, after = result["board_speed"], result["board_speed_after"]
    if speed:
        console.print(vmspeed.describe_verdict(speed) + (f"; after the cycles {after.speed:.3f}" if after else ""),
                      highlight=False)
    console.print(f"run: {record_path}", highlight=False)
    return 0 if not failed else 1
