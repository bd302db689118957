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

import ipaddress
import os
import secrets
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from shoal import environment, verbose
from shoal.cluster import cpulimit, shaping, state, sysns
from shoal.cluster.inventory import Inventory
from shoal.errors import ShoalError

SUBNET = ipaddress.ip_network("10.77.0.0/16")
HEAD = "shoal-head"


def _address(index: int) -> str:
    # index 0 is the head; devices follow. Skip .0 and .255 of every /24.
    return str(SUBNET.network_address + 256 * (index // 250) + index % 250 + 1)


def _check_root() -> None:
    if os.geteuid() != 0:
        raise ShoalError("emulated clusters need root, or --emulate on a command that runs ranks "
                         "(which moves into a user namespace of its own); 'shoal cluster up' "
                         "keeps a cluster after the command and needs root")
    for tool in ("unshare", "tc"):
        if not any(Path(p, tool).exists() for p in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]):
            raise ShoalError(f"'{tool}' not found; install util-linux and iproute2")


def _new_id() -> str:
    return "c" + secrets.token_hex(3)


class EmulatedCluster:
    """Bring an emulated cluster up and down; describe it for manifests."""

    def __init__(self, inventory: Inventory, cluster_id: str | None = None,
                 persistent: bool = False, calibrate: bool = True) -> None:
        self.inventory = inventory
        self.id = cluster_id or _new_id()
        if not (2 <= len(self.id) <= 12 and self.id.replace("-", "").isalnum() and self.id.islower()):
            raise ShoalError(f"cluster id {self.id!r}: use 2-12 lower-case letters, digits or '-'")
        self.persistent = persistent
        self.calibrate_cpu = calibrate
        self.record: dict = {}
        self.warnings: list[str] = []

    # -- names -------------------------------------------------------------------------
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
        _check_root()
        state.reap()
        if state.read(self.id) is not None:
            raise ShoalError(f"an emulated cluster named {self.id} is already up; "
                             f"'shoal cluster down {self.id}' first or choose another name")
        nodes = self.inventory.nodes
        names = ["sw", "head"] + [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise ShoalError("node names 'sw' and 'head' are reserved in emulated clusters")
        layout = cpulimit.detect()
        record = {
            "id": self.id, "owner_pid": os.getpid(),
            "owner_start": sysns.process_start_time(os.getpid()),
            "persistent": False, "created": time.time(),
            "netns": [self.netns(n) for n in names],
            "uts": [f"{n}.uts" for n in names[1:]],
            "cgroups": [], "inventory": self.inventory.describe(),
            "nodes": {}, "head": {"netns": self.netns("head"), "uts": "head.uts",
                                  "address": _address(0), "hostname": HEAD, "cgroups": []},
        }
        self.record = record
        state.NETNS_DIR.mkdir(parents=True, exist_ok=True)
        state.write(record)  # intent first: a crash from here on leaves a record to reap
        try:
            self._create(record, layout)
        except BaseException:
            state.remove(record)
            raise
        record["persistent"] = self.persistent
        state.write(record)
        return self

    def _create(self, record: dict, layout: cpulimit.CgroupLayout) -> None:
        from pyroute2 import IPRoute

        directory = self.directory
        hosts = ["127.0.0.1 localhost", f"{_address(0)} {HEAD}"]
        for i, node in enumerate(self.inventory.nodes, start=1):
            hosts.append(f"{_address(i)} {node.name}")
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
            verbose.show(argv)
            proc = subprocess.run(argv, capture_output=True, text=True)
            if proc.returncode != 0:
                raise ShoalError(f"cannot create network namespace {path}: {proc.stderr.strip()}")

        jobs = [("sw", None), ("head", HEAD)] + [(n.name, n.name) for n in self.inventory.nodes]
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda job: make_ns(*job), jobs))

        # 2. Links: veth pairs created straight into the namespaces.
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
        for i, (name, _) in enumerate(jobs[1:]):
            path = str(state.NETNS_DIR / self.netns(name))
            with sysns.in_netns(path):
                _disable_ipv6()
                ipr = IPRoute()
            with ipr:
                ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
                eth = ipr.link_lookup(ifname="eth0")[0]
                ipr.addr("add", index=eth, address=_address(i), prefixlen=SUBNET.prefixlen)
                ipr.link("set", index=eth, state="up")

        # 3. Shaping: each device's uplink (its eth0) and downlink (its switch port).
        netem = shaping.netem_available(self.netns("sw"), "d0")
        if not netem and any(n.link.latency_s > 0 or n.link.loss > 0 for n in self.inventory.nodes):
            self._warn("this kernel has no netem (sch_netem): link delay and loss are NOT "
                       "emulated, only rates; load sch_netem to emulate them")
        switch_lines = []
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = []
            for i, node in enumerate(self.inventory.nodes, start=1):
                switch_lines += shaping.qdisc_lines(f"d{i}", node.link, netem)
                futures.append(pool.submit(shaping.apply, self.netns(node.name),
                                           shaping.qdisc_lines("eth0", node.link, netem)))
            futures.append(pool.submit(shaping.apply, self.netns("sw"), switch_lines))
            for future in futures:
                future.result()

        # 4. CPU limits.
        calibration = self._limit_cpus(record, layout)
        record["emulation"] = {
            "netem": netem, "cgroup": layout.describe(), "period_us": cpulimit.PERIOD_US,
            "host_speed": self.inventory.host_speed, "host_cpus": len(cpulimit.host_cpus()),
            "calibration": calibration, "warnings": self.warnings,
        }
        for i, node in enumerate(self.inventory.nodes, start=1):
            record["nodes"][node.name].update(
                {"netns": self.netns(node.name), "uts": f"{node.name}.uts",
                 "address": _address(i), "hostname": node.name})

    def _limit_cpus(self, record: dict, layout: cpulimit.CgroupLayout) -> dict:
        cpus = cpulimit.host_cpus()
        host_speed = self.inventory.host_speed
        budgets = {}
        next_cpu = 0
        for node in self.inventory.nodes:
            fraction = min(1.0, node.profile.speed / host_speed)
            cores = node.profile.cores
            budget = min(cores, len(cpus)) * fraction
            cpuset = None
            if cores < len(cpus):
                cpuset = [cpus[(next_cpu + k) % len(cpus)] for k in range(cores)]
                next_cpu += cores
            budgets[node.name] = (fraction, budget, cpuset)
            record["nodes"][node.name] = {"cpu_fraction": fraction, "cpu_budget": budget,
                                          "cpuset": cpuset, "cgroups": []}
        if layout.version == 0:
            self._warn("no writable cgroup cpu controller: device CPUs are NOT limited "
                       "(delegate the cpu controller or run as root)")
            return {}
        total = sum(b for _, b, _ in budgets.values())
        if total > len(cpus) * 1.001:
            self._warn(f"the devices' CPU budgets add up to {total:.2f} CPUs but this host has "
                       f"{len(cpus)}: when all devices compute at once they run slower than "
                       "their profiles")
        for node in self.inventory.nodes:
            fraction, budget, cpuset = budgets[node.name]
            planned = cpulimit.create(layout, self.id, node.name, budget, cpuset)
            for path in planned:
                if path not in record["cgroups"]:
                    record["cgroups"].append(path)
            record["nodes"][node.name]["cgroups"] = [p for p in planned
                                                     if Path(p).name == node.name]
            state.write(record)
        if not self.calibrate_cpu:
            return {}
        calibration: dict = {}
        for node in self.inventory.nodes:
            name = node.profile.name
            if name in calibration:
                continue
            fraction, budget, _ = budgets[node.name]
            groups = record["nodes"][node.name]["cgroups"]
            result = cpulimit.calibrate(groups, node.profile.cores, fraction)
            # One correction step: scale the quota by the measured error, then
            # measure again; CFS bandwidth accounting slices make small quotas drift.
            if 0.05 < abs(result["error"]) < 0.6:
                corrected = budget * fraction / result["achieved_fraction"]
                for other in self.inventory.nodes:
                    if other.profile.name == name:
                        cpu_groups = [g for g in record["nodes"][other.name]["cgroups"]
                                      if Path(g).is_relative_to(layout.cpu_base)]
                        for group in cpu_groups:
                            cpulimit.set_budget(layout, group, corrected)
                        record["nodes"][other.name]["cpu_budget"] = corrected
                first = result
                result = cpulimit.calibrate(groups, node.profile.cores, fraction)
                result["before_correction"] = first
            if abs(result["error"]) > 0.1:
                self._warn(f"{name}: CPU calibration reached {result['achieved_fraction']:.3f} of a "
                           f"host core instead of {fraction:.3f}; is the host busy with other work?")
            result["profile_speed"] = node.profile.speed
            result["achieved_speed"] = result["achieved_fraction"] * host_speed
            calibration[name] = result
        return calibration

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        print(f"shoal: warning: {message}", file=sys.stderr)

    # -- down --------------------------------------------------------------------------
    def down(self) -> None:
        record = state.read(self.id) or self.record
        if record:
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

    def usage_cgroup(self, node: str) -> tuple[str, float] | None:
        """The cgroup counting a device's CPU time, and the host CPUs it may use.

        A device's utilisation (for its power model) is its CPU time over
        that budget: a device using its whole budget is fully busy.
        """
        record = state.read(self.id) or self.record or {}
        entry = record.get("nodes", {}).get(node, {})
        group = cpulimit.usage_group(entry.get("cgroups", []))
        budget = entry.get("cpu_budget")
        return (group, float(budget)) if group and budget else None

    def run_on(self, node: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """Run a program inside a device (for tests and calibration)."""
        full = [sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", self.id,
                "--run", node, "--", *argv]
        verbose.show(full)
        return subprocess.run(full, **kwargs)

    def describe(self) -> dict:
        record = state.read(self.id) or self.record
        return {"id": self.id, **self.inventory.describe(),
                "addresses": {n: v.get("address") for n, v in record.get("nodes", {}).items()},
                "emulation": record.get("emulation", {})}


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
    cluster = EmulatedCluster.__new__(EmulatedCluster)
    cluster.id, cluster.record, cluster.persistent = cluster_id, record, record.get("persistent")
    cluster.calibrate_cpu, cluster.warnings = False, []
    cluster.inventory = _inventory_from_record(record)
    return cluster


def _inventory_from_record(record: dict) -> Inventory:
    from shoal.cluster import inventory as inv

    described = record["inventory"]
    data = {"cluster": {"mode": "emulated"},
            "nodes": [{k: v for k, v in n.items() if k in ("name", "address", "slots", "profile", "power", "link")}
                      for n in described["nodes"]],
            "profiles": {k: _profile_table(v) for k, v in described.get("profiles", {}).items()},
            "links": {k: {kk: vv for kk, vv in v.items() if kk != "name"} for k, v in described.get("links", {}).items()}}
    result = inv.parse(data, f"cluster {record['id']}")
    result.host_speed = record.get("emulation", {}).get("host_speed", 1.0)
    return result


def _profile_table(described: dict) -> dict:
    table = {k: v for k, v in described.items() if k not in ("name", "sources", "pstates") and v is not None}
    if described.get("pstates"):
        table["pstates"] = described["pstates"]
    return table
