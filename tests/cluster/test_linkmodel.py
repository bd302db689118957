"""The link model: framing arithmetic and the expected time of a message."""

from __future__ import annotations

import pytest

from shoal.cluster import linkmodel
from shoal.profiles import LinkType, link_from_table, load_links
from shoal.errors import ShoalError

FAST = LinkType("fast-ethernet", 100e6, latency_s=100e-6)


def test_framing_numbers_of_a_1500_byte_mtu():
    assert linkmodel.MSS_B == 1448
    assert linkmodel.frame_line_bytes(1448) == 1538
    assert linkmodel.FRAME_OVERHEAD_B == 90
    assert linkmodel.goodput_fraction() == pytest.approx(0.9415, abs=1e-4)
    # A frame is never shorter than 84 line bytes (60 + FCS + preamble + gap).
    assert linkmodel.frame_line_bytes(0) == 90 and linkmodel.MIN_LINE_FRAME_B == 84


@pytest.mark.parametrize("size, frames, wire", [
    (0, 1, 90), (1, 1, 91), (1448, 1, 1538), (1449, 2, 1538 + 91),
    (64 * 1024, 46, 65536 + 46 * 90), (1 << 20, 725, (1 << 20) + 725 * 90),
])
def test_wire_bytes_count_every_frame(size, frames, wire):
    assert linkmodel.frames(size) == frames
    assert linkmodel.wire_bytes(size) == wire


def test_one_way_time_at_100_mbit():
    path = linkmodel.path(FAST)
    # 1 MiB: 89.1 ms on the line, one frame more through the store-and-forward switch.
    assert path.serialization_s(1 << 20) == pytest.approx(8 * ((1 << 20) + 725 * 90) / 100e6
                                                           + 8 * (1048576 - 724 * 1448 + 90) / 100e6)
    assert path.one_way_s(1 << 20) == pytest.approx(0.0893, abs=2e-4)
    # 1 KiB: latency plus one 1114-byte frame on each of the two links.
    assert path.one_way_s(1024) == pytest.approx(100e-6 + 2 * 8 * 1114 / 100e6)
    assert path.stream_Bps() == pytest.approx(100e6 / 8 * 1448 / 1538)


def test_mixed_path_takes_the_slow_rate_and_half_of_each_latency():
    slow = LinkType("wifi", 40e6, latency_s=2e-3)
    there, back = linkmodel.Path(FAST, slow), linkmodel.Path(slow, FAST)
    assert there.latency_s == back.latency_s == pytest.approx((100e-6 + 2e-3) / 2)
    assert there.rate_bps == back.rate_bps == 40e6
    # A long message costs its wire bytes at the slow rate plus one frame at the fast one,
    # whichever comes first.
    size = 64 * 1024
    slow_part = 8 * linkmodel.wire_bytes(size) / 40e6
    assert there.serialization_s(size) == pytest.approx(slow_part + 8 * 1538 / 100e6)
    assert back.serialization_s(size) == pytest.approx(slow_part + 8 * (size - 45 * 1448 + 90) / 100e6)


def test_loss_of_a_path_draws_once_per_link():
    lossy = LinkType("lossy", 10e6, loss=0.1)
    assert linkmodel.path(lossy).loss == pytest.approx(1 - 0.9 * 0.9)


def test_every_builtin_link_number_has_a_source():
    for link in load_links().values():
        assert {"rate", "latency", "jitter", "loss"} <= set(link.sources), link.name
        assert link.jitter_s <= link.latency_s


@pytest.mark.parametrize("table, message", [
    ({"rate_bps": 1e6, "latency_s": -0.001}, r"links.bad.latency_s: must be at least 0"),
    ({"rate_bps": 1e6, "loss": 1.5}, r"links.bad.loss: must be below 1"),
    ({"rate_bps": 1e6, "loss": 1.0}, r"links.bad.loss: must be below 1"),
    ({"rate_bps": 1e6, "latency_s": 0.001, "jitter_s": 0.002}, r"needs jitter_s <= latency_s"),
    ({"rate_bps": 0}, r"links.bad.rate_bps: must be above 0"),
    ({"rate_bps": 1e6, "delay": 3}, r"links.bad.delay: unknown field"),
    ({"rate_bps": 1e6, "device_rate_bps": 5e5}, r"caps one device on a shared medium: give shared = true"),
    ({"rate_bps": 1e6, "shared": True, "device_rate_bps": 2e6}, r"needs device_rate_bps <= rate_bps"),
])
def test_bad_links_are_refused_with_what_to_fix(table, message):
    with pytest.raises(ShoalError, match=message):
        link_from_table("bad", table, "test.toml")


def test_link_sources_are_kept_per_number():
    link = link_from_table("x", {"rate_bps": 1e6, "rate_source": "datasheet",
                                 "latency_s": 1e-3, "latency_source": "measured"}, "t")
    assert link.sources == {"rate": "datasheet", "latency": "measured"}


def test_every_builtin_link_names_a_switch_with_sourced_watts():
    from shoal import profiles

    for link in load_links().values():
        switch = profiles.switch_of(link)
        assert switch is not None, link.name
        assert 0 < switch.idle_W <= switch.busy_W
        assert switch.sources.keys() >= {"idle", "busy"}, switch.name


@pytest.mark.parametrize("table, message", [
    ({"idle_W": 2.0}, "needs idle_W and busy_W"),
    ({"idle_W": 3.0, "busy_W": 2.0}, "needs idle_W <= busy_W"),
    ({"idle_W": -1.0, "busy_W": 2.0}, r"switches.sw.idle_W: must be at least 0"),
    ({"idle_W": 1.0, "busy_W": 2.0, "ports": 8}, r"switches.sw.ports: unknown field"),
])
def test_bad_switches_are_refused(table, message):
    from shoal import profiles

    with pytest.raises(ShoalError, match=message):
        profiles.switch_from_table("sw", table, "test.toml")


def test_a_link_naming_an_unknown_switch_says_so():
    from shoal import profiles

    link = link_from_table("x", {"rate_bps": 1e6, "switch": "nowhere"}, "t")
    with pytest.raises(ShoalError, match="names switch 'nowhere', which is not defined"):
        profiles.switch_of(link)


def test_fidelity_sets_each_result_against_the_link_model():
    from shoal.bench import fidelity

    path = fidelity.model_path("nuc", "ethernet-100m")
    rows = fidelity.rows_of([
        {"test": "imb.PingPong", "size_B": "1024", "time_median_s": str(path.one_way_s(1024) * 1.05),
         "time_ci_low_s": "0", "time_ci_high_s": "1", "dilation": "2.0", "host_slack": "short",
         "host_slack_note": "steal 10%"},
        {"test": "imb.Uniband", "size_B": "65536", "bandwidth_median_Bps": str(path.stream_Bps() * 0.97),
         "dilation": "2.0"},
    ], path)
    assert [r["kind"] for r in rows] == ["ping-pong", "stream"]
    assert rows[0]["ratio"] == pytest.approx(1.05) and rows[0]["host_slack"] == "short"
    assert rows[1]["ratio"] == pytest.approx(0.97) and rows[1]["dilation"] == 2.0
    result = {"runs": [{"rows": [dict(rows[0], measured=1.0)]}, {"rows": [dict(rows[0], measured=1.08)]}]}
    assert fidelity.dilation_agreement(result)[0]["ratio"] == pytest.approx(1.08)


def test_a_rendezvous_mpi_pays_one_round_trip_above_its_eager_limit(monkeypatch):
    from shoal.mpi import discover
    from shoal.mpi.kinds import openmpi as open_mpi

    path = linkmodel.path(LinkType("docsis", 27e6, latency_s=5e-3))
    assert path.one_way_s(65536, 65472) == pytest.approx(path.one_way_s(65536) + 2 * (5e-3 + path.serialization_s(0)))
    assert path.one_way_s(4096, 65472) == path.one_way_s(4096)
    # Open MPI's limit comes from its own ompi_info (or the variable that overrides it); MPICH has none.
    ompi, mpich = discover.resolve("openmpi"), discover.resolve("mpich")
    assert ompi.impl.rendezvous_above_B(ompi) == 65536 - open_mpi.OB1_HEADER_B
    assert mpich.impl.rendezvous_above_B(mpich) is None
    monkeypatch.setenv("OMPI_MCA_btl_tcp_eager_limit", "8192")
    assert ompi.impl.rendezvous_above_B(ompi) == 8192 - open_mpi.OB1_HEADER_B


def test_a_shared_medium_serialises_a_broadcasts_transfers_and_a_port_each_does_not():
    from dataclasses import replace

    from shoal import profiles

    # The channel alone: every box may send at its whole rate (the cap is tested below).
    plant = replace(profiles.load_links()["docsis-27m"], device_rate_bps=0.0)
    assert plant.shared and plant.grant_wait_s == 1.5 * plant.grant_interval_s
    ports = replace(plant, shared=False, grant_interval_s=0.0)
    # Two ranks: one transfer, nothing to share (the grant wait is inside the latency).
    assert linkmodel.bench_bcast_s(plant, 2, 4096) == pytest.approx(
        linkmodel.bench_bcast_s(ports, 2, 4096), rel=0.05)
    # 32 ranks, 64 KiB: 31 transfers one after another on the one upstream channel, against
    # five rounds of transfers side by side.
    wire_s = 8 * linkmodel.wire_bytes(65536) / plant.rate_bps
    shared, alone = linkmodel.bench_bcast_s(plant, 32, 65536), linkmodel.bench_bcast_s(ports, 32, 65536)
    assert shared >= 31 * wire_s
    assert 5 * wire_s <= alone < 6 * wire_s + 6 * ports.latency_s
    # The seed's shape: 128 boxes, 256 KiB: about 10 s on the plant.
    assert 9 < linkmodel.bench_bcast_s(plant, 128, 262144, reps=3) < 12


def test_the_medium_grants_an_idle_device_and_lets_a_busy_one_go_on():
    from shoal.profiles import LinkType

    link = LinkType("plant", rate_bps=8e6, latency_s=0.01, shared=True, grant_interval_s=0.002)
    medium = linkmodel.Medium(link, 3)
    wire_s = 8 * linkmodel.wire_bytes(1000) / link.rate_bps
    edge_s = wire_s  # one frame
    first = medium.send(0, 0.0, 1000)
    assert first == pytest.approx(0.003 + wire_s + (0.01 - 0.003) + edge_s)
    # Device 0 still has its queue: the next goes right behind it; device 1 waits its
    # grant and then for the channel.
    second = medium.send(0, 0.0, 1000)
    assert second == pytest.approx(first + wire_s)
    third = medium.send(1, 0.0, 1000)
    assert third == pytest.approx(second + wire_s)


def test_a_capped_device_sends_at_its_cap_and_capped_devices_share_what_the_channel_leaves():
    link = LinkType("plant", rate_bps=8e6, latency_s=0.01, shared=True, device_rate_bps=2e6)
    assert link.upstream_bps == 2e6 and linkmodel.path(link).rate_bps == 2e6
    size = 100_000
    own_s, channel_s = 8 * linkmodel.wire_bytes(size) / 2e6, 8 * linkmodel.wire_bytes(size) / 8e6
    edge_s = 8 * linkmodel.frame_line_bytes(size - (linkmodel.frames(size) - 1) * linkmodel.MSS_B) / 8e6
    medium = linkmodel.Medium(link, 6)
    # Four capped devices fill the 8 Mbit/s channel side by side: each ends at its own pace.
    ends = [medium.send(d, 0.0, size) for d in range(4)]
    assert ends == pytest.approx([own_s + 0.01 + edge_s] * 4)
    # Two more at the same time find the channel full until those end: then they go at their cap.
    more = [medium.send(d, 0.0, size) for d in (4, 5)]
    assert more == pytest.approx([2 * own_s + 0.01 + edge_s] * 2)
    # All six carried 6 messages' channel time in 2 own times: no more than the channel holds.
    assert 6 * channel_s <= 2 * own_s
    # A device's next message goes right behind its first, at its cap.
    assert medium.send(0, 0.0, size) == pytest.approx(2 * own_s + 0.01 + edge_s)


def test_the_plants_per_box_cap_gives_the_seeds_ping_pong_and_bandwidth():
    """docsis-27m's device_rate_bps is fitted to seed 002's PingPong over its six sizes: a mean
    time of 122 ms and a mean bandwidth of 0.39 MB/s (5 ms of latency, as the profile has)."""
    from shoal import profiles

    plant = linkmodel.path(load_links()["docsis-27m"])
    sizes = [64, 1024, 8192, 32768, 131072, 262144]
    times = [plant.one_way_s(s) for s in sizes]
    assert sum(times) / 6 == pytest.approx(0.122, rel=0.05)
    assert sum(s / t for s, t in zip(sizes, times)) / 6 == pytest.approx(0.39e6, rel=0.05)


def test_the_blades_network_fitted_to_the_seeds_ping_pong_time_holds_its_bandwidth_too():
    """gigabit-blades' latency is fitted to seed 002's blade PingPong mean over its six sizes
    (0.9 ms at 1 Gbit/s); the mean bandwidth it then gives is the check: the seed's 45-50 MB/s."""
    from shoal import profiles

    blades = linkmodel.path(load_links()["gigabit-blades"])
    sizes = [64, 1024, 8192, 32768, 131072, 262144]
    times = [blades.one_way_s(s) for s in sizes]
    assert sum(times) / 6 == pytest.approx(0.9e-3, rel=0.05)
    assert 45e6 <= sum(s / t for s, t in zip(sizes, times)) / 6 <= 50e6
    assert profiles.load()["xeon-blade"].link == "gigabit-blades"
