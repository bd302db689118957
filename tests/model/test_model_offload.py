"""The offload decision on hand-computed cases, on the thesis' watts, and at the edges."""

import json
import math
from dataclasses import replace

import pytest

from shoal.errors import ShoalError
from shoal import profiles
from shoal.model import (
    UPLINKS,
    OffloadScenario,
    decide,
    decision_map,
    min_local_nodes,
)
from shoal.model.uplinks import UplinkProfile
from shoal.profiles import DeviceProfile

# Simple numbers so every figure below can be checked on paper.
DEVICE = DeviceProfile("toy device", idle_W=1.0, busy_W=3.0)
SERVER = DeviceProfile("toy server", idle_W=10.0, busy_W=20.0)
UPLINK = UplinkProfile("toy uplink", bandwidth_Bps=1000.0, rtt_s=0.1, device_J_per_bit=0.001, device_active_W=0.0,
                       network_J_per_bit=0.002)


def toy(**changes) -> OffloadScenario:
    base = OffloadScenario(rate_Bps=50.0, nodes=2, parallel_fraction=1.0, device=DEVICE, server=SERVER,
                           uplink=UPLINK, chunk_B=10.0, device_s_per_B=0.01,  # 100 B/s per device
                           server_s_per_B=0.001, pue=1.5)
    return replace(base, **changes)


def test_hand_computed_devices_on_anyway():
    v = decide(toy())
    # Local: 2 x 1 W idle + 50 B/s x 0.01 s/B x (3 - 1) W = 3 W.
    assert v.local.power_W == pytest.approx(3.0)
    assert v.local.energy_J_per_B == pytest.approx(0.06)
    assert v.local.max_rate_Bps == pytest.approx(200.0) and v.local.utilization == pytest.approx(0.25)
    # Chunk of 10 B: 0.05 s of service, M/D/1 wait 0.25 x 0.05 / (2 x 0.75).
    assert v.local.chunk_latency_s == pytest.approx(0.05 + 0.25 * 0.05 / 1.5)
    # Offload: 2 W idle + 50 x 8 x 0.001 (radio) + 50 x 8 x 0.002 (network) + 50 x 0.001 x 20 x 1.5 (server).
    assert v.offload.breakdown_W == pytest.approx(
        {"device_idle_W": 2.0, "device_dynamic_W": 0.0, "radio_W": 0.4, "network_W": 0.8, "server_W": 1.5})
    assert v.offload.power_W == pytest.approx(4.7)
    assert v.offload.chunk_latency_s == pytest.approx(0.1 + 0.01 + 0.05 * 0.01 / (2 * 0.95) + 0.01)
    assert v.choice == "local" and v.energy_winner == "local" and v.time_winner == "local"
    assert v.energy_ratio == pytest.approx(4.7 / 3.0)
    assert v.energy_saving_W == pytest.approx(1.7) and v.energy_saving_J_per_B == pytest.approx(0.034)
    # The idle draw is common to both options: no rate crossover, any feasible n wins.
    assert v.crossover_rate_Bps is None
    assert v.n_min_local == 1 and v.local_wins_nodes == (1, None)
    assert "less energy" in v.reason


def test_hand_computed_devices_that_could_sleep():
    v = decide(toy(devices_on_anyway=False))
    assert v.offload.power_W == pytest.approx(2.7)
    assert v.choice == "offload" and v.energy_ratio == pytest.approx(3.0 / 2.7)
    # 2 + 0.02 R = 0.054 R  =>  R* = 2 / 0.034; below it offloading is cheaper.
    assert v.crossover_rate_Bps == pytest.approx(2.0 / 0.034)
    assert v.cheaper_below_crossover == "offload"
    # Local wins while n x 1 W < 50 x 0.034 = 1.7 W: only n = 1.
    assert v.local_wins_nodes == (1, 1)
    at_crossover = decide(toy(devices_on_anyway=False, rate_Bps=2.0 / 0.034))
    assert at_crossover.local.power_W == pytest.approx(at_crossover.offload.power_W)
    above = decide(toy(devices_on_anyway=False, rate_Bps=70.0))
    assert above.choice == "local"


def test_net_server_basis_charges_only_the_servers_extra_power():
    v = decide(toy(server_basis="net"))
    assert v.offload.breakdown_W["server_W"] == pytest.approx(50 * 0.001 * (20 - 10) * 1.5)


def test_local_cannot_keep_up():
    v = decide(toy(rate_Bps=250.0))
    assert not v.local.feasible and "at most 200 B/s" in v.local.limit
    assert math.isinf(v.local.chunk_latency_s)
    assert v.choice == "offload"
    assert v.n_min_local == 3  # 250 B/s needs 2.5 devices at 100 B/s each
    assert v.time_winner == "offload"


def test_serial_fraction_bounds_local_throughput():
    # f = 0.5: even infinitely many devices process at most 1 / (0.01 x 0.5) = 200 B/s.
    v = decide(toy(rate_Bps=250.0, parallel_fraction=0.5))
    assert v.n_min_local is None and v.local_wins_nodes is None
    assert min_local_nodes(150.0, 0.01, 0.5) == 3  # 1/S(n) = 0.5 + 0.5/n <= 1/1.5  =>  n >= 3
    assert min_local_nodes(150.0, 0.01, 0.0) is None


def test_uplink_cannot_keep_up():
    v = decide(toy(rate_Bps=1500.0, nodes=20))
    assert not v.offload.feasible and "at most 1000 B/s" in v.offload.limit
    assert v.choice == "local"
    assert v.n_min_local == 15 and v.local_wins_nodes == (15, None)


def test_neither_keeps_up():
    v = decide(toy(rate_Bps=2000.0))
    assert v.choice == "neither" and v.time_winner == "neither"
    assert "neither option keeps up" in v.reason


def test_zero_rate():
    v = decide(toy(rate_Bps=0.0))
    assert v.local.energy_J_per_B is None and v.offload.energy_J_per_B is None
    assert v.local.power_W == pytest.approx(2.0) and v.offload.power_W == pytest.approx(2.0)
    assert v.energy_winner == "tie" and v.energy_ratio == pytest.approx(1.0)
    assert v.n_min_local == 1
    assert "no data to process" in v.reason
    sleeping = decide(toy(rate_Bps=0.0, devices_on_anyway=False))
    assert sleeping.choice == "offload" and sleeping.offload.power_W == 0.0
    assert sleeping.energy_ratio is None  # 2 W against 0 W: no finite ratio


def test_infinite_bandwidth():
    v = decide(toy(uplink=replace(UPLINK, bandwidth_Bps=math.inf, device_active_W=5.0)))
    assert v.offload.feasible and v.offload.utilization == 0.0
    # Radio base power is charged per byte as P / B: nothing at infinite bandwidth.
    assert v.offload.breakdown_W["radio_W"] == pytest.approx(0.4)
    assert v.offload.chunk_latency_s == pytest.approx(0.1 + 10 * 0.001)


def test_one_node():
    v = decide(toy(nodes=1, parallel_fraction=0.3))
    assert v.local.max_rate_Bps == pytest.approx(100.0)  # S(1) = 1 whatever f is
    assert v.local.power_W == pytest.approx(1.0 + 50 * 0.01 * 2.0)


THESIS_LAN = UplinkProfile("direct LAN, no transport energy", bandwidth_Bps=125e6, rtt_s=0.0,
                           device_J_per_bit=0.0, device_active_W=0.0, network_J_per_bit=0.0)


def test_thesis_watts_idle_choice_decides():
    """Four MinnowBoards (Table 5.6) against one NUC (Table 5.7, average 18.886 W) for a 1 MB/s stream."""
    nuc = replace(profiles.builtin("nuc"), busy_W=18.886)
    minnow = profiles.builtin("minnowboard")
    assert minnow.idle_W == 2.5663 and nuc.idle_W == 4.4801
    assert minnow.busy_W == pytest.approx((5.6139 + 5.875 + 5.934 + 5.823 + 5.749 + 5.853 + 5.761 + 5.703) / 8)
    base = OffloadScenario(rate_Bps=1e6, nodes=4, parallel_fraction=0.95, device=minnow, server=nuc,
                           uplink=THESIS_LAN, pue=1.0)
    local_W = 4 * 2.5663 + 1e6 * 1e-7 * (minnow.busy_W - 2.5663)
    # The NUC's cost per byte is the board's over the profiles' speed ratio, 2 x 0.75 / (2 x 0.25) = 3.
    assert base.server_s_per_B == pytest.approx(1e-7 / 3)
    nuc_W = 1e6 * 1e-7 / 3 * 18.886

    # Boards that could sleep: 10.27 W of idle boards against 0.63 W of NUC time.
    sleepy = decide(replace(base, devices_on_anyway=False))
    assert sleepy.local.power_W == pytest.approx(local_W)
    assert sleepy.offload.power_W == pytest.approx(nuc_W)
    assert sleepy.choice == "offload" and sleepy.energy_ratio == pytest.approx(local_W / nuc_W)
    # Even one board idles at 2.57 W, more than the 0.31 W the NUC saves: no n favours local.
    assert sleepy.local_wins_nodes is None
    # Crossover R* = 4 x 2.5663 / (6.2953e-7 - 3.2227e-7) B/s = 33.4 MB/s, just below the 34.8 MB/s
    # four boards can process.
    b_loc, b_off = 1e-7 * (minnow.busy_W - 2.5663), 1e-7 / 3 * 18.886
    assert sleepy.crossover_rate_Bps == pytest.approx(4 * 2.5663 / (b_off - b_loc))
    assert 0.9 * sleepy.local.max_rate_Bps < sleepy.crossover_rate_Bps < sleepy.local.max_rate_Bps

    # Boards that are on anyway: only dynamic energy differs, and a board's is lower per byte.
    awake = decide(base)
    assert awake.offload.power_W == pytest.approx(4 * 2.5663 + nuc_W)
    assert awake.choice == "local"
    assert awake.energy_saving_J_per_B == pytest.approx(b_off - b_loc)
    # Four boards at S(4) = 3.478 process 34.8 MB/s.
    assert awake.local.max_rate_Bps == pytest.approx(1 / (0.05 + 0.95 / 4) / 1e-7)


def test_defaults_run_and_carry_their_sources():
    v = decide()
    inputs = v.inputs
    assert inputs["uplink"]["bandwidth_Bps"] == pytest.approx(27e6 / 8)
    assert "seed 002" in inputs["uplink"]["sources"]["bandwidth_Bps"]
    assert "Table 5.6" in inputs["device"]["sources"]["idle"]
    assert "Table 5.7" in inputs["server"]["sources"]["idle"]
    for profile in UPLINKS.values():
        numbers = [k for k, val in vars(profile).items() if isinstance(val, float)]
        missing = set(numbers) - set(profile.sources)
        assert not missing, f"{profile.name} lacks a source for {missing}"
    scenario = OffloadScenario()
    numbers = {k for k, val in vars(scenario).items() if isinstance(val, float)}
    assert set(scenario.sources) >= numbers | {"device", "server", "nodes", "chunk_B"}
    text = json.dumps(v.to_dict(), allow_nan=False)
    assert json.loads(text)["choice"] in ("local", "offload")


def test_infeasible_latency_is_null_in_json():
    data = json.loads(json.dumps(decide(toy(rate_Bps=250.0)).to_dict(), allow_nan=False))
    assert data["local"]["chunk_latency_s"] is None


def test_lte_radio_costs_more_than_ethernet():
    lte = decide(OffloadScenario(uplink=UPLINKS["lte"], rate_Bps=5e5))
    eth = decide(OffloadScenario(uplink=UPLINKS["ethernet"], rate_Bps=5e5))
    # 5e5 B/s x (8 x 438.39e-9 J/bit + 1.28804 W / 705000 B/s)
    assert lte.offload.breakdown_W["radio_W"] == pytest.approx(5e5 * (8 * 438.39e-9 + 1.28804 / (5.64e6 / 8)))
    assert eth.offload.breakdown_W["radio_W"] == pytest.approx(5e5 * 8 * 1e-9)


def test_decision_map_rows():
    rows = decision_map(toy(), [10.0, 250.0], [1, 3])
    assert [(r["nodes"], r["rate_Bps"]) for r in rows] == [(1, 10.0), (1, 250.0), (3, 10.0), (3, 250.0)]
    assert rows[1]["choice"] == "offload" and not rows[1]["local_feasible"]
    assert rows[3]["local_feasible"]


@pytest.mark.parametrize("changes, message", [
    ({"rate_Bps": -1.0}, "stream rate"),
    ({"rate_Bps": math.nan}, "stream rate"),
    ({"nodes": 0}, "node count"),
    ({"nodes": 2.5}, "node count"),
    ({"parallel_fraction": 1.2}, "parallel fraction"),
    ({"device": replace(DEVICE, idle_W=4.0)}, "device power"),
    ({"device_s_per_B": 0.0}, "device cost"),
    ({"pue": 0.9}, "PUE"),
    ({"uplink": replace(UPLINK, bandwidth_Bps=0.0)}, "uplink bandwidth"),
    ({"server_basis": "half"}, "server basis"),
])
def test_bad_inputs_are_one_clear_error(changes, message):
    with pytest.raises(ShoalError, match=message):
        decide(toy(**changes))
