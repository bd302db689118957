"""An emulated cluster on one machine: one network namespace per device.

Layout of cluster ``ID`` (all names recorded in its state file first)::

    netns shoal-ID-sw        the switch: bridge br0, one port dN per device
    netns shoal-ID-head      where mpiexec runs (unshaped port), hostname shoal-head
    netns shoal-ID-NODE      a device: lo + eth0 (10.77.x.y/16), own hostname (UTS ns)
    cgroup .../shoal/ID/NODE CPU bandwidth (and cpuset) of the device's profile

Veth pairs are created directly inside the namespaces, so nothing ever
appears in the root namespace and removing the namespaces removes every
link. Processes enter a device through ``shoal.cluster.nsexec``, which the
MPI launchers call instead of ssh.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import secrets
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from shoal import environment, proc, verbose
from shoal.cluster import (capacity, cpulimit, crosslinks, dilation, dutycycle, hostspeed, linkemu, memlimit,
                           shaping, slack, state, sysns)
from shoal.cluster.inventory import Inventory
from shoal.errors import ShoalError

SUBNET = ipaddress.ip_network("10.77.0.0/16")
_unlimited_said = False
HEAD = crosslinks.HEAD  # the head's host name (crosslinks names the other hosts' heads)


def address_of(index: int) -> str:
    # index 0 is the head; devices follow. Skip .0 and .255 of every /24.
    return str(SUBNET.network_address + 256 * (index // 250) + index % 250 + 1)


def usage_of(entry: dict) -> tuple[str, float] | None:
    """What counts the CPU time of the device a record's node ``entry`` describes, on its
    host (``cgroup=G``, or ``netns=PATH`` where it has no cgroup), and its CPU budget."""
    budget = entry.get("cpu_budget")
    if not budget:
        return None
    group = cpulimit.usage_group(entry.get("device_cgroups", []))
    if group:
        return f"cgroup={group}", float(budget)
    return f"netns={state.NETNS_DIR / entry['netns']}", float(budget)


def mac_of(index: int) -> str:
    # Locally administered, fixed per index: every namespace knows every peer's address.
    return f"02:77:00:00:{index >> 8 & 0xff:02x}:{index & 0xff:02x}"


# NUD_PERMANENT (linux/neighbour.h).
_NUD_PERMANENT = 0x80


def _static_neighbours(ipr, eth: int, own: int, indices) -> None:
    """Every other member's address resolved for good, in this namespace's neighbour table.

    The kernel's ARP cache is one table for all network namespaces, limited by the host's
    net.ipv4.neigh.default.gc_thresh3 (1024 here): 32 devices whose ranks all connect to each
    other (UCX's address exchange) need 32 x 33 entries and overflowed it ("neighbor table
    overflow", then EHOSTUNREACH in MPI_Init). Permanent entries are not counted against
    that limit, and no ARP broadcast crosses the emulated links.
    """
    for peer in indices:
        if peer != own:
            ipr.neigh("replace", dst=address_of(peer), lladdr=mac_of(peer), ifindex=eth,
                      state=_NUD_PERMANENT)


def _check_privileges() -> None:
    if os.geteuid() != 0:
        raise ShoalError("emulated clusters need root or a user namespace of their own; "
                         "run this through the shoal command (it moves into one by itself)")
    proc.tool("unshare", "network namespaces of emulated devices")
    proc.tool("tc", "shaped links of emulated devices")


def userns_inside() -> bool:
    from shoal.cluster import userns

    return userns.inside()


def new_id() -> str:
    return "c" + secrets.token_hex(3)


def check_id(cluster_id: str) -> str:
    """A cluster id as given (--name): 2-12 lower-case letters, digits or '-'."""
    if not (2 <= len(cluster_id) <= 12 and cluster_id.replace("-", "").isalnum() and cluster_id.islower()):
        raise ShoalError(f"cluster id {cluster_id!r}: use 2-12 lower-case letters, digits or '-'")
    return cluster_id


class EmulatedCluster:
    """Bring an emulated cluster up and down; describe it for manifests."""

    def __init__(self, inventory: Inventory, cluster_id: str | None = None,
                 persistent: bool = False, calibrate: bool = True,
                 dilation: float | None = None,
                 at_once: list[tuple[str, ...]] | None = None,
                 host: hostspeed.HostSpeed | None = None) -> None:
        self.inventory = inventory
        # This host's core in reference cores (None: resolved when first needed).
        self._host = host
        # None: the smallest whole factor at which the devices fit this host.
        self.dilation_asked = dilation
        # The sets of devices that ever compute at the same time (None: all of them):
        # a study runs its reference apart from the cluster, so only the larger set must fit.
        self.at_once = at_once
        self.id = check_id(cluster_id or new_id())
        self.persistent = persistent
        self.calibrate_cpu = calibrate
        # Where the link forwarder logs every frame it delivers (None: no log).
        self.link_log: Path | None = None
        self.record: dict = {}
        self.warnings: list[str] = []
        # Spread over hosts: {"cluster": ID, "host": NAME}, this host's share of that cluster,
        # and how its devices reach the other hosts' (crosslinks.ShareLinks).
        self.part_of: dict | None = None
        self.links_across: crosslinks.ShareLinks | None = None

    @property
    def host(self) -> hostspeed.HostSpeed:
        """This host's speed: the inventory's or --host-speed's, else measured (cached)."""
        if self._host is None:
            self._host = hostspeed.resolve(self.inventory.host_speed)
        return self._host

    # -- names -------------------------------------------------------------------------
    def index(self, position: int, name: str) -> int:
        """A member's index (its address and MAC): its position here (0 the head, devices
        from 1), or in the whole cluster when spread over hosts."""
        return self.links_across.index[name] if self.links_across else position

    def _everyone(self) -> dict[int, str]:
        """Every member that may be reached: index -> host name."""
        if self.links_across:
            return dict(self.links_across.names)
        return {0: HEAD, **{i: n.name for i, n in enumerate(self.inventory.nodes, start=1)}}

    def netns(self, node: str) -> str:
        return f"shoal-{self.id}-{node}"

    @property
    def directory(self) -> Path:
        return state.cluster_dir(self.id)

    @property
    def launcher(self) -> str:
        """The ssh-like program MPI launchers call to start processes in a device."""
        return str(self.directory / "ssh")

    # -- up ----------------------------------------------------------------------------
    def up(self) -> "EmulatedCluster":
        _check_privileges()
        state.reap()
        if state.read(self.id) is not None:
            raise ShoalError(f"an emulated cluster named {self.id} is already up; "
                             f"'shoal cluster down {self.id}' first or choose another name")
        nodes = self.inventory.nodes
        capacity.check(len(nodes))
        names = ["sw", "head"] + [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise ShoalError("node names 'sw' and 'head' are reserved in emulated clusters")
        layout = cpulimit.detect()
        self.dilation = self.choose_dilation()
        record = {
            "id": self.id, "owner_pid": os.getpid(),
            "owner_start": sysns.process_start_time(os.getpid()),
            "persistent": False, "created": time.time(), "dilation": self.dilation,
            "netns": [self.netns(n) for n in names],
            "uts": [f"{n}.uts" for n in names[1:]],
            "cgroups": [], "inventory": self.inventory.describe(),
            "nodes": {}, "head": {"netns": self.netns("head"), "uts": "head.uts",
                                  "address": address_of(self.index(0, "head")), "hostname": HEAD,
                                  "cgroups": []},
        }
        if self.part_of:
            record["part_of"] = self.part_of
        self.record = record
        state.prepare_netns_dir()
        state.write(record)  # intent first: a crash from here on leaves a record to reap
        try:
            self._create(record, layout)
            state.write(record)  # what nsexec reads to enter a device (the OS noise does)
            self._start_os_noise(record)
            self._start_backgrounds(record)
            self._start_storage(record)
            # Persistent last: a kill before this write leaves a leftover that any down removes.
            record["persistent"] = self.persistent
            state.write(record)
        except BaseException:  # a signal or an error anywhere in up: nothing stays
            state.remove(record)
            raise
        return self

    def _create(self, record: dict, layout: cpulimit.CgroupLayout) -> None:
        from pyroute2 import IPRoute

        directory = self.directory
        hosts = ["127.0.0.1 localhost"] + [f"{address_of(i)} {name}" for i, name in sorted(self._everyone().items())]
        (directory / "hosts").write_text("\n".join(hosts) + "\n")
        shim = directory / "ssh"
        shim.write_text("#!/bin/sh\n# Launcher helper of emulated cluster " + self.id + "\n"
                        f"{environment.STATE_DIR.name}={shlex.quote(str(state.root()))} "
                        f"exec {shlex.quote(sys.executable)} -m shoal.cluster.nsexec "
                        f"--cluster {self.id} \"$@\"\n")
        shim.chmod(0o755)

        # 1. Namespaces: one `unshare` per namespace binds net (and UTS) to files.
        def make_ns(name: str, hostname: str | None) -> None:
            path = state.NETNS_DIR / self.netns(name)
            path.touch()
            argv = ["unshare", f"--net={path}"]
            if hostname:
                uts = directory / f"{name}.uts"
                uts.touch()
                argv += [f"--uts={uts}", "hostname", hostname]
            else:
                argv += ["true"]
            done = proc.run(argv)
            if not done.ok:
                raise ShoalError(f"cannot create network namespace {path}: {done.tail()}")

        jobs = [("sw", None), ("head", HEAD)] + [(n.name, n.name) for n in self.inventory.nodes]
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda job: make_ns(*job), jobs))

        # 2. Links: the link forwarder where the kernel has no netem, else veth
        # pairs into a bridge, shaped with tc.
        emulator = shaping.choose_emulator(self.netns("sw"))
        if emulator != "forwarder" and any(n.link.shared for n in self.inventory.nodes):
            self._warn(f"a shared medium ({', '.join(sorted({n.link.name for n in self.inventory.nodes if n.link.shared}))}) "
                       f"is emulated by the link forwarder only: with {emulator} every device gets a port of its own")
        links = {n.name: dilation.link(n.link, self.dilation) for n in self.inventory.nodes}
        if emulator == "forwarder":
            self._start_forwarder(record, jobs, links)
        else:
            self._veth_switch(jobs)
        members = [name for name, _ in jobs[1:]]
        congestion = None
        everyone = list(self._everyone())
        for position, name in enumerate(members):
            i = self.index(position, name)
            path = str(state.NETNS_DIR / self.netns(name))
            with sysns.in_netns(path):
                _disable_ipv6()
                congestion = _unpaced_congestion_control()
                ipr = IPRoute()
            with ipr:
                ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
                eth = ipr.link_lookup(ifname="eth0")[0]
                ipr.link("set", index=eth, address=mac_of(i))
                ipr.addr("add", index=eth, address=address_of(i), prefixlen=SUBNET.prefixlen)
                ipr.link("set", index=eth, state="up")
                _static_neighbours(ipr, eth, i, everyone)

        if congestion not in UNPACED_CONGESTION:
            self._warn(f"the devices' TCP paces its sends ({congestion}, this host's default, which "
                       "this system does not let a namespace change): short messages on a shared "
                       "plant may read slower than the link model")
        if emulator == "forwarder":
            self._compensate_host_latency(record, links, layout)

        # 3. Shaping with tc: each device's uplink (its eth0) and downlink (its switch port).
        if emulator == "tbf" and any(n.link.latency_s > 0 or n.link.jitter_s > 0 or n.link.loss > 0
                                     for n in self.inventory.nodes):
            self._warn(f"link delay, jitter and loss are NOT emulated "
                       f"({environment.LINK_EMULATOR.name}=tbf shapes rates only)")
        if emulator != "forwarder":
            switch_lines = []
            with ThreadPoolExecutor(max_workers=4) as pool:
                futures = []
                for i, node in enumerate(self.inventory.nodes, start=1):
                    lines = shaping.qdisc_lines
                    switch_lines += lines(f"d{i}", links[node.name], emulator == "netem")
                    futures.append(pool.submit(shaping.apply, self.netns(node.name),
                                               lines("eth0", links[node.name], emulator == "netem")))
                futures.append(pool.submit(shaping.apply, self.netns("sw"), switch_lines))
                for future in futures:
                    future.result()

        # 4. CPU limits, and the placement of each rank on a core of its device.
        calibration = self._limit_cpus(record, layout)
        memory = self._limit_memory(record, layout)
        self._write_placement(record)
        record["emulation"] = {
            "link_emulator": emulator, "netem": emulator == "netem",
            "host_latency_s": record.pop("host_latency_s", None),
            "dilation": self.dilation, "dilation_asked": self.dilation_asked,
            "dilation_reason": self.dilation_reason, "host_check": record.pop("host_check", None),
            "links": {name: link.describe() for name, link in links.items()},
            "cgroup": layout.describe(),
            # How device CPUs are held to their profiles: "cgroup" (a quota per device core),
            # "user" (SIGSTOP/SIGCONT from user space, cluster.dutycycle) or "none" (host speed).
            "cpu_limit": record.get("cpu_limit", "none"),
            "device_speed": "host" if record.get("cpu_limit") == "none" else "profile",
            "host_speed": self.host.describe(), "host_cpus": len(cpulimit.host_cpus()),
            # The CPUs' worth this command could use (a quota of its cgroup: docker --cpus).
            "host_capacity": self.cpu_capacity.describe(),
            "calibration": calibration, "memory_limit": memory, "warnings": self.warnings,
            # The devices' TCP congestion control (the host's may pace: _unpaced_congestion_control).
            "tcp_congestion": congestion,
        }
        for i, node in enumerate(self.inventory.nodes, start=1):
            record["nodes"][node.name].update(
                {"netns": self.netns(node.name), "uts": f"{node.name}.uts",
                 "address": address_of(self.index(i, node.name)), "hostname": node.name})

    def _veth_switch(self, jobs: list) -> None:
        """Veth pairs created straight into the namespaces, bridged in the switch."""
        from pyroute2 import IPRoute

        sw_path = str(state.NETNS_DIR / self.netns("sw"))
        fds = {}
        try:
            for name, _ in jobs:
                fds[name] = os.open(state.NETNS_DIR / self.netns(name), os.O_RDONLY | os.O_CLOEXEC)
            with IPRoute() as ipr:
                for i, (name, _) in enumerate(jobs[1:]):
                    verbose.show(["ip", "link", "add", "eth0", "netns", self.netns(name), "type",
                                  "veth", "peer", "name", f"d{i}", "netns", self.netns("sw")])
                    ipr.link("add", ifname="eth0", kind="veth", net_ns_fd=fds[name],
                             peer={"ifname": f"d{i}", "net_ns_fd": fds["sw"]})
        finally:
            for fd in fds.values():
                os.close(fd)
        with sysns.in_netns(sw_path):
            sw = IPRoute()
        with sw:
            sw.link("add", ifname="br0", kind="bridge")
            bridge = sw.link_lookup(ifname="br0")[0]
            for i in range(len(jobs) - 1):
                index = sw.link_lookup(ifname=f"d{i}")[0]
                sw.link("set", index=index, master=bridge, state="up")
            sw.link("set", index=bridge, state="up")

    def _start_forwarder(self, record: dict, jobs: list, links: dict) -> None:
        """Every device's eth0 a TAP port of shoal-linkemu, running in the switch namespace."""
        across = self.links_across
        # A shared medium split over hosts: its owner runs the links of the other hosts'
        # devices on it (proxies), and a device whose links run there is only relayed here.
        relayed = across.relayed if across else {}
        proxies = [dataclasses.replace(p, link=dilation.link(p.link, self.dilation))
                   for p in (across.proxies if across else ())]
        names = [name for name, _ in jobs[1:]]
        members = [None if name in relayed else links.get(name) for name in names]
        channels = linkemu.shared_channels(members + [p.link for p in proxies])
        ports = [linkemu.Port(str(state.NETNS_DIR / self.netns(name)), "eth0", link, *medium,
                              mac=None if name in relayed else mac_of(self.index(position, name)),
                              relay=relayed.get(name), id=self.index(position, name))
                 for position, (name, link, medium) in enumerate(zip(names, members, channels))]
        ports += [dataclasses.replace(p, up_channel=up, down_channel=down, sharing=sharing)
                  for p, (up, down, sharing) in zip(proxies, channels[len(names):])]

        def spawned(entry: dict) -> None:
            record["forwarder"] = entry  # named before it creates anything
            state.write(record)

        record["forwarder"], self._control = linkemu.start(
            ports, str(state.NETNS_DIR / self.netns("sw")), self.directory / "forwarder.json",
            log=self.link_log, on_spawn=spawned,
            peers=self.links_across.peers if self.links_across else None)
        if self.links_across:
            record["links_across"] = self.links_across.describe()
        state.write(record)

    def _compensate_host_latency(self, record: dict, links: dict,
                                 layout: cpulimit.CgroupLayout) -> None:
        """Take the host's own latency (TCP stacks, forwarder) off the links' delays.

        Measured between the first two devices (or the head and the only
        device) with the delays in place; a real device's latency includes
        its own stacks, so the emulated one must not add the host's on top.
        Per device, as its ranks will wait: a device whose CPU quota is under
        one CPU has ranks that sleep until their socket wakes them (the
        kernel's wake-up is the host's too), the others' ranks poll.
        """
        from shoal.cluster import linkmodel

        nodes = self.inventory.nodes
        if len(nodes) >= 2:
            a, b, b_index = nodes[0].name, nodes[1].name, self.index(2, nodes[1].name)
            expected = linkmodel.path(links[a], links[b]).one_way_s(64)
        else:
            # The head's port is unshaped: only the device's half of the path counts.
            a, b, b_index = "head", nodes[0].name, self.index(1, nodes[0].name)
            expected = links[b].latency_s / 2 + 8 * linkmodel.wire_bytes(64) / links[b].rate_bps
        paths = [str(state.NETNS_DIR / self.netns(n)) for n in (a, b)]
        skipped = None
        if links[b].shared:
            # Each way waits 1-2 MAP intervals for its grant (2 ms of spread at docsis-27m):
            # the probe cannot see the host's 20-80 us under that, which is 2 % of the
            # plant's latency at most. Measured once (2 NUCs, D = 1) it read 0.96 ms.
            host = linkemu.HostLatency(0.0, 0.0)
        elif any(links[n].loss > 0 for n in (a, b) if n in links):
            # A lost probe waits out TCP's retransmission timeout (200 ms or more): at 20 %
            # loss the probe spent 13 s and ended at its deadline with nothing. The host's
            # 20-80 us stay on top of such a link's delay.
            host = linkemu.HostLatency(0.0, 0.0)
            skipped = "not measured on a lossy link (TCP's retransmissions would hide it)"
        else:
            host = linkemu.measure_host_latency(*paths, address_of(b_index), expected)
        smallest = min(link.latency_s for link in links.values())  # never more than a link's delay
        polling, sleeping = min(host.polling_s, smallest), min(host.sleeping_s, smallest)
        budgets = self._budgets()
        # Held to their budgets by cgroups, or else from user space (cluster.dutycycle).
        limited = bool(layout.version) or dutycycle.available()
        by_device = {node.name: sleeping if _polling_stalls(
            limited, dilation.budget(budgets[node.name][0], self.dilation),
            node.profile.cores, 1) else polling for node in nodes}
        # Port 0 is the head's; device i's is port i.
        linkemu.set_host_latency(self._control, polling,
                                 {i: by_device[n.name] for i, n in enumerate(nodes, start=1)})
        record["host_latency_s"] = {"polling": polling, "sleeping": sleeping, "by_device": by_device,
                                    **({"skipped": skipped} if skipped else {})}

    def choose_dilation(self) -> float:
        """The dilation asked for, else the smallest whole D at which the devices that compute
        at once fit this host; refused where a device core could not be held to its budget."""
        budgets = self._budgets()
        by_node = {name: b for name, (_, b) in budgets.items()}
        # What this command can use: fewer CPUs than the host's where its cgroup holds a quota.
        self.cpu_capacity = cpulimit.cpu_capacity()
        host = self.cpu_capacity.usable
        fits = dilation.choose(self._busiest(by_node), host)
        asked = self.dilation_asked is not None
        d = dilation.check(self.dilation_asked) if asked else fits
        per_core = {name: fraction for name, (fraction, _) in budgets.items()}
        dilation.check_cores(per_core, d, cpulimit.smallest_core_budget(), fits, asked)
        total = sum(self._busiest(by_node))
        self.dilation_reason = (
            f"asked (--dilation {d:g}); the devices' budgets fit this host at D = {fits:g}" if asked
            else f"the smallest whole D at which the devices' budgets ({total:.2f} CPUs at real "
                 f"time) fit {host:g} CPUs less {dilation.reserve(host):g} kept for the host")
        return d

    def _busiest(self, by_node: dict[str, float]) -> list[float]:
        """The budgets of the largest set of devices that compute at the same time."""
        return [by_node[n] for n in self._busiest_names(by_node)]

    def _busiest_names(self, by_node: dict[str, float]) -> list[str]:
        groups = self.at_once or [tuple(by_node)]
        return max(([n for n in group if n in by_node] for group in groups),
                   key=lambda names: sum(by_node[n] for n in names))

    def _budgets(self) -> dict[str, tuple[float, float]]:
        """Per device at real time (D = 1): (CPUs per core, CPUs in all), each core of a device
        the share of a host core that makes it as fast as its profile (``HostSpeed.core_share``)."""
        budgets = {}
        for node in self.inventory.nodes:
            fraction = self.host.core_share(node.profile)
            budgets[node.name] = (fraction, node.profile.cores * fraction)
        return budgets

    def _pins(self, per_core: dict[str, float]) -> dict[str, list[int]]:
        """Each device core's host CPU: a device's cores in turn from the least loaded CPU, so
        budgets spread evenly whether its ranks fill every core or one per device runs (the
        first cores of four MinnowBoards go to alternate CPUs, not all to the first)."""
        cpus = cpulimit.host_cpus()
        load = [0.0] * len(cpus)
        pins = {}
        for i, node in enumerate(self.inventory.nodes):
            # Ties go round the CPUs, device by device.
            start = min(range(len(cpus)), key=lambda c: (round(load[c], 9), (c - i) % len(cpus)))
            chosen = []
            for k in range(node.profile.cores):
                c = (start + k) % len(cpus)
                load[c] += per_core[node.name]
                chosen.append(cpus[c])
            pins[node.name] = chosen
        return pins

    def _limit_cpus(self, record: dict, layout: cpulimit.CgroupLayout) -> dict:
        cpus = cpulimit.host_cpus()
        d = self.dilation
        per_core, budgets = {}, {}
        for name, (fraction, budget) in self._budgets().items():
            # Dilated: each device runs 1/D of its speed, and its times are divided by D.
            per_core[name], budgets[name] = dilation.budget(fraction, d), dilation.budget(budget, d)
        pins = self._pins(per_core)
        for node in self.inventory.nodes:
            name = node.name
            record["nodes"][name] = {"cpu_fraction": per_core[name], "cpu_budget": budgets[name],
                                     "cores": node.profile.cores, "cpuset": pins.get(name),
                                     "cgroups": [], "netns": self.netns(name)}
        if layout.version == 0:
            # No cgroup to divide: each device core held to its budget from user space.
            if dutycycle.available():
                self._start_dutycycle(record)
                record["cpu_limit"] = "user"
                return {}
            global _unlimited_said
            message = ("no cgroup cpu controller this user may divide and no per-thread CPU "
                       "times (/proc/PID/task/TID/schedstat) to limit them from user space: "
                       "emulated devices run at host speed, NOT at their profiles' (run as root, "
                       "or under systemd-run --user -p Delegate=yes)")
            record["cpu_limit"] = "none"
            self.warnings.append(message)
            if not _unlimited_said:  # said once per command, however many clusters it builds
                _unlimited_said = True
                print(f"shoal: warning: {message}", file=sys.stderr)
            return {}
        record["cpu_limit"] = "cgroup"
        total = sum(self._busiest(budgets))
        host = self.cpu_capacity.usable
        overcommitted = total > host * 1.001
        if overcommitted:
            fits = dilation.choose(list(self._busiest(budgets)), host) * d
            has = f"{len(cpus)}" if host == len(cpus) else f"{host:g} CPUs' worth for this command"
            self._warn(f"the devices' CPU budgets add up to {total:.2f} CPUs at dilation {d:g} "
                       f"but this host has {has}: when all devices compute at once they "
                       f"run slower than their profiles (--dilation {fits:g} fits)")
        pinned = layout.cpuset_base is not None or proc.find("taskset") is not None
        for node in self.inventory.nodes:
            # Intent first: a kill between mkdir and the record must leave a record to reap.
            planned = cpulimit.paths(layout, self.id, node.name, node.profile.cores, pins[node.name])
            for path in planned.all():
                if path not in record["cgroups"]:
                    record["cgroups"].append(path)
            entry = record["nodes"][node.name]
            entry.update({"cgroups": planned.daemons, "device_cgroups": planned.device,
                          "core_cgroups": planned.cores})
            state.write(record)
            made = cpulimit.create(layout, self.id, node.name, per_core[node.name],
                                   node.profile.cores, pins[node.name], pinned)
            entry.update({"quota_us": made.quota_us, "period_us": made.period_us})
        self._group_helpers(record, layout)
        cpulimit.prioritise(layout, first=not overcommitted)
        if not self.calibrate_cpu:
            return {}
        calibration: dict = {}
        for node in self.inventory.nodes:
            name = node.profile.name
            if name in calibration:
                continue
            fraction = per_core[node.name]
            # The device's cores at once, one CPU-bound worker each: what a rank per core gets.
            entry = record["nodes"][node.name]
            result = cpulimit.calibrate(entry["core_cgroups"], fraction, entry["period_us"])
            if abs(result["error"]) > 0.1:
                self._warn(f"{name}: CPU calibration reached {result['achieved_fraction']:.3f} of a "
                           f"host core instead of {fraction:.3f}; is the host busy with other work?")
            result["profile_speed"] = node.profile.speed
            result["speed_kernel"] = node.profile.speed_kernel
            result["achieved_speed"] = result["achieved_fraction"] * self.host.of(node.profile.speed_kernel) * d
            calibration[name] = result
        record["host_check"] = self._host_check(record, per_core)
        return calibration

    def _limit_memory(self, record: dict, layout: cpulimit.CgroupLayout) -> dict:
        """Each device with a memory figure in its profile held to it (a memory cgroup); what
        was set, or why nothing was, for the record."""
        wanted = [n for n in self.inventory.nodes if n.profile.memory_B]
        if not wanted:
            return {"how": "none", "why": "no device profile gives memory_B"}
        memory = memlimit.detect(layout)
        if not memory.version:
            self._warn(f"device memory is NOT limited to the profiles' ({memory.why}; run as root "
                       "or in a cgroup with the memory controller delegated)")
            return {"how": "none", "why": memory.why, **memory.describe()}
        for node in wanted:
            entry = record["nodes"][node.name]
            extra = memlimit.paths(memory, self.id, node.name)
            record["cgroups"] += [g for g in extra if g not in record["cgroups"]]
            state.write(record)  # intent first
            try:
                group = memlimit.create(memory, self.id, node.name, int(node.profile.memory_B))
            except ShoalError as exc:  # a controller that looked delegated but is not
                self._warn(f"device memory is NOT limited to the profiles' ({exc})")
                return {"how": "none", "why": str(exc), **memory.describe()}
            entry["cgroups"] = entry.get("cgroups", []) + extra[:1]  # v1: joined with the daemons'
            entry["memory_cgroup"] = group
            entry["memory_limit_B"] = memlimit.read_limit(group, memory.version)
        state.write(record)
        return {"how": "cgroup", **memory.describe(),
                "limit_B": {n.name: record["nodes"][n.name]["memory_limit_B"] for n in wanted}}

    def _host_check(self, record: dict, per_core: dict[str, float]) -> dict:
        """Every core of the devices that compute at once busy together: did each get its
        budget? Said at up, with the dilation that leaves more room when one did not."""
        names = self._busiest_names(per_core)
        cores = [(name, groups) for name in names
                 for groups in record["nodes"][name]["core_cgroups"]]
        period = max(record["nodes"][name]["period_us"] for name in names)
        runs = cpulimit.kernel_runs([groups for _, groups in cores],
                                    window_s=max(0.5, 20 * period / 1e6))
        delivered = [cpu / wall / per_core[name] for (name, _), (_, wall, cpu) in zip(cores, runs)]
        check = {"cores": len(cores), "delivered_min": min(delivered),
                 "delivered_median": sorted(delivered)[len(delivered) // 2]}
        if check["delivered_min"] < 1 - slack.SHORTFALL_LIMIT:
            self._warn(f"with all {len(cores)} device cores busy, one got "
                       f"{check['delivered_min']:.0%} of its CPU budget at dilation "
                       f"{self.dilation:g} (other work on this host?); --dilation "
                       f"{self.dilation + 1:g} leaves the host more room")
        return check

    def _group_helpers(self, record: dict, layout: cpulimit.CgroupLayout) -> None:
        """The launcher in the head namespace and the link forwarder into groups of their own
        beside the devices, so they share the emulation's weight on a busy host."""
        head = cpulimit.host_group_paths(layout, self.id, "head")
        switch = cpulimit.host_group_paths(layout, self.id, "switch")
        record["cgroups"] += [g for g in head + switch if g not in record["cgroups"]]
        record["head"]["cgroups"] = head
        state.write(record)  # intent first
        cpulimit.create_host_group(layout, self.id, "head")
        cpulimit.create_host_group(layout, self.id, "switch")
        forwarder = (record.get("forwarder") or {}).get("pid")
        # A forwarder that made itself real-time already runs before any of it (and a v1
        # group without real-time runtime would refuse it).
        if forwarder and switch:
            try:
                if os.sched_getscheduler(forwarder) == os.SCHED_OTHER:
                    Path(switch[0], "cgroup.procs").write_text(str(forwarder))
            except OSError as exc:
                self._warn(f"the link forwarder keeps the host's CPU weight: {exc.strerror}")

    def _start_os_noise(self, record: dict) -> None:
        """Each device that carries an OS noise profile runs it (shoal.cluster.osnoise) through
        its placement, on its CPU budget; it is in the device's namespace, so down ends it."""
        for node in self.inventory.nodes:
            noise = node.os_noise
            if noise is None:
                continue
            argv = [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", self.id, "--run",
                    node.name, "--", self.placement, "-", sys.executable, "-m", "shoal.cluster.osnoise",
                    "--forks", repr(noise.forks_per_s), "--cpu", repr(noise.cpu_share),
                    "--dilation", repr(self.dilation)]
            pid = proc.start_helper(argv, {environment.STATE_DIR.name: str(state.root())},
                                    f"the OS noise of {node.name} ({noise.name})")
            record["nodes"][node.name]["os_noise"] = {**noise.describe(), "pid": pid}

    def _start_backgrounds(self, record: dict) -> None:
        """Each device's background (a box decoding a programme: shoal.cluster.background) on
        its first core, and the head-end's streams to them; recorded, ended by down."""
        nodes = [node for node in self.inventory.nodes if node.background is not None]
        if not nodes:
            return
        from shoal.cluster import background

        addresses = {node.name: address_of(self.index(i, node.name))
                     for i, node in enumerate(self.inventory.nodes, start=1)}
        background.start(self.id, nodes, record, self.placement, self.dilation, self.directory,
                         addresses)
        state.write(record)

    def _start_storage(self, record: dict) -> None:
        """The file servers the devices write their output to (shoal.cluster.storage), in the
        head namespace; recorded, ended by down."""
        if not any(node.storage for node in self.inventory.nodes):
            return
        from shoal.cluster import storage

        storage.start(self.id, self.inventory.nodes, record, self.dilation, self.directory,
                      address_of(self.index(0, "head")))
        state.write(record)

    def _start_dutycycle(self, record: dict) -> None:
        state.write(record)  # the controller reads the devices' budgets from the record

        def spawned(entry: dict) -> None:
            record["cpu_controller"] = entry
            state.write(record)

        dutycycle.start(self.id, on_spawn=spawned)

    @property
    def placement(self) -> str:
        """The program every rank starts through (``oncore VARIABLE PROGRAM ARGS...``): it joins
        the core of its device that its local rank (the MPI's ``VARIABLE``; ``-``: none known)
        names, then runs."""
        return str(self.directory / "oncore")

    def _write_placement(self, record: dict) -> None:
        # Per device, one line per core: the groups a rank on that core joins (none where
        # no cgroup is divided: the core index alone then tells the user-space limit).
        cores = self.directory / "cores"
        cores.mkdir(exist_ok=True)
        # Each line: the core's host CPU, then its groups.
        for node in self.inventory.nodes:
            entry = record["nodes"][node.name]
            groups = entry.get("core_cgroups") or [[]] * node.profile.cores
            (cores / node.name).write_text("".join(
                " ".join([str(cpu), *g]) + "\n" for cpu, g in zip(entry["cpuset"], groups)))
        # Pinned by affinity too, where no cpuset holds the core to its host CPU (a delegated
        # group, or the user-space limit): one rank's threads then draw on one CPU's quota.
        taskset = proc.find("taskset")
        shim = Path(self.placement)
        shim.write_text(_ONCORE.format(cluster=self.id, cores=shlex.quote(str(cores)),
                                       core_variable=environment.DEVICE_CORE.name,
                                       pin=f"{shlex.quote(taskset)} -c \"$cpu\" " if taskset else ""))
        shim.chmod(0o755)

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        print(f"shoal: warning: {message}", file=sys.stderr)

    # -- down --------------------------------------------------------------------------
    def down(self) -> None:
        # A stop signal waits until the cluster is gone: cut short, a teardown leaves
        # namespaces and cgroups behind until the next 'cluster down' or 'doctor --fix'.
        with proc.signals_held():
            record = state.read(self.id) or self.record
            if record:
                if record.get("forwarder"):
                    linkemu.stop(record["forwarder"])  # lets it write its counters and log
                state.remove(record)

    def __enter__(self) -> "EmulatedCluster":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    # -- use ---------------------------------------------------------------------------
    def head_prefix(self) -> list[str]:
        """argv prefix that runs a program (mpiexec) in the head namespace."""
        return [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", self.id,
                "--run", "head", "--"]

    def rank_prefix(self, rank_variable: str, layout: str) -> list[str]:
        """argv prefix that starts a rank, from the head, in the device its rank number
        (the MPI's ``rank_variable``) falls on in ``layout`` ("NODE:K,...")."""
        return [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", self.id,
                "--rank", rank_variable, layout, "--"]

    def usage_counter(self, node: str) -> tuple[str, float] | None:
        """What counts a device's CPU time (a power model option: ``cgroup=G``, or
        ``netns=PATH`` where no cgroup exists), and the host CPUs it may use.

        A device's utilisation (for its power model) is its CPU time over
        that budget: a device using its whole budget is fully busy.
        """
        record = state.read(self.id) or self.record or {}
        return usage_of(record.get("nodes", {}).get(node, {}))

    def polling_stalls(self, node: str, ranks: int) -> bool:
        """Whether ``ranks`` ranks that poll while they wait would use up the device's CPU
        quota (and then stall until its next period): more ranks than CPUs of budget."""
        record = state.read(self.id) or self.record or {}
        entry = record.get("nodes", {}).get(node, {})
        core = entry.get("cpu_fraction")
        limited = record.get("cpu_limit", "cgroup" if entry.get("core_cgroups") else "none") != "none"
        return core is not None and _polling_stalls(limited, float(core), int(entry.get("cores", 1)),
                                                    ranks)

    def device_core_share(self, node: str) -> float:
        """Host CPU seconds one device core spends per device CPU second (``held_core_share``)."""
        record = state.read(self.id) or self.record or {}
        return held_core_share(record.get("cpu_limit", "none") != "none",
                               record.get("nodes", {}).get(node, {}), self.dilation)

    def slack_monitor(self) -> "slack.Monitor":
        """A host-slack monitor over this cluster's devices (use it as a context manager)."""
        record = state.read(self.id) or self.record or {}
        nodes = record.get("nodes", {})
        groups = {name: entry.get("device_cgroups", []) for name, entry in nodes.items()}
        budgets = {name: float(entry.get("cpu_budget") or 0) for name, entry in nodes.items()}
        cores = {name: entry.get("core_cgroups", []) for name, entry in nodes.items()}
        quotas = {name: entry.get("quota_us", 0) / 1e6 for name, entry in nodes.items()}
        # Devices whose background shares a core with their ranks: (that core, its pid).
        backgrounds = {name: (int(entry["background"]["core"]), int(entry["background"]["pid"]))
                       for name, entry in nodes.items() if entry.get("background")}
        return slack.Monitor(groups, len(cpulimit.host_cpus()), budgets, cores=cores,
                             core_quotas=quotas, backgrounds=backgrounds)

    def background_counters(self) -> dict:
        """What each device's background and the head-end's streams have done so far ({} where
        no device runs one)."""
        record = state.read(self.id) or self.record or {}
        if not any(entry.get("background") for entry in record.get("nodes", {}).values()):
            return {}
        from shoal.cluster import background

        return background.counters(record)

    def run_on(self, node: str, argv: list[str], check: bool = False,
               timeout: float | None = None) -> proc.Result:
        """Run a program inside a device (for tests and calibration); output captured."""
        full = [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", self.id,
                "--run", node, "--", *argv]
        return proc.run(full, check=check, timeout=timeout)

    def describe(self) -> dict:
        record = state.read(self.id) or self.record
        described = {"id": self.id, **self.inventory.describe(),
                     "addresses": {n: v.get("address") for n, v in record.get("nodes", {}).items()},
                     "emulation": record.get("emulation", {})}
        # What the devices run beside their ranks, as started (an attached cluster's too).
        backgrounds = {n: v["background"] for n, v in record.get("nodes", {}).items() if v.get("background")}
        if backgrounds:
            described["backgrounds"] = backgrounds
            described["background_streams"] = record.get("background_streams", [])
        return described


# /bin/sh, not Python: it runs once per rank, inside the device's CPU budget.
_ONCORE = """#!/bin/sh
# Rank placement of emulated cluster {cluster}: usage: oncore VARIABLE PROGRAM ARGS...
# The rank joins core (VARIABLE mod cores) of the device it runs on, then runs PROGRAM.
read -r host < /proc/sys/kernel/hostname
case "$1" in
  ""|-|*[!A-Za-z0-9_]*) index=$$ ;;  # no local rank known: spread by process id
  *) eval "index=\\${{$1:-$$}}" ;;
esac
shift
list={cores}/"$host"
if [ ! -f "$list" ]; then echo "shoal oncore: $host is not a device of cluster {cluster}" >&2; exit 126; fi
n=0
while IFS= read -r line; do n=$((n + 1)); done < "$list"
core=$((index % n))
i=0
while read -r line_cpu groups; do
  if [ "$i" -eq "$core" ]; then
    cpu=$line_cpu
    for group in $groups; do
      echo $$ > "$group/cgroup.procs" || {{ echo "shoal oncore: cannot join $group" >&2; exit 126; }}
    done
  fi
  i=$((i + 1))
done < "$list"
{core_variable}=$core
export {core_variable}
exec {pin}"$@"
"""


def held_core_share(limited: bool, entry: dict, d: float) -> float:
    """The share of a host core one core of a device is held to at real time (its recorded
    ``cpu_fraction`` is at dilation D): what a device CPU second costs in host CPU seconds,
    the same at any D. 1 where the device is not held (it runs at the host's speed)."""
    fraction = entry.get("cpu_fraction")
    return float(fraction) * d if limited and fraction else 1.0


def _polling_stalls(limited: bool, core_cpus: float, cores: int, ranks: int) -> bool:
    """More ranks on a limited device core than CPUs of its budget: ranks that poll while
    they wait use up its quota (so they wait in event mode, and pay the kernel's wake-up).
    Ranks are spread over the device's cores, one per core first."""
    return limited and ranks >= 1 and math.ceil(ranks / max(1, cores)) > core_cpus + 1e-9


# TCP congestion controls that send a window as soon as it opens (no pacing of their own),
# as the link model assumes: Linux's default since 2.6.19, and Reno, which every kernel lets a
# namespace choose.
UNPACED_CONGESTION = ("cubic", "reno")


def _unpaced_congestion_control() -> str:
    """Give this namespace's TCP a window-based congestion control that does not pace, and
    return it. A namespace inherits the host's default, and a host on BBR paces every
    connection at its own bandwidth estimate: a 4 KiB message then leaves a device in two
    pieces a pacing gap apart, and a broadcast on a shared plant runs 1.0-1.8x the model from
    run to run. A namespace may only choose what net.ipv4.tcp_allowed_congestion_control holds
    (Reno always), so Cubic where allowed, else Reno."""
    ipv4 = Path("/proc/sys/net/ipv4")
    current = (ipv4 / "tcp_congestion_control").read_text().strip()
    if current in UNPACED_CONGESTION:
        return current
    allowed = (ipv4 / "tcp_allowed_congestion_control").read_text().split()
    chosen = next(name for name in UNPACED_CONGESTION if name in allowed or name == "reno")
    try:
        (ipv4 / "tcp_congestion_control").write_text(chosen)
    except OSError:  # /proc/sys read-only (a container): the devices keep the host's
        return current
    return chosen


def _disable_ipv6() -> None:
    # Only IPv4 on the emulated network: launchers then never pick link-local v6.
    for conf in ("default", "all"):
        try:
            Path(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6").write_text("1")
        except OSError:
            pass


def attach(cluster_id: str) -> EmulatedCluster:
    """An EmulatedCluster object for a cluster already up (``shoal cluster up``)."""
    record = state.read(cluster_id)
    if record is None:
        raise ShoalError(f"no emulated cluster {cluster_id!r} is up; see 'shoal cluster status' for the clusters that are up")
    if record.get("shares"):  # spread over hosts: its devices are there, each share a cluster
        first_host, first = next(iter(record["shares"].items()))
        raise ShoalError(f"cluster {cluster_id} is spread over {len(record['shares'])} hosts: its devices "
                         f"are not on this host (runs across them: shoal.cluster.session.attach; one "
                         f"host's share: on {first_host}, {first['id']})")
    cluster = EmulatedCluster.__new__(EmulatedCluster)
    cluster.id, cluster.record, cluster.persistent = cluster_id, record, record.get("persistent")
    cluster.calibrate_cpu, cluster.warnings = False, []
    cluster.dilation = record.get("dilation", 1.0)
    cluster.dilation_asked = record.get("emulation", {}).get("dilation_asked")
    cluster.inventory = _inventory_from_record(record)
    cluster._host = hostspeed.HostSpeed.from_record(record.get("emulation", {}).get("host_speed"))
    return cluster


def _inventory_from_record(record: dict) -> Inventory:
    return inventory_from_description(record["inventory"], f"cluster {record['id']}")


def inventory_from_description(described: dict, where: str) -> Inventory:
    """An emulated inventory back from its ``describe()`` (a record, a host's share of a plan)."""
    from shoal.cluster import inventory as inv

    data = {"cluster": {"mode": "emulated"},
            "nodes": [{k: v for k, v in n.items() if k in ("name", "address", "slots", "profile", "link")}
                      for n in described["nodes"]],
            "profiles": {k: _profile_table(v) for k, v in described.get("profiles", {}).items()},
            "links": {k: {kk: vv for kk, vv in v.items() if kk not in ("name", "sources")} for k, v in described.get("links", {}).items()}}
    return inv.parse(data, where)


def _profile_table(described: dict) -> dict:
    """A profile's description back as a [profiles.NAME] table: only the fields such a table has
    (a description also carries its name, sources, role and boot phases)."""
    from shoal.profiles import tables

    fields = set(tables.ProfileTable.model_fields) - {"pstates"}
    table = {k: v for k, v in described.items() if k in fields and v is not None}
    if described.get("speed_kernel") == "host":  # speed = "host": as fast as this host's core
        table["speed"] = "host"
        table.pop("speed_kernel")
    if described.get("pstates"):
        table["pstates"] = described["pstates"]
    return table
