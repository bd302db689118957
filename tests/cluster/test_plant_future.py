"""The plant's future as "what if" beside seed 002's DOCSIS 2.0: a DOCSIS 3.0 plant (8 channels
bonded down, 4 up) and a service flow per device (`--qos stb=10M`), as the forwarder is told
to carry them and as the link model times them; refusals in one line."""

from __future__ import annotations

import pytest

from shoal import profiles
from shoal.cluster import inventory, linkemu, linkmodel, qos
from shoal.errors import ShoalError
from shoal.execute.where import Where
from shoal.inputs import schema
from shoal.profiles import clock, tables


def test_docsis3_bonds_more_channels_down_than_up_and_the_forwarder_is_told_so():
    link = profiles.load_links()["docsis3-8x4"]
    assert (link.rate_bps, link.up_channel_bps, link.upstream_bps) == (310.5e6, 108e6, 15e6)
    assert link.capped and link.shared and link.grant_interval_s == 0.002
    # Upstream: the box paced at its service flow, on a 108 Mbit/s channel, after its grant;
    # downstream: the 310.5 Mbit/s channel, no grant.
    assert linkemu.direction(link, 1, True, 8) == "1.5e+07/1000000/0/0/262144/2000000/1/1.08e+08"
    assert linkemu.direction(link, 2, False, 8).startswith("3.105e+08/1000000/0/0/")
    # DOCSIS 2.0 stays symmetric.
    old = profiles.load_links()["docsis-27m"]
    assert old.up_channel_bps == old.rate_bps == 27e6
    assert linkemu.direction(old, 1, True, 8) == "5.12e+06/1000000/0/0/262144/2000000/1/2.7e+07"


def test_an_uncapped_box_sends_at_the_upstream_channel_not_the_downstream():
    link = profiles.load_links()["docsis3-8x4"]
    free = qos.apply(link, 108e6, "test")   # a flow as fast as the channel: not capped
    assert not free.capped and free.upstream_bps == 108e6
    medium = linkmodel.Medium(free, 2)
    payload = 256 * 1024
    expected = (free.grant_wait_s + 8 * linkmodel.wire_bytes(payload) / 108e6
                + linkmodel.path(free).latency_s - free.grant_wait_s
                + 8 * linkmodel.frame_line_bytes(payload - (linkmodel.frames(payload) - 1) * linkmodel.MSS_B) / 310.5e6)
    assert medium.send(0, 0.0, payload) == pytest.approx(expected)
    # A 256 KiB message from a capped box: its flow, not the channel, sets the time.
    capped = linkmodel.Medium(link, 2).send(0, 0.0, payload)
    assert capped > 8 * linkmodel.wire_bytes(payload) / 15e6


def test_a_service_flow_folds_into_the_devices_and_is_refused_where_it_cannot_be():
    assert qos.parse("stb=10M, nuc=512k") == {"stb": "10M", "nuc": "512k"}
    assert qos.bits_per_s("10Mbit/s") == 10e6 and qos.bits_per_s("2.5e7") == 2.5e7
    spec = Where(emulate="4xstb+1xnuc", qos={"stb": "10M"}, link="docsis-27m").emulate
    assert spec == "4xstb@qos=10M+1xnuc"
    nodes = inventory.from_emulate(spec, "docsis-27m").nodes
    assert nodes[0].link.device_rate_bps == 10e6 and nodes[0].describe()["qos_bps"] == 10e6
    assert nodes[4].link.device_rate_bps == 5.12e6 and "qos_bps" not in nodes[4].describe()
    assert nodes[0].link.name == nodes[4].link.name   # one plant: the same channels
    assert clock.with_clock("2xstb@qos=10M", "powersave") == "2xstb@qos=10M@powersave"
    with pytest.raises(ShoalError, match=r"a service flow of 30 Mbit/s is above docsis-27m's upstream "
                                         r"channel of 27 Mbit/s: give at most that"):
        inventory.from_emulate("4xstb@qos=30M", "docsis-27m")
    inventory.from_emulate("4xstb@qos=100M", "docsis3-8x4")   # 4 channels bonded up
    with pytest.raises(ShoalError, match=r"a service flow caps a device on a shared medium; gigabit"):
        inventory.from_emulate("2xnuc@qos=10M", "gigabit")
    with pytest.raises(ShoalError, match=r"--qos 'fast' is not a rate"):
        qos.parse("stb=fast")
    with pytest.raises(ShoalError, match=r"already gives stb a service flow"):
        qos.with_qos("2xstb@qos=5M", {"stb": "10M"})
    with pytest.raises(ShoalError, match=r"--qos nuc=10M: --emulate 2xstb has no nuc devices"):
        qos.with_qos("2xstb", {"nuc": "10M"})
    with pytest.raises(ShoalError, match=r"--qos stb=10M sets the service flows of devices emulated here"):
        Where(qos={"stb": "10M"}).validate()


def test_a_service_flows_priority_reaches_the_forwarder_as_its_upstreams_last_field():
    assert qos.flow("10M/7") == (10e6, 7) and qos.flow("10M") == (10e6, None)
    nodes = inventory.from_emulate("1xstb@qos=5.12M/7+2xstb", "docsis-27m").nodes
    assert [n.link.device_priority for n in nodes] == [7, None, None]
    assert nodes[0].link.name == nodes[1].link.name   # one plant, one channel, two priorities
    ports = [linkemu.direction(n.link, 1, upstream=True, sharing=3) for n in nodes]
    assert ports[0].endswith("/1/2.7e+07/7") and ports[1].endswith("/1/2.7e+07")
    # A flow as fast as the channel still takes its turn by priority.
    assert linkemu.direction(qos.apply(nodes[2].link, 27e6, "test", 3), 1, upstream=True).endswith("/1/2.7e+07/3")
    with pytest.raises(ShoalError, match=r"a service flow's priority is 0 to 7 \(7 first\), e.g. 10M/7"):
        qos.parse("stb=10M/8")
    # A cluster attached to reads its links back from its record, priority included.
    from shoal.cluster.emulated import inventory_from_description

    again = inventory_from_description(inventory.from_emulate("2xstb@qos=5.12M/7", "docsis-27m").describe(), "test")
    assert again.nodes[0].link.device_priority == 7


def test_a_link_table_with_an_upstream_channel_must_be_a_shared_one():
    with pytest.raises(ShoalError, match="upstream_channel_bps is the upstream channel of a shared medium"):
        schema.validate(tables.LinkTable, {"rate_bps": 1e8, "upstream_channel_bps": 5e7}, "mine.toml", "",
                        at=("links", "x"))
    with pytest.raises(ShoalError, match=r"device_rate_bps <= upstream_channel_bps"):
        schema.validate(tables.LinkTable, {"rate_bps": 1e8, "upstream_channel_bps": 2e7, "shared": True,
                                           "device_rate_bps": 5e7}, "mine.toml", "", at=("links", "x"))
