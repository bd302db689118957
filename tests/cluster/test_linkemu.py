"""The link forwarder (shoal-linkemu) in real network namespaces, with real MPI traffic."""

from __future__ import annotations

import csv
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from shoal import cluster
from shoal.cluster import session
from shoal.cluster import inventory, linkemu, linkmodel, matrix, state, sysns
from shoal.cluster.emulated import EmulatedCluster
from shoal.profiles import link_from_table
from tests.cluster.owners import start_owner

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="TAP ports in the host's namespaces need root; an ordinary user's forwarder carries "
                                "the shaped 100 Mbit/s link measured in tests/user/test_as_ordinary_user.py::"
                                "test_cluster_up_is_seen_by_status_used_by_attach_and_removed_by_down")


def _cluster(n: int, link_table: dict, tmp_path=None) -> session.Cluster:
    inv = inventory.from_emulate(f"{n}xminnowboard")
    link = link_from_table("test-link", link_table, "test")
    inv.nodes[:] = [node.__class__(node.name, node.profile, link, node.slots, node.address)
                    for node in inv.nodes]
    emu = EmulatedCluster(inv, calibrate=False, dilation=1)
    if tmp_path is not None:
        emu.link_log = tmp_path / "frames.csv"
    return session.EmulatedDevices(inv, emu, owns=True)


def test_bad_ports_are_refused_in_one_line():
    exe = str(linkemu.binary())
    for args, message in ((["--port", "/run/netns/x,eth0,1e6/-5/0/0/0,0/0/0/0/0"], "bad link"),
                          (["--port", "/run/netns/x,eth0,1e6/0/0/1.5/0,0/0/0/0/0"], "loss <= 1"),
                          (["--port", "only-two,fields"], "NETNS,IFNAME,UP,DOWN"),
                          (["--port", "/run/netns/x,eth0,1e6/0/0/0/0/0/1/5e5,0/0/0/0/0"], "channel_bps >= rate_bps"),
                          (["--port", "/run/netns/x,eth0,1e6/0/0/0/0/0/0/2e6,0/0/0/0/0"], "on a channel"),
                          (["--port", "/run/netns/x,eth0,1e6/0/0/0/0/0/1/2e6/8,0/0/0/0/0"], "priority 0-7"),
                          ([], "at least one --port"),
                          (["--bogus"], "unknown argument")):
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=10)
        assert proc.returncode == 2, args
        assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr


def test_mpi_traffic_keeps_the_link_schedule(any_mpi, tmp_path):
    """20 Mbit/s, 2 ms: every frame MPI sends waits its delay and line time, and no faster.

    Only what holds however busy the host is: the forwarder's schedule is arithmetic on the
    times frames reached it, so no frame leaves before its time and none overtakes another.
    How late frames are written, the host latency that cluster up measures and the stream's
    share of the rate depend on the host's load: benchmarks/linkemu_schedule.py prints them
    against their bounds."""
    rate, latency = 20e6, 2e-3
    c = _cluster(2, {"rate_bps": rate, "latency_s": latency}, tmp_path)
    with c:
        record = state.read(c.emulated.id)
        assert record["emulation"]["link_emulator"] == "forwarder"
        host = record["emulation"]["host_latency_s"]
        # Each port takes half its device's share off each direction: a frame from
        # device 1 to device 2 loses half of each device's.
        first, second = (host["by_device"][n.name] for n in c.nodes[:2])
        host_s = (first + second) / 2
        # As measured, held to the link's delay (the test keeps no bound between the two, which
        # a busy host can reverse: polling 1.2 ms against sleeping 0.19 ms once).
        assert 0 <= host["polling"] <= latency and 0 <= host["sleeping"] <= latency
        assert {first, second} <= {host["polling"], host["sleeping"]}
        rows = matrix.measure(c, any_mpi, lat_size_B=1024, bw_size_B=256 << 10,
                              bw_total_B=4 << 20, lat_iters=20)
        counters = linkemu.stats(record["forwarder"], c.emulated.directory / "forwarder.json")
    row = rows[0]
    # Never faster than the link: no message beats the model, no stream beats the rate.
    model = linkmodel.path(link_from_table("l", {"rate_bps": rate, "latency_s": latency}, "t"))
    assert row["latency_s"] >= model.one_way_s(1024) - host_s
    assert 0 < row["bandwidth_Bps"] <= model.stream_Bps() * 1.001
    # The streamed bytes crossed device 1's uplink and device 2's downlink (ports 1 and 2).
    ports = counters["ports"]
    assert ports[1]["up"]["wire_bytes"] >= row["bw_bytes"]
    assert ports[2]["down"]["wire_bytes"] >= row["bw_bytes"]
    assert all(p["write_errors"] == 0 for p in ports)
    # An unpaced TCP (the devices') grows its window until the queue's tail drops, as a real
    # link's buffer does: only where the stream queues, device 1's uplink (the bandwidth
    # above stays near the rate: its retransmits go out while the queue still drains).
    assert all(p["down"]["dropped"] == 0 for p in ports)
    assert all(p["up"]["dropped"] == 0 for i, p in enumerate(ports) if i != 1)
    # The schedule of every frame from device 1 to device 2: it left the switch no
    # sooner than the two half delays (less the host's own latency) after it arrived,
    # was never written before its time, and frames on the downlink are spaced by at
    # least their line time (FIFO at the rate).
    frames = [r for r in csv.DictReader(open(tmp_path / "frames.csv"))
              if (r["in_port"], r["out_port"]) == ("1", "2")]
    assert len(frames) > 100
    delay_ns = latency * 1e9 - host_s * 1e9
    previous = None
    for f in frames:
        arrived, scheduled, delivered = (int(f[k]) for k in ("arrived_ns", "scheduled_ns", "delivered_ns"))
        wire = max(int(f["len"]) - 10, 60) + 24  # virtio header off, short frames padded
        assert scheduled - arrived >= delay_ns - 2 + 2 * 8e9 * wire / rate * 0.999 or int(f["len"]) > 1600
        assert delivered >= scheduled
        if previous is not None:
            assert scheduled >= previous
        previous = scheduled


def _udp_blast(c, count: int) -> tuple[int, dict]:
    """Send ``count`` datagrams from device 1 to device 2; return how many arrived and the counters."""
    record = state.read(c.emulated.id)
    a, b = (str(state.NETNS_DIR / c.emulated.netns(n)) for n in ("minnowboard1", "minnowboard2"))
    address_b = record["nodes"]["minnowboard2"]["address"]
    with sysns.in_netns(b):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((address_b, 0))
    rx.settimeout(1.0)
    with sysns.in_netns(a):
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    got = [0]

    def receive():
        try:
            while True:
                rx.recv(2048)
                got[0] += 1
        except OSError:
            pass

    thread = threading.Thread(target=receive)
    thread.start()
    # Prime ARP, then send at well below the rate so no queue ever drops.
    for _ in range(3):
        tx.sendto(b"hello", rx.getsockname())
    time.sleep(0.2)
    got[0] = 0
    for _ in range(count):
        tx.sendto(b"x" * 200, rx.getsockname())
        time.sleep(0.0003)
    thread.join()
    tx.close()
    rx.close()
    return got[0], linkemu.stats(record["forwarder"], c.emulated.directory / "forwarder.json")


def test_loss_drops_frames_at_the_links_rate():
    loss, count = 0.2, 2000
    c = _cluster(2, {"rate_bps": 100e6, "latency_s": 1e-4, "loss": loss})
    with c:
        # The host's latency is not probed over TCP on a lossy link (retransmissions).
        assert "lossy link" in state.read(c.emulated.id)["emulation"]["host_latency_s"]["skipped"]
        arrived, counters = _udp_blast(c, count)
    expected = count * (1 - loss) ** 2  # one draw on the uplink, one on the downlink
    sigma = (count * (1 - (1 - loss) ** 2) * (1 - loss) ** 2) ** 0.5
    assert abs(arrived - expected) < 5 * sigma, (arrived, expected)
    ports = counters["ports"]
    # Every datagram the forwarder did not lose reached the device.
    lost = ports[1]["up"]["lost"] + ports[2]["down"]["lost"]
    assert ports[1]["up"]["frames"] - ports[2]["down"]["lost"] >= arrived


def test_kill_9_of_the_owner_leaves_no_forwarder_and_no_tap(tmp_path):
    owner, cluster_id, record = start_owner("2xminnowboard")
    forwarder = record["forwarder"]
    assert linkemu.alive(forwarder)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert linkemu.alive(forwarder)  # the switch outlives its owner ...
    down = subprocess.run([sys.executable, "-m", "shoal", "cluster", "down"], capture_output=True,
                          text=True, timeout=60)
    # (Another `cluster down` on this machine may have reaped it first.)
    assert down.returncode == 0 and state.read(cluster_id) is None
    assert not linkemu.alive(forwarder)  # ... until the leftover is reaped
    assert not (set(record["netns"]) & set(os.listdir(state.NETNS_DIR)))
    taps = subprocess.run(["ip", "-o", "link", "show", "type", "tun"], capture_output=True,
                          text=True).stdout
    assert "eth0" not in taps


def test_the_switch_is_counted_once_in_a_configurations_power(tmp_path):
    import json

    import pandas as pd

    from shoal import profiles

    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "shoal", "bench", "--emulate", "2xminnowboard",
                           "--tests", "imb.PingPong", "--sizes", "1K", "--budget", "0.2",
                           "--power", "model", "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    row = pd.read_csv(out / "results.csv").iloc[0]
    sources = row["power_source"].split(",")
    assert sources.count("switch:fast-ethernet-8:model") == 1
    assert sorted(s for s in sources if not s.startswith("switch:")) == [
        "minnowboard1:model", "minnowboard2:model"]
    board = profiles.load()["minnowboard"]
    switch = profiles.load_switches()["fast-ethernet-8"]
    assert row["power_mean_W"] >= 2 * board.idle_W + switch.idle_W - 1e-6
    assert row["dilation"] == 1.0 and row["host_slack"] in ("ok", "short")
    manifest = json.loads((out / "manifest.json").read_text())
    described = next(iter(manifest["clusters"].values()))
    assert [s["name"] for s in described["switches"]] == ["fast-ethernet-8"]
    assert described["emulation"]["dilation"] == 1.0


def _udp_sockets(c: session.Cluster, record: dict) -> tuple[list[socket.socket], list[str]]:
    """A UDP socket bound in each of the first two devices, and their addresses."""
    names = [n.name for n in c.nodes[:2]]
    addresses = [record["nodes"][n]["address"] for n in names]
    socks = []
    for name, address in zip(names, addresses):
        with sysns.in_netns(str(state.NETNS_DIR / c.emulated.netns(name))):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        s.bind((address, 9000))
        socks.append(s)
    return socks, addresses


def _stream_both_ways(socks: list[socket.socket], addresses: list[str], count: int, size: int) -> None:
    """Each of two devices sends ``count`` datagrams of ``size`` bytes to the other, both at once."""
    start = threading.Barrier(2)

    def stream(i: int) -> None:
        start.wait()
        for _ in range(count):
            socks[i].sendto(b"x" * size, (addresses[1 - i], 9000))

    threads = [threading.Thread(target=stream, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _streamed_both_ways(table: dict, tmp_path, count: int, size: int, settle_s: float) -> dict:
    """Two devices on ``table``'s link stream to each other at once; the forwarder's counters
    once ``settle_s`` has let the streams drain (its frames in tmp_path/frames.csv)."""
    c = _cluster(2, table, tmp_path)
    with c:
        record = state.read(c.emulated.id)
        socks, addresses = _udp_sockets(c, record)
        _stream_both_ways(socks, addresses, count, size)
        time.sleep(settle_s)
        counters = linkemu.stats(record["forwarder"], c.emulated.directory / "forwarder.json")
        for s in socks:
            s.close()
    return counters


def test_a_shared_medium_serialises_every_devices_upstream_and_grants_idle_ones(tmp_path):
    """Two devices stream to each other on one shared 8 Mbit/s plant: both streams take turns on
    the one upstream channel (with a port each they would overlap), and a datagram from an
    idle device waits 1-2 MAP intervals for its grant before its line time."""
    rate, latency, interval = 8e6, 8e-3, 2e-3
    table = {"rate_bps": rate, "latency_s": latency, "shared": True, "grant_interval_s": interval}
    c = _cluster(2, table, tmp_path)
    count, size = 200, 1000
    with c:
        record = state.read(c.emulated.id)
        socks, addresses = _udp_sockets(c, record)
        # Isolated datagrams first (each device idle when it sends), then both streams at once.
        for _ in range(10):
            socks[0].sendto(b"p" * 64, (addresses[1], 9000))
            time.sleep(3 * latency)
        _stream_both_ways(socks, addresses, count, size)
        time.sleep(2 * count * 8 * (size + 100) / rate + 0.5)
        counters = linkemu.stats(record["forwarder"], c.emulated.directory / "forwarder.json")
        for s in socks:
            s.close()
    ports = counters["ports"]
    assert ports[1]["up"]["channel"] == ports[2]["up"]["channel"] == 1
    assert ports[1]["down"]["channel"] == ports[2]["down"]["channel"] == 2
    assert ports[1]["up"]["grant_ns"] == round(interval * 1e9) and ports[1]["down"]["grant_ns"] == 0
    assert counters["channels"][0]["wire_bytes"] == ports[1]["up"]["wire_bytes"] + ports[2]["up"]["wire_bytes"]
    frames = list(csv.DictReader(open(tmp_path / "frames.csv")))
    wire = lambda f: max(int(f["len"]) - 10, 60) + 24  # noqa: E731 - virtio header off, padded
    # An idle device's datagram: fixed delay (the latency less the mean grant wait), then a
    # grant 1-2 intervals after it arrived, then its line time up and down.
    fixed_ns = (latency - 1.5 * interval) * 1e9
    pings = [f for f in frames if (f["in_port"], f["out_port"]) == ("1", "2")
             and int(f["len"]) == 10 + 14 + 20 + 8 + 64]
    assert len(pings) == 10
    for f in pings:
        took = int(f["scheduled_ns"]) - int(f["arrived_ns"]) - fixed_ns - 2 * 8e9 * wire(f) / rate
        assert interval * 1e9 - 1e3 <= took <= 2 * interval * 1e9 + 1e3, took
    # Both streams: their frames reach the far end one line time apart at least, as one channel
    # carries them all (a port each would deliver the two streams side by side).
    streamed = sorted((int(f["scheduled_ns"]), wire(f)) for f in frames
                      if int(f["len"]) == 10 + 14 + 20 + 8 + size and f["out_port"] in ("1", "2"))
    assert len(streamed) > 1.9 * count and {f["in_port"] for f in frames if int(f["len"]) > 1000} == {"1", "2"}
    for (t0, _), (t1, w1) in zip(streamed, streamed[1:]):
        assert t1 - t0 >= 8e9 * w1 / rate - 1e3


def test_capped_devices_on_a_shared_medium_send_at_their_cap_side_by_side(tmp_path):
    """Two devices capped at 2 Mbit/s on one 8 Mbit/s plant stream at once: each device's frames
    leave at its cap, and the two streams go side by side in what the channel leaves (a channel
    that waited for one device's paced frames would take twice as long)."""
    channel, cap, latency = 8e6, 2e6, 8e-3
    table = {"rate_bps": channel, "latency_s": latency, "shared": True, "grant_interval_s": 2e-3,
             "device_rate_bps": cap}
    count, size = 100, 1000
    counters = _streamed_both_ways(table, tmp_path, count, size, count * 8 * (size + 100) / cap + 0.5)
    ports = counters["ports"]
    assert ports[1]["up"]["rate_bps"] == cap and ports[1]["up"]["channel_bps"] == channel
    assert ports[1]["down"]["rate_bps"] == channel and ports[1]["down"]["channel_bps"] == 0
    assert counters["channels"][0]["wire_bytes"] == ports[1]["up"]["wire_bytes"] + ports[2]["up"]["wire_bytes"]
    frames = list(csv.DictReader(open(tmp_path / "frames.csv")))
    streams = {port: sorted(int(f["scheduled_ns"]) for f in frames
                            if int(f["len"]) == 10 + 14 + 20 + 8 + size and f["in_port"] == port
                            and f["out_port"] in ("1", "2"))  # not a copy flooded to the head
               for port in ("1", "2")}
    line_B = size + 8 + 20 + 14 + 24  # UDP, IP, Ethernet headers and the line's own bytes
    own_ns, down_ns = 8e9 * line_B / cap, 8e9 * line_B / channel
    for port, times in streams.items():
        assert len(times) > 0.95 * count, port
        # Paced at the device's cap: its frames arrive its own line time apart on average, and
        # no two closer than that less one frame of the other stream on the shared downstream.
        assert (times[-1] - times[0]) / (len(times) - 1) >= own_ns - 1e3, port
        assert min(b - a for a, b in zip(times, times[1:])) >= own_ns - down_ns - 1e3, port
    # Side by side: both streams end within one stream's paced time (and a little), not two.
    span = max(t[-1] for t in streams.values()) - min(t[0] for t in streams.values())
    assert (count - 1) * own_ns - 1e3 <= span <= 1.25 * count * own_ns, (span, own_ns)


def test_a_higher_priority_service_flow_is_served_first_on_a_busy_channel(tmp_path):
    """Two devices capped at 4 Mbit/s on one 5 Mbit/s plant stream at once, one at traffic
    priority 7 and one at 0: the head-end's turn goes to the priority-7 flow whenever it has a
    frame ready, so it keeps its own pace (4 Mbit/s) and the other gets what is left; served
    in the order frames are ready, each would get half the channel and end together."""
    from shoal.cluster import qos

    channel, cap, latency = 5e6, 4e6, 8e-3
    plant = link_from_table("test-link", {"rate_bps": channel, "latency_s": latency, "shared": True,
                                          "grant_interval_s": 2e-3}, "test")
    links = [qos.apply(plant, cap, "test", 7), qos.apply(plant, cap, "test", 0)]
    inv = inventory.from_emulate("2xminnowboard")
    inv.nodes[:] = [node.__class__(node.name, node.profile, link, node.slots, node.address)
                    for node, link in zip(inv.nodes, links)]
    emu = EmulatedCluster(inv, calibrate=False, dilation=1)
    emu.link_log = tmp_path / "frames.csv"
    count, size = 150, 1000
    line_B = size + 8 + 20 + 14 + 24
    with session.EmulatedDevices(inv, emu, owns=True) as c:
        record = state.read(c.emulated.id)
        socks, addresses = _udp_sockets(c, record)
        _stream_both_ways(socks, addresses, count, size)
        time.sleep(2 * count * 8 * line_B / channel + 0.5)
        counters = linkemu.stats(record["forwarder"], c.emulated.directory / "forwarder.json")
        for s in socks:
            s.close()
    ups = [counters["ports"][p]["up"] for p in (1, 2)]
    assert [u["priority"] for u in ups] == [7, 0] and [u["dropped"] for u in ups] == [0, 0]
    frames = list(csv.DictReader(open(tmp_path / "frames.csv")))
    streams = {port: sorted(int(f["scheduled_ns"]) for f in frames
                            if int(f["len"]) == 10 + 14 + 20 + 8 + size and f["in_port"] == port
                            and f["out_port"] in ("1", "2"))
               for port in ("1", "2")}
    assert [len(t) for t in streams.values()] == [count, count]
    start = min(t[0] for t in streams.values())
    own_ns, channel_ns = 8e9 * line_B / cap, 8e9 * line_B / channel
    high, low = streams["1"][-1] - start, streams["2"][-1] - start
    # The priority-7 flow at its own pace (a grant's wait and a few frames of the other's already
    # on the channel aside); the priority-0 flow last, after the channel carried both.
    assert high <= count * own_ns + 10 * channel_ns + 4e6, (high, count * own_ns)
    assert low >= (2 * count - 2) * channel_ns, (low, 2 * count * channel_ns)
    assert low - high >= 0.25 * count * channel_ns, (high, low)


def test_a_capped_device_holds_only_its_own_buffer_on_a_busy_shared_medium(tmp_path):
    """Two devices capped at 4 Mbit/s on one 5 Mbit/s plant each send 300 KB at once: each holds
    at most its buffer (32 KiB) until the channel has carried it and drops the rest, so no
    frame waits longer than a full buffer takes at half the channel (with the old unbounded
    wait for the channel, the last of 600 KB waited about a second)."""
    channel, cap, latency, buffer_B = 5e6, 4e6, 8e-3, 32768
    table = {"rate_bps": channel, "latency_s": latency, "shared": True, "grant_interval_s": 2e-3,
             "device_rate_bps": cap, "device_buffer_B": buffer_B}
    count, size = 300, 1000
    counters = _streamed_both_ways(table, tmp_path, count, size,
                                   2 * count * 8 * (size + 100) / channel + 0.5)
    ups = [counters["ports"][p]["up"] for p in (1, 2)]
    assert [u["limit_B"] for u in ups] == [buffer_B, buffer_B]
    assert all(u["dropped"] > 0 for u in ups), ups
    frames = list(csv.DictReader(open(tmp_path / "frames.csv")))
    waits = [int(f["scheduled_ns"]) - int(f["arrived_ns"]) for f in frames
             if int(f["len"]) == 10 + 14 + 20 + 8 + size and f["out_port"] in ("1", "2")]
    line_B = size + 8 + 20 + 14 + 24
    assert len(waits) >= 2 * (buffer_B // line_B), len(waits)  # each buffer's worth came through
    bound_s = (buffer_B + line_B) * 8 / (channel / 2) + 2 * 2e-3 + latency + 8 * line_B / channel
    assert max(waits) <= bound_s * 1e9, (max(waits) / 1e9, bound_s)
