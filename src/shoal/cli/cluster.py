"""`shoal cluster up|status|down|matrix`: emulated clusters and the pair matrix."""

from __future__ import annotations

import argparse
import sys
import time

from shoal import proc
from shoal.errors import ShoalError
from shoal.inputs import options as typed
from shoal.runs import jsonout
from shoal.inputs.grammar import MAX_MESSAGE_B
from shoal.mpi import kinds

ORDER = 40


def register(subparsers) -> None:
    parser = subparsers.add_parser("cluster", help="emulated clusters: up, status, down, matrix")
    sub = parser.add_subparsers(dest="cluster_command", metavar="ACTION")
    parser.set_defaults(func=lambda args: parser.print_help() or 0)

    up = sub.add_parser("up", help="bring an emulated cluster up (stays up until 'down')")
    _where(up)
    up.add_argument("--name", type=typed.text, help="cluster id (2-12 lower-case letters/digits); default: random")
    up.add_argument("--no-calibrate", action="store_true", help="skip the CPU speed calibration")
    up.add_argument("--dilation", type=typed.typed(_dilation, name="dilation"), metavar="D",
                    help="run D times slower than real time "
                    "(default: the smallest whole D at which the devices fit this host)")
    up.add_argument("--hosts", type=typed.text, metavar="slurm|FILE",
                    help="spread the devices over several hosts: 'slurm' (the hosts of this "
                    "allocation) or an ssh inventory FILE; one agent per host builds its share")
    up.add_argument("--json", action="store_true", help="print the cluster description as JSON")
    up.set_defaults(func=_up, keeps_cluster=True, precheck=_up_precheck, emulates=_up_emulates_here)

    agent = sub.add_parser("agent", help="one host's share of a cluster spread over hosts "
                           "(started on each host by 'cluster up --hosts')")
    agent.add_argument("action", choices=("probe", "up", "down", "links"),
                       help="probe: what this host offers; up: build this host's share of the "
                       "plan read from stdin (JSON) and hold it; down: remove this host's share; "
                       "links: what its forwarder counted of frames from other hosts")
    agent.add_argument("--id", type=typed.text, help="the cluster (up: the plan's; down: whose share goes)")
    agent.add_argument("--host", type=typed.text, help="this host's name (default: Slurm's node name, "
                       "else the hostname)")
    agent.add_argument("--host-speed", type=typed.typed(float, name="host speed"), help="probe: "
                       "this host's core in reference cores (default: measured, cached)")
    agent.set_defaults(func=_agent)

    status = sub.add_parser("status", help="list emulated clusters and leftovers")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_status)

    down = sub.add_parser("down", help="remove emulated clusters (and leftovers of crashed runs)")
    down.add_argument("ids", nargs="*", help="cluster ids (default: leftovers only)")
    down.add_argument("--all", action="store_true", help="remove every emulated cluster")
    down.set_defaults(func=_down)

    matrix = sub.add_parser("matrix", help="all-pairs latency and bandwidth between nodes")
    _where(matrix)
    matrix.add_argument("--attach", type=typed.text, metavar="ID", help="use a cluster brought up with 'cluster up'")
    matrix.add_argument("--mpi", type=typed.text, help=kinds.choices_help())
    matrix.add_argument("--bytes", type=typed.whole(1, MAX_MESSAGE_B), default=8 << 20,
                        help="bytes streamed per pair for bandwidth (default 8 MiB)")
    matrix.add_argument("--json", action="store_true")
    matrix.set_defaults(func=_matrix, precheck=_matrix_precheck)

    fidelity = sub.add_parser("fidelity", help="emulated ping-pong and stream against the link model, "
                              "at D = 1 and D = 2")
    fidelity.add_argument("--link", type=typed.text, help="link type (default: the device's own)")
    fidelity.add_argument("--device", type=typed.text, default="nuc",
                          help="device profile of the two devices "
                          "(default nuc: a whole host core, so no rank waits for its quota)")
    fidelity.add_argument("--mpi", type=typed.text, help=kinds.choices_help())
    fidelity.add_argument("--sizes", type=typed.SIZES, default="64..4M:4",
                          help="message sizes (default 64..4M:4)")
    fidelity.add_argument("--dilation", type=typed.typed(_dilations, name="dilations"),
                          default=(1.0, 2.0), metavar="D[,D...]",
                          help="time dilations to compare (default 1,2; 'auto': chosen to fit)")
    fidelity.add_argument("--budget", type=typed.SECONDS_NUMBER, default=1.0,
                          help="seconds per point at most")
    fidelity.add_argument("--out", type=typed.out_dir, help="directory for the runs (default runs/...)")
    fidelity.add_argument("--json", action="store_true")
    fidelity.set_defaults(func=_fidelity)


def _where(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--emulate", type=typed.text, metavar="SPEC", help="devices to emulate, e.g. 4xminnowboard+1xnuc")
    parser.add_argument("--link", type=typed.text, help="link type for every emulated device "
                        "(ethernet-100m, gigabit, wifi-n, docsis-27m, or one of yours)")
    parser.add_argument("--cluster", type=typed.text, metavar="FILE", help="inventory file (TOML)")
    from shoal.cli._where import add_host_speed

    add_host_speed(parser)


def _link_needs_emulate(args) -> None:
    from shoal.cluster import rules

    rules.link_needs_emulate(args.link, args.emulate)


def _up_precheck(args) -> None:
    """What `cluster up` refuses, refused before re-running inside a user namespace."""
    from shoal.cluster import emulated, inventory

    from shoal.cluster import rules

    rules.up_needs_one(args.emulate, args.cluster)
    _link_needs_emulate(args)
    if args.name:
        emulated.check_id(args.name)
    if args.emulate:
        inventory.from_emulate(args.emulate, args.link)


def _matrix_precheck(args) -> None:
    from shoal.cluster import inventory
    from shoal.mpi import discover

    _link_needs_emulate(args)
    if args.emulate:
        inventory.from_emulate(args.emulate, args.link)
    discover.resolve(args.mpi)


def _up_emulates_here(args) -> bool:
    """Spread over hosts, the devices are built there by the agents, not here."""
    from shoal.cluster import userns

    return not args.hosts and userns.builds_emulation(args.emulate, args.cluster, None)


def _up(args) -> int:
    from shoal.cluster import session, state, userns

    _up_precheck(args)
    if args.hosts:
        return _up_on_hosts(args)
    start = time.perf_counter()
    cluster = session.bring_up(args.emulate, args.cluster, args.link, args.host_speed, args.name,
                               calibrate=not args.no_calibrate, dilation=args.dilation,
                               recalibrate=args.recalibrate)
    try:
        took = time.perf_counter() - start
        if args.json:
            print(jsonout.dumps(cluster.describe(), indent=1))
        else:
            _print_cluster(state.read(cluster.id))
            print(f"up in {took:.2f} s. Run ranks with --attach {cluster.id}; remove with "
                  f"'shoal cluster down {cluster.id}'. Launcher helper: {cluster.launcher}")
            sys.stdout.flush()
    except BaseException:
        # Stopped before it said the cluster is up: the user never got it, so it goes.
        with proc.signals_ignored():
            cluster.down()
        raise
    userns.hold()  # in a user namespace: keep it, with the cluster, until 'cluster down'
    return 0


def _up_on_hosts(args) -> int:
    from shoal.cluster import emulated, hostengine, multihost, session

    engine = hostengine.from_option(args.hosts)
    inventory = session.emulated_inventory(args.emulate, args.cluster, args.link, args.host_speed)
    start = time.perf_counter()
    record = multihost.up(engine, inventory, args.name or emulated.new_id(), args.host_speed,
                          args.dilation, calibrate=not args.no_calibrate)
    took = time.perf_counter() - start
    if args.json:
        print(jsonout.dumps({**record, "up_s": took}, indent=1))
        return 0
    _print_cluster(record)
    for host, share in record["shares"].items():
        devices = share["devices"]
        named = ", ".join(devices) if len(devices) < 3 else f"{devices[0]}..{devices[-1]} ({len(devices)})"
        print(f"{host}: {named} as {share['id']}, {share['cpus']:g} CPUs for devices, "
              f"fit at D = {share['fits_at']:g}")
    for host, views in record.get("time", {}).get("underlay", {}).items():
        for other, seen in views.items():
            if host < other:  # each pair once
                print(f"underlay {host} - {other}: round trip {seen['rtt_median_s'] * 1e6:.0f} us (median of "
                      f"its last probes), clock offset {seen['clock_offset_s'] * 1e6:+.1f} us")
    for warning in record.get("emulation", {}).get("warnings", []):
        print(f"shoal: warning: {warning}", file=sys.stderr)
    idle = len(record["hosts"]["hosts"]) - len(record["shares"])
    print(f"up on {len(record['shares'])} of {len(record['hosts']['hosts'])} hosts"
          + (f" ({idle} got no device)" if idle else "") + f" in {took:.2f} s. Remove with "
          f"'shoal cluster down {record['id']}'.")
    return 0


def _agent(args) -> int:
    from shoal.cluster import agent

    host = agent.host_name(args.host)
    if args.action == "probe":
        return agent.probe(host, args.host_speed)
    if args.action == "up":
        return agent.up(host, agent.read_plan(sys.stdin, args.id),
                        ["cluster", "agent", "up", *(["--id", args.id] if args.id else []), "--host", host])
    if not args.id:
        raise ShoalError(f"cluster agent {args.action} needs --id ID")
    if args.action == "links":
        return agent.links(host, args.id)
    return agent.down(host, args.id)


def _print_cluster(record: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    emulation = record.get("emulation", {})
    table = Table(title=f"emulated cluster {record['id']}", caption="speed: calibrated, against this host")
    for col in ("node", "address", "profile", "link", "CPU budget", "speed", "memory"):
        table.add_column(col, overflow="fold")
    for row in _node_rows(record):
        table.add_row(*row)
    Console().print(table)
    print(f"links: {emulation.get('link_emulator', 'tbf')}; time dilation "
          f"{emulation.get('dilation', 1):g} (CPU budgets and link rates / D, latencies x D)")
    if isinstance(emulation.get("host_speed"), dict):
        from shoal import render

        print(render.host_speed(emulation["host_speed"]))


def _node_rows(record: dict) -> list[tuple[str, ...]]:
    """One row per device; a run of three or more alike devices (a 128-box plant) is one row
    naming the first and last device and address, and how many."""
    described = {n["name"]: n for n in record["inventory"]["nodes"]}
    links = record["inventory"].get("links", {})
    calibration = record.get("emulation", {}).get("calibration", {})
    runs: list[tuple[list[str], list[str], tuple[str, ...]]] = []
    for name, node in record.get("nodes", {}).items():
        d = described.get(name, {})
        link = links.get(d.get("link"), {})
        cal = calibration.get(d.get("profile"), {})
        memory = node.get("memory_limit_B")
        alike = (d.get("profile", "?"), f"{d.get('link')} ({link.get('rate_bps', 0) / 1e6:g} Mbit/s)",
                 f"{node.get('cpu_budget', 0):.3g} CPU", f"{cal['achieved_speed']:.3g}" if cal else "-",
                 f"{memory / 2**20:.0f} MiB" if memory else "not limited")
        if runs and runs[-1][2] == alike:
            runs[-1][0].append(name)
            runs[-1][1].append(node.get("address", "?"))
        else:
            runs.append(([name], [node.get("address", "?")], alike))
    rows = []
    for names, addresses, alike in runs:
        if len(names) < 3:
            rows += [(n, a, *alike) for n, a in zip(names, addresses)]
        else:
            rows.append((f"{names[0]}..{names[-1]} ({len(names)})", f"{addresses[0]}..{addresses[-1]}", *alike))
    return rows


def _status(args) -> int:
    from shoal.cluster import state

    records = state.records()
    rows = [{"id": r["id"], "nodes": len(r.get("nodes", {})),
             "state": (f"up, over {len(r['shares'])} hosts ({', '.join(r['shares'])})" if "shares" in r else
                       f"up, the share of {r['part_of']['cluster']} on host {r['part_of']['host']}"
                       if r.get("part_of") else
                       "leftover (owner gone)" if state.is_leftover(r) else
                       (f"up, in the user namespace of process {r.get('owner_pid')}" if r.get("persistent")
                        else "up, inside a command's user namespace") if r.get("in_user_namespace") else "up"),
             "persistent": bool(r.get("persistent"))} for r in records]
    if args.json:
        print(jsonout.dumps(rows, indent=1))
        return 0
    if not rows:
        print("no emulated clusters")
        return 0
    for row in rows:
        print(f"{row['id']}: {row['nodes']} devices, {row['state']}")
    return 0


def _down(args) -> int:
    from shoal.cluster import state

    from shoal.cluster import multihost

    removed = state.reap()
    records = state.records()
    spread = {r["id"] for r in records if multihost.is_spread(r)}
    for record in records:
        if args.all or record["id"] in args.ids:
            if multihost.is_spread(record):
                for problem in multihost.down(record):
                    print(f"shoal: {record['id']}: {problem}", file=sys.stderr)
            elif (record.get("part_of") or {}).get("cluster") in spread:
                continue  # a host's share: its cluster's down removes it there, on its host
            else:
                state.remove(record)
            removed.append(record["id"])
    missing = [i for i in args.ids if i not in removed]
    for cluster_id in removed:
        print(f"removed {cluster_id}")
    kept = [r["id"] for r in state.records() if r["id"] not in removed]
    if kept and not args.ids:
        # Without ids only leftovers of crashed runs go: say what stays up, and how to remove it.
        print(f"shoal: kept {len(kept)} cluster(s) up: {', '.join(kept)}; remove with "
              f"'shoal cluster down {kept[0]}' or 'shoal cluster down --all'", file=sys.stderr)
    if missing:
        raise ShoalError(f"no emulated cluster named {', '.join(missing)} ; see 'shoal cluster status' for the clusters that are up")
    return 0


def _matrix(args) -> int:
    from shoal import cluster as clusters
    from shoal.cluster import matrix
    from shoal.mpi import discover

    if not (args.emulate or args.cluster or args.attach):
        raise ShoalError("give --emulate SPEC, --cluster FILE or --attach ID")
    _link_needs_emulate(args)
    mpi = discover.resolve(args.mpi)
    with clusters.open(emulate=args.emulate, link=args.link, inventory=args.cluster,
                       attach_to=args.attach, host_speed=args.host_speed, calibrate=False,
                       recalibrate=args.recalibrate, mpi=args.mpi) as c:
        rows = matrix.measure(c, mpi, bw_total_B=args.bytes)
    slow = matrix.slow_nodes(rows)
    if args.json:
        print(jsonout.dumps({"pairs": rows, "slow_nodes": slow}, indent=1))
        return 0
    lat, bw = matrix.as_tables(rows)
    print("one-way latency (us)")
    print((lat * 1e6).round(1).to_string(na_rep="-"))
    print("\nbandwidth (Mbit/s)")
    print((bw * 8 / 1e6).round(2).to_string(na_rep="-"))
    for node in slow:
        print(f"\nslow: {node['node']}: median {node['bandwidth_Bps'] * 8 / 1e6:.1f} Mbit/s and "
              f"{node['latency_s'] * 1e6:.1f} us to the others, against "
              f"{node['others_bandwidth_Bps'] * 8 / 1e6:.1f} Mbit/s and "
              f"{node['others_latency_s'] * 1e6:.1f} us for the rest")
    return 0


def _fidelity(args) -> int:
    from shoal import render
    from shoal.bench import fidelity

    request = fidelity.FidelityRequest(link=args.link, device=args.device, mpi=args.mpi,
                                       sizes=args.sizes, dilations=args.dilation,
                                       budget_s=args.budget, out=args.out)
    result = fidelity.measure(request, ["shoal", *sys.argv[1:]])
    result["dilation_agreement"] = fidelity.dilation_agreement(result)
    if args.json:
        print(jsonout.dumps(result, indent=1))
        return 0
    model = result["model"]
    print(f"2x{result['device']} on {result['link']}: model latency "
          f"{render.seconds(model['latency_s'])}, rate {model['rate_bps'] / 1e6:g} Mbit/s "
          f"(stream {render.bandwidth(model['stream_Bps'])} of payload)")
    for run in result["runs"]:
        table = render.narrow_table(["kind", "size", "measured", "model", "measured/\nmodel",
                                     "host"], left=("kind",),
                                    title=f"time dilation {run['dilation'] or 'auto'}, {run['mpi']}")
        for row in run["rows"]:
            show = render.seconds if row["unit"] == "s" else render.bandwidth
            table.add_row(row["kind"], render.byte_size(row["size_B"]), show(row["measured"]),
                          show(row["model"]), f"{row['ratio']:.3f}",
                          row["host_slack"] or "-")
        from rich.console import Console

        Console().print(table)
        for row in run["rows"]:
            if row["host_slack"] == "short":
                print(f"  host short of CPU at {row['kind']} {render.byte_size(row['size_B'])}: "
                      f"{row['host_slack_note']}")
        cpu = run["cpu"]
        print("  CPU, time per unit of work / one rank on one device: " + ", ".join(
            f"{p['devices']}x{p['ranks_per_device']} {p['ratio']:.3f} (spread {p['spread']:.0%})"
            for p in cpu["points"] if (p["devices"], p["ranks_per_device"]) != (1, 1)))
        print(f"  runs: {run['run']}")
        for failure in run["failures"]:
            print(f"  failed: {failure.get('test')} {failure.get('size_B')}: {failure.get('reason')}")
    agreement = result["dilation_agreement"]
    if agreement:
        worst = max(agreement, key=lambda a: abs(a["ratio"] - 1))
        print(f"D > 1 against the first D: worst {worst['kind']} "
              f"{render.byte_size(worst['size_B'])} at {worst['ratio']:.3f}")
    return 0


def _dilation(text: str) -> float:
    from shoal.cluster import dilation

    return dilation.check(text)


def _dilations(text: str) -> tuple:
    from shoal.cluster import dilation

    return dilation.dilations(text)
