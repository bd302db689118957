"""Emulated clusters in real network namespaces (needs root, as CI has)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shoal import cluster, environment
from shoal.cluster import cpulimit, emulated, inventory, linkemu, matrix, shaping, slack, state
from shoal.cluster.emulated import EmulatedCluster
from shoal.errors import ShoalError
from tests.cluster.owners import start_owner

# These build clusters in the host's own namespaces, as root does; an ordinary
# user's clusters live in a user namespace (tests/user, run as uid 65534).
host_namespaces = pytest.mark.skipif(os.geteuid() != 0, reason="clusters in the host's namespaces need root; an ordinary user's (in a user namespace) are tested in tests/user")


def netns_names() -> set[str]:
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def assert_gone(record_id: str, names: list[str], cgroups: list[str]) -> None:
    assert not (set(names) & netns_names()), "network namespaces left behind"
    assert not [g for g in cgroups if os.path.exists(g)], "cgroups left behind"
    assert state.read(record_id) is None and not state.cluster_dir(record_id).exists()


def _quota(group: str) -> tuple[int | None, int]:
    """(quota us or None for unlimited, period us) of a cgroup, v1 or v2."""
    if os.path.exists(os.path.join(group, "cpu.cfs_quota_us")):
        quota = int(Path(group, "cpu.cfs_quota_us").read_text())
        return (None if quota < 0 else quota), int(Path(group, "cpu.cfs_period_us").read_text())
    quota, period = Path(group, "cpu.max").read_text().split()
    return (None if quota == "max" else int(quota)), int(period)


@host_namespaces
def test_up_down_hostnames_and_nothing_in_root_namespace():
    root_links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    inv = inventory.from_emulate("2xminnowboard+1xrpi0w")
    with EmulatedCluster(inv, calibrate=False) as emu:
        record = state.read(emu.id)
        names = list(record["netns"])
        assert set(names) <= netns_names()
        for node in ("minnowboard1", "minnowboard2", "rpi0w1"):
            out = emu.run_on(node, ["hostname"], check=True).stdout
            assert out.strip() == node
        # Names resolve to the emulated addresses inside a device.
        hosts = emu.run_on("rpi0w1", ["getent", "hosts", "minnowboard2"], check=True).stdout
        assert hosts.split()[0] == record["nodes"]["minnowboard2"]["address"]
        # Every peer (the head too) is resolved for good in each device's neighbour table:
        # the kernel's one ARP cache for all namespaces overflowed at 32 devices otherwise.
        neigh = emu.run_on("rpi0w1", ["ip", "neigh", "show", "dev", "eth0"], check=True).stdout
        macs = {line.split()[0]: line.split()[2] for line in neigh.splitlines() if "PERMANENT" in line}
        assert set(macs) == {record["head"]["address"], record["nodes"]["minnowboard1"]["address"],
                             record["nodes"]["minnowboard2"]["address"]}
        own = emu.run_on("minnowboard2", ["ip", "-o", "link", "show", "eth0"], check=True).stdout
        assert f"link/ether {macs[record['nodes']['minnowboard2']['address']]} " in own
        # Each device's TCP sends its window unpaced, as the link model does, whatever the host's
        # default (a host on BBR paces every connection).
        congestion = record["emulation"]["tcp_congestion"]
        assert congestion in emulated.UNPACED_CONGESTION
        for node in ("minnowboard1", "rpi0w1"):
            used = emu.run_on(node, ["cat", "/proc/sys/net/ipv4/tcp_congestion_control"], check=True).stdout
            assert used.strip() == congestion
        # Shaped links at the configured rates: the forwarder's TAP ports, or tc on the veths.
        if record["emulation"]["link_emulator"] == "forwarder":
            details = emu.run_on("rpi0w1", ["ip", "-d", "link", "show", "eth0"],
                                 check=True).stdout
            assert "tun type tap" in details
            ports = linkemu.stats(record["forwarder"], emu.directory / "forwarder.json")["ports"]
            wifi = ports[3]  # head, minnowboard1, minnowboard2, rpi0w1
            assert wifi["netns"].endswith("-rpi0w1")
            assert wifi["up"]["rate_bps"] == wifi["down"]["rate_bps"] == 40e6
            assert wifi["up"]["delay_ns"] == 1_000_000  # half of wifi-n's 2 ms each way
            assert ports[0]["up"]["rate_bps"] == 0  # the head's port is not shaped
        else:
            qdisc = emu.run_on("rpi0w1", ["tc", "qdisc", "show", "dev", "eth0"], check=True).stdout
            assert "40Mbit" in qdisc
        # CPU limit: each core of the device has its own quota of the profile's speed (a share
        # of a host core); the device's group above them is not limited and counts their sum.
        entry = record["nodes"]["minnowboard1"]
        assert len(entry["core_cgroups"]) == 2  # the MinnowBoard's two cores
        for core in entry["core_cgroups"]:
            quota, period = _quota(core[0])
            assert quota / period == pytest.approx(entry["cpu_fraction"], rel=0.01)
            assert quota >= 1000
        assert _quota(entry["device_cgroups"][0])[0] is None
        assert entry["cpu_budget"] == pytest.approx(2 * entry["cpu_fraction"])
        cgroups = list(record["cgroups"])
        assert subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout == root_links
    assert_gone(emu.id, names, cgroups)


@host_namespaces
def test_kill_9_leftovers_are_removed_by_the_next_down(tmp_path):
    owner, cluster_id, record = start_owner(
        "2xnuc", "p = subprocess.Popen(c.head_prefix()[:-3] + ['--run', 'nuc1', '--', 'sleep', '300'])\n")
    assert record and not record["persistent"]
    inode = os.stat(state.NETNS_DIR / record["netns"][2]).st_ino
    from shoal.cluster import sysns
    # Wait for the sleeper to enter the device (a loaded host takes more than a moment).
    end = time.monotonic() + 60
    while not sysns.pids_in_netns(inode) and time.monotonic() < end:
        time.sleep(0.1)
    assert sysns.pids_in_netns(inode), "the rank stand-in never started inside the device"
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert state.read(cluster_id) is not None and state.is_leftover(state.read(cluster_id))
    proc = subprocess.run([sys.executable, "-m", "shoal", "cluster", "down"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert f"removed {cluster_id}" in proc.stdout
    assert not sysns.pids_in_netns(inode)
    assert_gone(cluster_id, record["netns"], record["cgroups"])


@host_namespaces
def test_the_first_ip_netns_add_of_a_boot_leaves_a_clusters_files_mounted_once():
    # On a fresh boot /run/netns is a plain directory; `ip netns add` (the doctor's probe,
    # a user's own) then binds it onto itself with copies of the files already in it,
    # hiding the originals for good. Reproduced in a mount namespace of the test's own.
    done = in_fresh_boot_mounts(
        "import subprocess\n"
        "from shoal.cluster import inventory, state\n"
        "from shoal.cluster.emulated import EmulatedCluster\n"
        "from tests.cluster.test_emulated import mount_count\n"
        "with EmulatedCluster(inventory.from_emulate('1xnuc'), calibrate=False) as c:\n"
        "    subprocess.run(['ip', 'netns', 'add', c.id + '-probe'], check=True)\n"
        "    subprocess.run(['ip', 'netns', 'del', c.id + '-probe'], check=True)\n"
        "    names = c.record['netns']\n"
        "    print([mount_count(state.NETNS_DIR / n) for n in names])\n"
        "print([mount_count(state.NETNS_DIR / n) for n in names],"
        " [n for n in names if (state.NETNS_DIR / n).exists()])\n")
    assert done.returncode == 0, done.stderr
    while_up, after = done.stdout.splitlines()
    assert while_up == "[1, 1, 1]"
    assert after == "[0, 0, 0] []"


@host_namespaces
def test_a_leftovers_file_hidden_under_a_later_mount_is_said_and_the_rest_removed():
    # A cluster of an earlier shoal, up before the first `ip netns add`: its file cannot
    # be reached or removed. Removing the record says so in one line and goes on.
    done = in_fresh_boot_mounts(
        "import os, subprocess\n"
        "from shoal.cluster import state\n"
        "name = f'shoal-hidden{os.getpid()}-sw'\n"
        "path = state.NETNS_DIR / name\n"
        "path.touch()\n"
        "subprocess.run(['unshare', f'--net={path}', 'true'], check=True)\n"
        "subprocess.run(['mount', '--rbind', str(state.NETNS_DIR), str(state.NETNS_DIR)],"
        " check=True)\n"
        "record = {'id': f'hidden{os.getpid()}', 'netns': [name], 'uts': [], 'cgroups': []}\n"
        "state.write(record)\n"
        "state.remove(record)\n"
        "print(state.read(record['id']))\n")
    for left in state.NETNS_DIR.glob("shoal-hidden*"):  # no longer mounted out here
        left.unlink()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
    said = [line for line in done.stderr.splitlines() if "stays until this host restarts" in line]
    assert len(said) == 1 and "shoal-hidden" in said[0]


def in_fresh_boot_mounts(script: str) -> subprocess.CompletedProcess:
    """Run Python in a mount namespace of its own where /run/netns is a plain directory,
    as on a freshly booted host (whatever this host's /run/netns is)."""
    shell = ("umount -l /run/netns 2>/dev/null; umount -l /run/netns 2>/dev/null; "
             f"exec {sys.executable} -c \"$0\"")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", shell,
                           script], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])


def mount_count(path: Path) -> int:
    """How many mounts sit at ``path`` (stacked and hidden ones each count)."""
    with open("/proc/self/mountinfo") as table:
        return sum(line.split()[4] == str(path) for line in table)


@host_namespaces
def test_down_never_touches_other_live_clusters():
    with EmulatedCluster(inventory.from_emulate("1xnuc"), calibrate=False) as emu:
        reaped = cluster_ids_removed_by_reap_in_another_process()
        # Other tests on this host leave crashed clusters on purpose (tests/cluster/
        # test_kill_points.py); those may go, this live one must not.
        assert emu.id not in reaped
        assert state.read(emu.id) is not None
        assert os.path.exists(state.NETNS_DIR / emu.netns("nuc1"))


def cluster_ids_removed_by_reap_in_another_process() -> list[str]:
    done = subprocess.run([sys.executable, "-c", "from shoal.cluster import state; "
                           "print(' '.join(state.reap()))"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@host_namespaces
def test_launcher_helper_behaves_like_ssh_and_rejects_bad_hosts():
    with EmulatedCluster(inventory.from_emulate("1xnuc"), calibrate=False) as emu:
        # ssh semantics: words joined and run by a shell on the device, -x style flags ignored.
        out = subprocess.run([emu.launcher, "-x", "nuc1", "echo", "$(hostname)", "'a  b'"],
                             capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout == "nuc1 a  b\n"
        for host in ("nuc1; touch /tmp/shoal-pwned", "nu c1", "$(reboot)", "other"):
            bad = subprocess.run([emu.launcher, host, "true"], capture_output=True, text=True)
            assert bad.returncode == 255
            assert "is not a device of emulated cluster" in bad.stderr
        assert not os.path.exists("/tmp/shoal-pwned")
        bad = subprocess.run([emu.launcher, "-Z", "nuc1", "true"], capture_output=True, text=True)
        assert bad.returncode == 255 and "unsupported ssh option" in bad.stderr
        # Direct mode passes arguments through without any shell.
        out = emu.run_on("nuc1", ["printf", "%s|", "a b", "$(x)", ";"])
        assert out.stdout == "a b|$(x)|;|"


@host_namespaces
def test_host_names_with_metacharacters_never_reach_mpiexec(mpich):
    with cluster.open(emulate="1xnuc", calibrate=False) as c:
        with pytest.raises(ShoalError, match="only 1 nodes|has 1"):
            c.job(mpich, nodes=2, argv=["true"])
    from shoal.mpi.launch import HostSlots
    for bad in ("a b", "x;y", "-oProxyCommand=x"):
        with pytest.raises(ShoalError, match="not a valid host name"):
            HostSlots(bad)


@host_namespaces
def test_shaped_link_bounds_mpi_bandwidth_and_traffic_crosses_the_veths(any_mpi):
    """20 Mbit/s links: the MPI stream between two devices runs at the shaped rate."""
    rate = 20e6
    inv = inventory.from_emulate("2xminnowboard")
    links = {"links": {"test-20m": {"rate_bps": rate}}}
    from shoal import profiles
    link = profiles.link_from_table("test-20m", links["links"]["test-20m"], "test")
    inv.nodes[:] = [n.__class__(n.name, n.profile, link, n.slots, n.address) for n in inv.nodes]
    from shoal.cluster.session import EmulatedDevices

    c = EmulatedDevices(inv, EmulatedCluster(inv, calibrate=False), owns=True)
    with c:
        before = shaping.interface_counters(c.emulated.netns("minnowboard1"), "eth0")
        rows = matrix.measure(c, any_mpi, bw_size_B=1 << 20, bw_total_B=4 << 20, lat_iters=20)
        after = shaping.interface_counters(c.emulated.netns("minnowboard1"), "eth0")
        described = c.describe()
    assert len(rows) == 1
    row = rows[0]
    assert (row["host_a"], row["host_b"]) == ("minnowboard1", "minnowboard2")
    goodput_bps = row["bandwidth_Bps"] * 8
    # Never above the shaped rate, and not far below it (headers take ~4%).
    assert 0.85 * rate < goodput_bps <= 1.01 * rate, goodput_bps
    # The streamed bytes left minnowboard1 through its shaped eth0.
    assert after["tx_bytes"] - before["tx_bytes"] >= row["bw_bytes"]
    assert described["mode"] == "emulated" and len(described["nodes"]) == 2


@host_namespaces
def test_sweep_api_places_ranks_on_the_first_k_nodes(mpich):
    with cluster.open(emulate="3xrpi3", calibrate=False) as c:
        job = c.job(mpich, nodes=2, ranks_per_node=1, argv=["hostname"])
        argv, env = job.command()
        assert "-hosts" in argv and argv[argv.index("-hosts") + 1] == "rpi31:1,rpi32:1"
        assert job.rank_env["UCX_TLS"] == "tcp,self"
        assert job.rank_env["UCX_TCP_KEEPIDLE"] == "inf"  # a crowded plant starves keepalive probes
        proc = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert sorted(proc.stdout.split()) == ["rpi31", "rpi32"]
        manifest = c.describe()
        assert json.dumps(manifest)  # serialisable for the run manifest
        assert manifest["emulation"]["cgroup"]["version"] in (1, 2)
        # The CPUs and the capacity this command had (less where its cgroup holds a quota).
        capacity = manifest["emulation"]["host_capacity"]
        assert capacity == cpulimit.cpu_capacity().describe()
        assert 0 < capacity["capacity"] <= capacity["cpus"] <= manifest["emulation"]["host_cpus"]


_WHERE_AM_I = ("import json, os; print(json.dumps([os.environ.get('SHOAL_DEVICE_CORE'), "
               "[l.strip().split(':', 2)[2] for l in open('/proc/self/cgroup') "
               "if l.split(':')[1] in ('cpu', 'cpu,cpuacct', '')][0], "
               "sorted(os.sched_getaffinity(0))]))")


def json_values(text: str) -> list:
    """Every JSON value in ``text``: the launcher may join two ranks' lines into one."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
    return values


@host_namespaces
def test_each_rank_runs_on_a_core_of_its_own_with_that_cores_budget(any_mpi):
    """Two ranks on a two-core device: one in each core's group (own quota, own host CPU)."""
    with cluster.open(emulate="1xminnowboard", calibrate=False, dilation=2) as c:
        record = state.read(c.emulated.id)
        entry = record["nodes"]["minnowboard1"]
        job = c.job(any_mpi, nodes=1, ranks_per_node=2, argv=[sys.executable, "-c", _WHERE_AM_I])
        # libshoalwait's durations are the device's: its ranks are told the dilation.
        assert job.rank_env[environment.WAIT_DILATION.name] == "2"
        proc = subprocess.run(job.command()[0], env=job.popen_env(), capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        seen = sorted(json_values(proc.stdout))
        assert [core for core, _, _ in seen] == ["0", "1"], proc.stdout
        for (core, group, cpus), groups in zip(seen, entry["core_cgroups"]):
            assert groups[0].endswith(group), (group, groups)
            assert _quota(groups[0])[0] == entry["quota_us"]
            if entry["cpuset"]:
                assert cpus == [entry["cpuset"][int(core)]]
        # Both cores count toward the device's CPU time (what its power model reads).
        assert c.emulated.usage_counter("minnowboard1")[0].startswith("cgroup=")


@host_namespaces
def test_cli_up_status_down_roundtrip():
    up = subprocess.run([sys.executable, "-m", "shoal", "cluster", "up", "--emulate", "2xstb",
                         "--no-calibrate", "--json"], capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    described = json.loads(up.stdout)
    cluster_id = described["id"]
    try:
        assert [n["link"] for n in described["nodes"]] == ["docsis-27m", "docsis-27m"]
        status = subprocess.run([sys.executable, "-m", "shoal", "cluster", "status"],
                                capture_output=True, text=True)
        assert f"{cluster_id}: 2 devices, up" in status.stdout
        again = subprocess.run([sys.executable, "-m", "shoal", "cluster", "up", "--emulate", "2xstb",
                                "--name", cluster_id], capture_output=True, text=True)
        assert again.returncode != 0 and "already up" in again.stderr
        # Without ids, down removes only leftovers and says which cluster it kept up.
        leftovers = subprocess.run([sys.executable, "-m", "shoal", "cluster", "down"],
                                   capture_output=True, text=True)
        assert leftovers.returncode == 0 and state.read(cluster_id) is not None
        kept = [ln for ln in leftovers.stderr.splitlines() if ln.startswith("shoal: kept")]
        assert len(kept) == 1 and cluster_id in kept[0] and "--all" in kept[0]
    finally:
        down = subprocess.run([sys.executable, "-m", "shoal", "cluster", "down", cluster_id],
                              capture_output=True, text=True)
    assert down.returncode == 0 and state.read(cluster_id) is None


def test_matrix_names_the_slow_device_of_a_mixed_cluster(tmp_path):
    # A Pi Zero W (its own Wi-Fi link profile) among two NUCs on gigabit Ethernet.
    proc = subprocess.run([sys.executable, "-m", "shoal", "cluster", "matrix", "--emulate",
                           "2xnuc+1xrpi0w", "--bytes", str(4 << 20), "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert len(result["pairs"]) == 3
    assert [n["node"] for n in result["slow_nodes"]] == ["rpi0w1"]
    assert result["slow_nodes"][0]["bandwidth_Bps"] * 2 < result["slow_nodes"][0]["others_bandwidth_Bps"]


@host_namespaces
def test_cpu_fidelity_times_the_kernel_in_every_rank_of_each_configuration(mpich):
    """What `shoal cluster fidelity` and benchmarks/cpu_fidelity.py measure (no timing asserted)."""
    from shoal.cluster import cpufidelity

    with cluster.open(emulate="2xminnowboard", calibrate=False, dilation=2) as c:
        result = cpufidelity.measure(c, mpich, [(2, 1), (1, 2)], reps=2, steps=20_000)
    assert result["dilation"] == 2
    by_config = {(p["devices"], p["ranks_per_device"]): p for p in result["points"]}
    assert set(by_config) == {(1, 1), (2, 1), (1, 2)}
    assert by_config[(1, 1)]["ratio"] == 1.0
    for point in by_config.values():
        assert len(point["times_s"]) == 2 and min(point["times_s"]) > 0
        assert point["median_s"] == pytest.approx(point["ratio"] * result["single_rank_s"])
        # The share of its core's budget the slowest rank got: at most one host CPU (a loop this
        # short may end inside one quota period, before the budget throttles it).
        assert 0 < point["delivered"] <= 1.05 / result["core_budget_cpus"]


@host_namespaces
def test_a_device_core_whose_budget_the_host_cannot_give_is_flagged(mpich, tmp_path, monkeypatch):
    """One core more than the host has CPUs, each of 0.75 of a host core, at D = 1 (forced):
    two cores share the first host CPU and get 0.5 each while they compute; the point is
    flagged short (the other CPUs keep room for the monitor itself)."""
    from shoal.cluster import cpufidelity

    cores = len(os.sched_getaffinity(0)) + 1
    profile = tmp_path / "quad.toml"
    profile.write_text(f'[profiles.quad]\ncores = {cores}\nspeed = 0.75\nidle_W = 2\nbusy_W = 8\n'
                       'link = "gigabit"\n')
    monkeypatch.setenv("SHOAL_PROFILES", str(profile))
    # host_speed 1: the profile's speed is a share of this host's core, whatever its speed.
    with cluster.open(emulate="1xquad", calibrate=False, dilation=1, host_speed=1.0) as c:
        with c.slack_monitor() as monitor:
            # The monitor reads a task's run time only while it lives (4 samples a second): on
            # a fast host the kernel's ranks may come and go between two samples, which leaves
            # nothing to judge; the kernel then runs again, up to three times.
            for _ in range(3):
                t0 = time.monotonic()
                cpufidelity.kernel_time(c, mpich, 1, cores, steps=4_000_000)
                verdict = monitor.between(t0, time.monotonic())
                if verdict["devices"]["quad1"]["owed_s"] > 0:
                    break
    device = verdict["devices"]["quad1"]
    assert not verdict["ok"] and device["shortfall"] > 0.1, (device, verdict["reasons"])
    assert "quad1 got" in verdict["reasons"][0]
    columns = slack.row_columns(verdict)
    assert columns["host_slack"] == "short" and columns["cpu_periods"] > 0


def test_a_device_namespace_gets_an_unpaced_congestion_control_whatever_the_host_default():
    # Any user: a namespace of one's own (unshare -Urn) may choose what the host allows
    # namespaces to choose. On a host on BBR (this one) it takes Cubic where allowed, else Reno;
    # on a host on Cubic it keeps it. Either way the namespace then reads what was returned.
    code = ("from pathlib import Path\n"
            "from shoal.cluster import emulated\n"
            "chosen = emulated._unpaced_congestion_control()\n"
            "print(chosen, Path('/proc/sys/net/ipv4/tcp_congestion_control').read_text().strip())\n")
    done = subprocess.run(["unshare", "-Urn", sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    chosen, used = done.stdout.split()
    assert chosen == used and chosen in emulated.UNPACED_CONGESTION
    host = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
    if host not in emulated.UNPACED_CONGESTION:
        assert chosen == ("cubic" if "cubic" in allowed else "reno")


def test_where_proc_sys_is_read_only_the_devices_keep_the_hosts_congestion_control():
    # A container mounts /proc/sys read-only: the cluster comes up on the host's default and
    # says so (EmulatedCluster warns when the devices' TCP is not in UNPACED_CONGESTION).
    code = ("from shoal.cluster import emulated\n"
            "print(emulated._unpaced_congestion_control())\n")
    done = subprocess.run(["unshare", "-Urnm", "sh", "-c",
                           "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && "
                           f"exec {sys.executable} -c \"$0\"", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    host = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    assert done.stdout.strip() == host
