"""`shoal pallex`: stages that run while a duty-cycled device boots, after "Profiling
and Improving the Duty-Cycling Performance of Linux-based IoT Devices".

    shoal pallex check STAGES                 check a stage file (or a scenario: ic ice icc icu1 icu2 icu3)
    shoal pallex units STAGES --out DIR       systemd units, verified with systemd-analyze
    shoal pallex run STAGES [--profile rpi3]  run the stages here on the profile's boot timeline
    shoal pallex lifetime [--profile rpi3]    battery lifetime (eq. 3) and the paper's tables checked
    shoal pallex lab [--profile rpi3]         the four scenarios, baseline against Pallex
    shoal pallex lab --vm --scenarios ic,icc  ... and started by a real systemd on the virtual board
    shoal pallex profile [--from DIR]         a boot profile from systemd-analyze and a meter log
    shoal pallex vm build|boot|shell          the virtual board: Debian 12 under QEMU
    shoal pallex config show|diff|apply|undo  the paper's unit configurations (EU, ..., ALLU)
    shoal pallex cycle --configs EU,ALLU      the testbed: boot cycles on the virtual board
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from shoal import render
from shoal.cli._where import POWER_SPEC
from shoal.errors import ShoalError
from shoal.inputs import options as typed
from shoal.inputs.grammar import NON_NEGATIVE, POSITIVE, Bounds

ORDER = 60


def _params(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ShoalError(f"--param {item!r}: use NAME=VALUE")
        out[key] = value
    return out


def _rates(text: str) -> list[float]:
    try:
        if ".." in text:
            lo, hi = (float(v) for v in text.split(".."))
            return [float(n) for n in range(int(lo), int(hi) + 1)]
        return [float(v) for v in text.split(",") if v]
    except ValueError:
        raise ShoalError(f"--rates {text!r}: give a list (1,12,60) or a range (1..60) of cycles per hour") from None


def register(subparsers) -> None:
    p = subparsers.add_parser("pallex", help="stages that run while a duty-cycled device boots ('Profiling and "
                              "Improving the Duty-Cycling Performance of Linux-based IoT Devices')",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="pallex_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])

    c = sub.add_parser("check", help="check a stage file")
    c.add_argument("stages", help="the stage file (TOML)")
    c.add_argument("--json", action="store_true", help="print the checked DAG as JSON")
    c.set_defaults(func=cmd_check)

    u = sub.add_parser("units", help="generate systemd units for a stage file")
    u.add_argument("stages", help="the stage file (TOML)")
    u.add_argument("--out", required=True, type=typed.out_dir, help="directory for the unit files")
    u.add_argument("--python", default=None, help="Python for {python} in commands (default: this one)")
    u.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a value for {NAME} in the stage commands (repeatable)")
    u.add_argument("--socket-dir", default="/run/pallex",
                   help="where the .socket units put the data sockets (default /run/pallex)")
    u.add_argument("--record", default=None, help="the done/deadline services also append to this file")
    u.add_argument("--no-verify", action="store_true", help="skip systemd-analyze verify")
    u.add_argument("--root", default=None, type=typed.out_dir, help="also install into this root with systemctl --root and enable")
    u.set_defaults(func=cmd_units)

    r = sub.add_parser("run", help="run a stage file here on a boot profile's timeline")
    r.add_argument("stages", help="the stage file (TOML)")
    r.add_argument("--profile", default="rpi3", help="boot profile: a device (rpi3, rpi0w) or a file")
    r.add_argument("--mode", choices=("pallex", "baseline"), default="pallex",
                   help="pallex: stages start during boot; baseline: after userspace (default pallex)")
    r.add_argument("--eager", action="store_true", help="start receivers when their units are ready")
    r.add_argument("--time-scale", type=typed.number(Bounds(0, 100, lo_open=True)), default=1.0, help="multiply the profile's times (e.g. 0.2)")
    r.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a value for {NAME} in the stage commands (repeatable)")
    r.add_argument("--power", default="auto", metavar="SPEC", type=POWER_SPEC,
                   help="energy of this machine's run with shoal.power (default auto); 'none' to skip")
    r.add_argument("--out", default=None, type=typed.out_dir, help="run directory (default runs/pallex-run-...)")
    r.add_argument("--json", action="store_true", help="print the cycle as JSON")
    r.set_defaults(func=cmd_run)

    lt = sub.add_parser("lifetime", help="battery lifetime (the duty-cycling paper's eq. 3) per unit configuration")
    lt.add_argument("--profile", default="rpi3", help="boot profile: a device (rpi3, rpi0w) or a file")
    _battery_args(lt)
    lt.add_argument("--plot", default=None, metavar="DIR", type=typed.out_dir, help="write the lifetime figure here")
    lt.add_argument("--json", action="store_true", help="print the lifetimes as JSON")
    lt.set_defaults(func=cmd_lifetime)

    lb = sub.add_parser("lab", help="the duty-cycling paper's scenarios, baseline against Pallex")
    lb.add_argument("--profile", default="rpi3", help="boot profile: a device (rpi3, rpi0w) or a file")
    lb.add_argument("--scenarios", default="ic,ice,icc,icu1,icu2,icu3",
                    help="comma list of ic, ice, icc, icu1, icu2, icu3 (default: all)")
    lb.add_argument("--rounds", type=typed.whole(1, 1000), default=3,
                    help="rounds, baseline and Pallex interleaved (default 3)")
    lb.add_argument("--quick", action="store_true", help="one round, boot timeline at 0.3x")
    lb.add_argument("--time-scale", type=typed.number(Bounds(0, 100, lo_open=True)), default=None,
                    help="multiply the boot profile's times here (default 1; --quick 0.3)")
    lb.add_argument("--host-speed", type=typed.number(Bounds(0, 100, lo_open=True)), default=None,
                    help="this machine's core in reference cores (default: measured on the device "
                         "profile's kernel and cached per host)")
    lb.add_argument("--link", default="wifi-n",
                    help="link the uploads cross on the device (default wifi-n: the duty-cycling paper uploads over Wi-Fi)")
    _battery_args(lb)
    lb.add_argument("--vm", action="store_true",
                    help="also install each scenario's units on the virtual board and boot it, baseline and Pallex, "
                         "--rounds cycles each (build it first: shoal pallex vm build)")
    lb.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto",
                    help="with --vm: auto: KVM where a guest really runs on it, else TCG (default)")
    lb.add_argument("--board-speed", choices=("profile", "free"), default="profile",
                    help="with --vm: profile holds QEMU until the guest's core is the profile's (default); free: unheld")
    lb.add_argument("--vm-timeout", type=typed.number(Bounds(1, 3600)), default=None,
                    help="with --vm: seconds from power-on to the board's power-off before a cycle is cut "
                         "(default 240, or 60 more than --vm-deadline)")
    lb.add_argument("--vm-deadline", type=typed.number(Bounds(1, 3600)), default=None,
                    help="with --vm: the applications' deadline from the start of userspace on the board (default: "
                         "the stage files', 60 s; a board slower than the device needs more)")
    lb.add_argument("--out", default=None, type=typed.out_dir, help="run directory (default runs/pallex-lab-...)")
    lb.add_argument("--json", action="store_true", help="print the summary as JSON")
    lb.set_defaults(func=cmd_lab)

    pr = sub.add_parser("profile", help="a boot profile from systemd-analyze (and a meter log)")
    pr.add_argument("--from", dest="source", default=None, metavar="DIR",
                    help="saved outputs (time.txt, blame.txt, critical-chain.txt) instead of this machine's")
    pr.add_argument("--device", default="device", help="the profile's device name (default device)")
    pr.add_argument("--meter-log", default=None, metavar="CSV",
                    help="a meter's log covering the boot (wall-clock times, watts): energy per phase")
    pr.add_argument("--bootloader-s", type=typed.number(Bounds(0, 600)), default=None,
                    help="firmware+loader seconds where systemd-analyze does not report them")
    pr.add_argument("--config", default="EU", help="name of this unit configuration (default EU)")
    pr.add_argument("--out", default=None, metavar="FILE", type=typed.out_dir, help="write the [boot.DEVICE] table here")
    pr.add_argument("--json", action="store_true", help="print the profile as JSON")
    pr.set_defaults(func=cmd_profile)

    from shoal.cli import _pallex_board

    _pallex_board.add(sub)


def _battery_args(p) -> None:
    p.add_argument("--capacity-mAh", type=typed.number(POSITIVE), default=2400.0, help="default 2400 (the duty-cycling paper)")
    p.add_argument("--voltage", type=typed.number(POSITIVE), default=5.0, help="default 5 V (the duty-cycling paper)")
    p.add_argument("--usable", type=typed.number(Bounds(0, 1, lo_open=True)), default=1.0, help="usable fraction of the capacity (default 1)")
    p.add_argument("--sleep-W", type=typed.number(NON_NEGATIVE), default=0.0, help="draw while off (default 0, as eq. 3)")
    p.add_argument("--rates", default="1,2,5,10,12,20,30,40,50,60", help="cycles per hour")


# -- check / units -------------------------------------------------------------------
def cmd_check(args) -> int:
    from shoal.pallex import stagefile

    app = stagefile.resolve(args.stages)
    info = {"app": app.name, "stages": app.order, "sinks": app.sinks(),
            "edges": [{"from": e.src, "to": e.dst, "bytes": e.bytes} for e in app.edges],
            "units": app.units(), "deadline_s": app.deadline_s}
    if args.json:
        print(json.dumps(info))
    else:
        print(f"{app.path}: ok, app {app.name}: {len(app.stages)} stage(s) {', '.join(app.order)}; "
              f"{len(app.edges)} data edge(s); sinks {', '.join(app.sinks())}; deadline {app.deadline_s:g} s")
    return 0


def cmd_units(args) -> int:
    from shoal.pallex import stagefile, units

    app = stagefile.resolve(args.stages)
    texts = units.generate(app, python=args.python, socket_dir=args.socket_dir, record=args.record,
                           params=_params(args.param))
    paths = units.write(texts, Path(args.out))
    print(f"wrote {len(paths)} units to {args.out}: {', '.join(p.name for p in paths)}")
    code = 0
    if not args.no_verify:
        verdict = units.verify(paths)
        for line in verdict.warnings:
            print(f"systemd-analyze: {line}", file=sys.stderr)
        print(f"systemd-analyze verify: exit {verdict.returncode}, {len(verdict.warnings)} warning(s)")
        code = 0 if verdict.ok else 1
    if args.root:
        units.install(Path(args.out), Path(args.root), app)
        print(f"installed into {args.root} and enabled {units.prefix(app)}.target")
    return code


# -- run -------------------------------------------------------------------------------
def cmd_run(args) -> int:
    from shoal.pallex import run as pallex_run

    request = pallex_run.CycleRequest(stages=args.stages, profile=args.profile, mode=args.mode, eager=args.eager,
                                      time_scale=args.time_scale, params=_params(args.param), power=args.power,
                                      out=args.out)
    cycle = pallex_run.run(request, ["shoal", "pallex", "run", args.stages],
                           on_note=lambda note: print(note, file=sys.stderr))
    if args.json:
        print(json.dumps(cycle.to_json()))
    else:
        _render_cycle(cycle)
    return 0 if cycle.ok else 1


def _render_cycle(cycle) -> None:
    result = cycle.result
    table = render.narrow_table(["stage", "status", "ready", "data", "start", "end", "CPU"], left=("stage", "status"),
                                title=f"{cycle.app.name} ({cycle.mode}) on {cycle.profile.device}: {result.outcome} "
                                      f"at {render.seconds(result.end_s)}")
    for r in result.stages.values():
        table.add_row(r.name, r.status, *(render.seconds(v) if v is not None else "-" for v in
                                          (r.ready_s, r.trigger_s, r.start_s, r.end_s, r.cpu_s)))
    from rich.console import Console

    console = Console()
    console.print(table)
    for e in result.edges:
        console.print(f"edge {e['from']} -> {e['to']}: {e['sent_bytes']} B sent, {e['received_bytes']} B "
                      f"received, {'identical' if e['identical'] else 'NOT identical'}", highlight=False)
    for sink in cycle.upload_sinks:
        console.print(f"loopback upload sink {sink['url']}: {sink['uploads']} upload(s), {sink['bytes']} B",
                      highlight=False)
    for line in result.problems:
        console.print(f"problem: {line}", highlight=False)
    for e in cycle.energy or []:
        if e["energy_J"] is not None:
            console.print(f"energy here ({e['kind']}, {e['key']}): {render.joules(e['energy_J'])}", highlight=False)
    console.print(f"run: {cycle.run}", highlight=False)


# -- lifetime ---------------------------------------------------------------------------
def cmd_lifetime(args) -> int:
    from shoal.pallex import lifetimes

    rates = _rates(args.rates)
    out = lifetimes.run(args.profile, rates, capacity_mAh=args.capacity_mAh, voltage=args.voltage,
                        usable=args.usable, sleep_W=args.sleep_W, plot=args.plot)
    battery, rows, implied = out["battery_J"], out["boot_only"], out["seed_gains_implied"]
    if args.json:
        print(json.dumps(out))
        return 0
    from rich.console import Console

    console = Console()
    console.print(f"battery {render.joules(battery)} ({args.capacity_mAh:g} mAh at {args.voltage:g} V x "
                  f"{args.usable:g}), off-state draw {render.watts(args.sleep_W)}", highlight=False)
    shown = [n for n in rates if n in (1, 12, 60)] or rates[:3]
    table = render.narrow_table(["config", "cycle\nenergy", "cycle\ntime", *[f"at {n:g}/h" for n in shown]],
                                left=("config",), title=f"{out['profile']}: boot-only cycle (no application)")
    for r in rows:
        table.add_row(r["config"], render.joules(r["cycle_J"]), render.seconds(r["cycle_s"]),
                      *[f"{r[f'lifetime_h_at_{n:g}']:.1f} h" for n in shown])
    console.print(table)
    if implied:
        t2 = render.narrow_table(["scenario", "energy\ngain", "lifetime\ngain", "implied\nU/B"], left=("scenario",),
                                 title="seed 004's reported gains and the post-kernel energy they imply")
        for i in implied:
            t2.add_row(i["scenario"], render.percent(i["paper_energy_gain"]), render.percent(i["paper_lifetime_gain"]),
                       f"{i['implied_U_over_B']:.2f}")
        console.print(t2)
    for p in out["table_problems"]:
        console.print(f"seed 004 table: {p['cell']}: {p['problem']}", highlight=False)
    if "figure" in out:
        console.print(f"figure: {out['figure']}", highlight=False)
    return 0


# -- lab ---------------------------------------------------------------------------------
def cmd_lab(args) -> int:
    from shoal.cli import _pallex_board
    from shoal.pallex import lab

    request = lab.LabRequest(profile=args.profile, scenarios=tuple(s for s in args.scenarios.split(",") if s),
                             rounds=1 if args.quick else args.rounds,
                             time_scale=args.time_scale or (0.3 if args.quick else 1.0),
                             host_speed=args.host_speed, link=args.link, capacity_mAh=args.capacity_mAh,
                             voltage=args.voltage, usable=args.usable, sleep_W=args.sleep_W, out=args.out,
                             vm=args.vm, spec_for=lambda img: _pallex_board._spec(img, args.profile, args.accel),
                             board_speed=args.board_speed, vm_deadline_s=args.vm_deadline,
                             vm_timeout_s=args.vm_timeout or max(240.0, (args.vm_deadline or 0) + 60.0))
    if args.vm:
        from shoal.pallex import vmimage

        vmimage.require()   # before the host's rounds: no image, one line and nothing run
    result = lab.run(request, ["shoal", "pallex", "lab", *sys.argv[3:]],
                     on_scenario=lambda s, rounds: print(f"pallex lab: {s} ({rounds} round(s), baseline and pallex)",
                                                         file=sys.stderr),
                     on_note=lambda note: print(note, file=sys.stderr), on_vm_cycle=_print_vm_cycle)
    summary, order, problems = result.summary, result.ordering, result.problems
    if args.json:
        print(json.dumps(result.to_json()))
        return 0 if not problems else 1
    from rich.console import Console

    console = Console()
    t = render.narrow_table(["scenario", "duration\ngain", "energy\ngain", "lifetime\ngain", "paper\nlifetime",
                             "ratio", "pallex\n@1/h", "pallex\n@60/h"], left=("scenario",),
                            title=f"{result.device}: Pallex against baseline (device energy modelled)")
    for r in summary:
        if r["lifetime_gain"] is None:
            t.add_row(r["scenario"], *["-"] * 7)
            continue
        t.add_row(r["scenario"], render.percent(r["duration_gain"]), render.percent(r["energy_gain"]),
                  render.percent(r["lifetime_gain"]),
                  render.percent(r["paper_lifetime_gain"]) if r["paper_lifetime_gain"] is not None else "-",
                  f"{r['lifetime_ratio']:.2f}" if r["lifetime_ratio"] is not None else "-",
                  f"{r['pallex_lifetime_h_at_1']:.0f} h", f"{r['pallex_lifetime_h_at_60']:.1f} h")
    console.print(t)
    console.print("gains: duration and energy of the post-kernel part (the seed's), lifetime of the whole "
                  "cycle (eq. 3); ratio = ours / the seed's", highlight=False)
    console.print(f"ordering: {json.dumps(order)}", highlight=False)
    if result.vm:
        console.print(_vm_table(result.vm, result.device))
        console.print("virtual board: post-kernel = start of userspace to the board's power-off, its gain the "
                      "duration's (energy modelled at one power); configurations: "
                      + ", ".join(f"{r['scenario']} {r['config']}" for r in result.vm), highlight=False)
    for p in problems:
        console.print(f"problem: {p}", highlight=False)
    console.print(f"run: {result.run}", highlight=False)
    return 0 if not problems else 1


def _print_vm_cycle(row: dict) -> None:
    state = (f"done {render.seconds(row['app_done_s'])} after userspace, off at {render.seconds(row['cycle_s'])}"
             if row["ok"] else f"FAILED: {row['reason']}")
    print(f"virtual board {row['scenario']} {row['mode']} cycle {row['cycle'] + 1}: {state}", file=sys.stderr)


def _vm_table(vm: list[dict], device: str):
    def pct(value, digits: int = 1) -> str:
        return "-" if value is None else f"{value * 100:.{digits}f}"

    t = render.narrow_table(["scenario", "baseline\npost-kernel", "pallex\npost-kernel", "gain %\n(min..max)",
                             "projected\ngain %", "paper\ngain %", "lifetime\ngain %"], left=("scenario",),
                            title=f"virtual board as {device}: started by its systemd (medians of cycle pairs)")
    for r in vm:
        gain = pct(r["vm_duration_gain"])
        if r["vm_duration_gain_min"] is not None:
            gain += f" ({pct(r['vm_duration_gain_min'], 0)}..{pct(r['vm_duration_gain_max'], 0)})"
        t.add_row(r["scenario"], *("-" if r[k] is None else render.seconds(r[k])
                                   for k in ("baseline_post_kernel_s", "pallex_post_kernel_s")),
                  gain, pct(r["projected_duration_gain"]), pct(r["paper_duration_gain"]), pct(r["vm_lifetime_gain"]))
    return t


def cmd_profile(args) -> int:
    from shoal.pallex import sdanalyze

    result = sdanalyze.build(args.source, device=args.device, meter_log=args.meter_log,
                             bootloader_s=args.bootloader_s, config=args.config)
    text = sdanalyze.to_toml(result)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        print(json.dumps(result))
    else:
        print(text, end="")
    return 0
