"""Links between the hosts of a spread cluster, as plain data: one address plan for the whole
cluster, each share's peers, the refusal of a link faster than the underlay, the judgement of
frames that crossed late or were lost, and chrony's view of a host's clock. (The forwarders
themselves exchanging frames between two Slurm hosts: test_multihost.py.)"""

from __future__ import annotations

import dataclasses

import pytest

from shoal.cluster import chrony, crosslinks, inventory, linkemu
from shoal.cluster.emulated import address_of, mac_of
from shoal.errors import ShoalError

SHARES = {"h1": ["a1", "a2"], "h2": ["b1"], "h3": ["c1", "c2"]}
ADDRESSES = {"h1": "10.99.0.11", "h2": "10.99.0.12", "h3": "10.99.0.13"}


def test_one_address_plan_numbers_every_member_of_the_cluster_once():
    plan = crosslinks.plan("plant", SHARES, ADDRESSES)
    indices = [i for entry in plan["hosts"].values() for i in entry["indices"].values()]
    assert len(indices) == len(set(indices)) == 5 + 3  # five devices, a head per host
    assert plan["hosts"]["h1"]["indices"] == {"a1": 1, "a2": 2, "head": 0}  # the cluster's head
    assert plan["hosts"]["h3"]["indices"]["c2"] == 5
    assert {plan["hosts"][h]["indices"]["head"] for h in ("h2", "h3")} == {6, 7}
    addresses = [address_of(i) for i in indices]
    assert len(set(addresses)) == len(addresses)
    # The same port for the same cluster on every host, another for another cluster.
    assert plan["port"] == crosslinks.port_of("plant") == crosslinks.plan("plant", SHARES, ADDRESSES)["port"]
    assert crosslinks.PORT_BASE <= plan["port"] < crosslinks.PORT_BASE + crosslinks.PORT_COUNT
    assert plan["key"] != crosslinks.plan("plant", SHARES, ADDRESSES)["key"]


def test_each_share_knows_the_devices_behind_every_other_host():
    plan = crosslinks.plan("plant", SHARES, ADDRESSES)
    share = crosslinks.ShareLinks.from_plan(plan, "h2", mac_of)
    assert share.index == {"b1": 3, "head": 6}
    assert [(p.address, p.port) for p in share.peers.others] == [("10.99.0.11", plan["port"]),
                                                                 ("10.99.0.13", plan["port"])]
    # Every member behind each other host, its head too (where a launcher runs).
    assert share.peers.others[0].macs == (mac_of(1), mac_of(2), mac_of(0))
    assert share.names == {0: "shoal-head", 1: "a1", 2: "a2", 3: "b1", 4: "c1", 5: "c2",
                           6: "shoal-head-2", 7: "shoal-head-3"}
    args = share.peers.arguments()
    assert args[:5] == ["--udp", str(plan["port"]), "--key", plan["key"], "--no-tso"]
    assert args[5:7] == ["--peer", f"10.99.0.11:{plan['port']},{mac_of(1)},{mac_of(2)},{mac_of(0)}"]


def test_a_link_faster_than_the_underlay_is_refused_naming_it_both_delays_and_the_d_that_fits():
    pairs = [("a1", "h1", "b1", "h2", 100e-6), ("a1", "h1", "c1", "h3", 20e-6)]
    delays = {("h1", "h2"): 30e-6, ("h2", "h1"): 35e-6, ("h1", "h3"): 50e-6}
    with pytest.raises(ShoalError) as refused:
        crosslinks.check(pairs, delays, 1.0)
    said = str(refused.value)
    assert "a1 on h1 and c1 on h3" in said and "20 us" in said and "50 us / 1 = 50 us" in said
    assert "--dilation 3" in said
    crosslinks.check(pairs, delays, 3.0)  # 20 us x 3 covers 50 us
    # The slower of the two hosts' views counts.
    with pytest.raises(ShoalError, match="35 us / 1"):
        crosslinks.check([("a1", "h1", "b1", "h2", 32e-6)], delays, 1.0)
    assert crosslinks.dilation_fitting(20e-6, 50e-6) == 3 and crosslinks.dilation_fitting(1e-3, 5e-5) == 1


def _stats(late: int, lost: int) -> dict:
    return {"foreign_datagrams": 0,
            "peers": [{"address": "10.99.0.11:20001", "replies": 32, "rtt_min_ns": 40000,
                       "rtt_median_ns": 60000, "rtt_max_ns": 900000, "offset_ns": -1500,
                       "clock_offset_ns": 2500, "frames_out": 10, "frames_in": 100, "send_errors": 0}],
            "remotes": [{"mac": mac_of(1), "peer": 0, "frames": 100, "late": late, "late_max_ns": 5000 * late,
                         "late_sum_ns": 0, "lost": lost, "reordered": 0}]}


def test_frames_late_or_lost_between_hosts_flag_the_stretch_of_a_run_that_had_them():
    plan = crosslinks.plan("plant", SHARES, ADDRESSES)
    views = crosslinks.underlay_views(_stats(0, 0), {**plan, "port": 20001}, "h2")
    assert views["h1"].one_way_s == 30e-6 and views["h1"].clock_offset_s == 2.5e-6
    before = crosslinks.by_device({"h2": crosslinks.counted(_stats(0, 0))}, plan, mac_of)
    assert before == {"a1": {"host": "h1", "frames": 100, "late": 0, "lost": 0, "late_max_s": 0.0}}
    calm = crosslinks.judge(before, before)
    assert not calm["flagged"] and calm["why"] is None
    after = crosslinks.by_device({"h2": crosslinks.counted(_stats(3, 1)), "h3": None}, plan, mac_of)
    after["a1"]["frames"] += 50
    judged = crosslinks.judge(before, after)
    assert judged["flagged"] and (judged["frames"], judged["late"], judged["lost"]) == (50, 3, 1)
    assert "3 of 50 frames" in judged["why"] and "a1 on h1" in judged["why"]


def _placed(counts: dict[str, int], extra: dict[str, int] | None = None) -> dict[str, list]:
    """Set-top boxes on docsis-27m (a shared medium) per host, and NUCs on their own ports."""
    stb, nuc = (inventory.from_emulate("1xstb").nodes[0], inventory.from_emulate("1xnuc").nodes[0])
    placed, number = {}, 1
    for host in counts:
        placed[host] = []
        for kind, node in ((counts, stb), (extra or {}, nuc)):
            for _ in range(kind.get(host, 0)):
                placed[host].append(dataclasses.replace(node, name=f"{node.profile.name}{number}"))
                number += 1
    return placed


def test_a_medium_split_over_hosts_is_kept_on_the_host_with_most_of_its_devices():
    placed = _placed({"h1": 2, "h2": 3, "h3": 0}, extra={"h3": 1})
    split = crosslinks.split_media(placed, 2.0)
    # docsis-27m: 5 ms of latency, 3 ms of it the grant wait: 1 ms of delay each way; half
    # of that at D = 2 is the lookahead.
    assert split == {"docsis-27m": {"owner": "h2", "lookahead_ns": 1_000_000, "hosts": ["h1", "h2"],
                                    "devices": ["stb1", "stb2"]}}
    assert crosslinks.split_media(_placed({"h1": 2, "h2": 2}), 1.0)["docsis-27m"]["owner"] == "h1"
    assert crosslinks.split_media(_placed({"h1": 4, "h2": 0}, extra={"h2": 2}), 1.0) == {}


def test_a_split_medium_larger_than_one_forwarder_is_refused(monkeypatch):
    from shoal.cluster import capacity

    monkeypatch.setattr(capacity, "FORWARDER_PORTS", 5)
    crosslinks.split_media(_placed({"h1": 2, "h2": 2}), 1.0)  # 4 devices and the head: 5 ports
    with pytest.raises(ShoalError, match="docsis-27m has 5 devices: .* 5 ports"):
        crosslinks.split_media(_placed({"h1": 3, "h2": 2}), 1.0)


def test_the_owner_runs_the_links_of_the_other_hosts_devices_and_they_relay_to_it():
    placed = _placed({"h1": 2, "h2": 1, "h3": 0}, extra={"h3": 1})
    shares = {h: [n.name for n in nodes] for h, nodes in placed.items()}
    links = {n.name: n.link for nodes in placed.values() for n in nodes}
    plan = crosslinks.plan("plant", shares, ADDRESSES, crosslinks.split_media(placed, 1.0))
    port = plan["port"]
    owner = crosslinks.ShareLinks.from_plan(plan, "h1", mac_of, links.__getitem__)
    assert [(p.proxy, p.id, p.mac, p.link.name) for p in owner.proxies] == [
        (f"10.99.0.12:{port}", 3, mac_of(3), "docsis-27m")]
    assert owner.relayed == {} and owner.peers.lookahead_ns == 500_000
    # What goes to h2 is its head only: its box's frames are the owner's own (a proxy).
    assert owner.peers.others[0].macs == (mac_of(plan["hosts"]["h2"]["indices"]["head"]),)
    member = crosslinks.ShareLinks.from_plan(plan, "h2", mac_of, links.__getitem__)
    assert member.proxies == () and member.relayed == {"stb3": f"10.99.0.11:{port}"}
    assert member.peers.lookahead_ns == 0 and "--lookahead" not in member.peers.arguments()
    # On h2 and h3 alike, frames for the relayed box go to the owner.
    for share in (member, crosslinks.ShareLinks.from_plan(plan, "h3", mac_of, links.__getitem__)):
        assert mac_of(3) in share.peers.others[0].macs
        assert all(mac_of(3) not in p.macs for p in share.peers.others[1:])
    ports = [linkemu.Port("/run/netns/x", "eth0", None, relay=member.relayed["stb3"], id=3),
             *owner.proxies]
    args = linkemu.argv(ports, None, None)[1:]
    assert args[:2] == ["--port", "/run/netns/x,eth0,0/0/0/0/0,0/0/0/0/0"]
    assert args[2] == "--proxy" and args[3].startswith(f"10.99.0.12:{port},3,") and args[3].endswith(mac_of(3))
    assert args[4:] == ["--relay", f"0,3,10.99.0.11:{port}"]


def test_a_split_medium_whose_lookahead_is_below_the_underlay_is_refused_with_the_d_that_fits():
    split = crosslinks.split_media(_placed({"h1": 2, "h2": 1}), 1.0)
    delays = {("h1", "h2"): 300e-6, ("h2", "h1"): 450e-6}
    crosslinks.check_split(split, delays, 1.0)  # the slower view, 450 us, within 500 us
    with pytest.raises(ShoalError) as refused:
        crosslinks.check_split(split, {**delays, ("h2", "h1"): 700e-6}, 1.0)
    said = str(refused.value)
    assert "docsis-27m" in said and "on h1" in said and "device on h2" in said
    assert "500 us" in said and "700 us" in said and "--dilation 2" in said


def test_frames_relayed_for_a_split_medium_late_or_lost_flag_the_run():
    plan = crosslinks.plan("plant", SHARES, ADDRESSES)
    stats = {"ports": [{"name": "eth0", "relay": {"peer": "x", "id": 3, "frames_in": 40, "late": 2,
                                                   "late_max_ns": 7000, "lost": 1, "frames_out": 40}},
                       {"name": "eth0"}], "split_late": 4}
    table = crosslinks.by_device({"h2": crosslinks.counted(stats)}, plan, mac_of)
    assert table["b1"] == {"host": "h2", "frames": 40, "late": 2, "lost": 1, "late_max_s": 7e-6}
    assert table["split medium on h2"]["late"] == 4
    assert crosslinks.judge({}, table)["flagged"]


def test_chrony_tracking_is_read_as_named_numbers():
    line = ("A9FEA9FE,169.254.169.254,3,1764355200.123,0.000012345,-0.000003,0.000021,-12.5,"
            "-0.001,0.05,0.000456,0.000789,64.2,Normal\n")
    seen = chrony.parse(line)
    assert seen["reference_name"] == "169.254.169.254" and seen["stratum"] == 3.0
    assert seen["system_offset_s"] == pytest.approx(12.345e-6) and seen["leap_status"] == "Normal"
    with pytest.raises(ValueError, match="fields"):
        chrony.parse("506 Cannot talk to daemon")


@pytest.mark.parametrize("rtt_min_s, rtt_median_s, quiet", [
    (21e-6, 45e-6, True),     # an idle pair of hosts
    (21e-6, 140e-6, True),    # within twice the fastest and 100 us
    (21e-6, 7.3e-3, False),   # the other host still building its share: answers wait
    (2e-3, 3.9e-3, True),     # a slow underlay, steadily so
])
def test_a_window_is_quiet_when_its_median_round_trip_is_near_its_fastest(rtt_min_s, rtt_median_s, quiet):
    window = crosslinks.Underlay(rtt_min_s, rtt_median_s, 2 * rtt_median_s, 0.0, 0.0, 32)
    assert window.quiet is quiet
