"""Links between the hosts of a spread cluster, as plain data: one address plan for the whole
cluster, each share's peers, the refusal of a link faster than the underlay, the judgement of
frames that crossed late or were lost, and chrony's view of a host's clock. (The forwarders
themselves exchanging frames between two Slurm hosts: test_multihost.py.)"""

from __future__ import annotations

import pytest

from shoal.cluster import chrony, crosslinks
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


def test_chrony_tracking_is_read_as_named_numbers():
    line = ("A9FEA9FE,169.254.169.254,3,1764355200.123,0.000012345,-0.000003,0.000021,-12.5,"
            "-0.001,0.05,0.000456,0.000789,64.2,Normal\n")
    seen = chrony.parse(line)
    assert seen["reference_name"] == "169.254.169.254" and seen["stratum"] == 3.0
    assert seen["system_offset_s"] == pytest.approx(12.345e-6) and seen["leap_status"] == "Normal"
    with pytest.raises(ValueError, match="fields"):
        chrony.parse("506 Cannot talk to daemon")
