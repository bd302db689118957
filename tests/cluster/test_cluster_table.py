"""`shoal cluster up`'s table: one row per device, a run of alike devices in one row."""

from __future__ import annotations

from shoal.cli.cluster import _node_rows


def _record(profiles: list[str]) -> dict:
    names = [f"{p}{i + 1}" for i, p in enumerate(profiles)]
    return {
        "inventory": {"nodes": [{"name": n, "profile": p, "link": "docsis-27m"} for n, p in zip(names, profiles)],
                      "links": {"docsis-27m": {"rate_bps": 27e6}}},
        "emulation": {"calibration": {"stb": {"achieved_speed": 0.00945}}},
        "nodes": {n: {"address": f"10.77.0.{i + 2}", "cpu_budget": 0.0095 if p == "stb" else 1.0,
                      "memory_limit_B": 256 * 2**20 if p == "stb" else None}
                  for i, (n, p) in enumerate(zip(names, profiles))},
    }


def test_a_run_of_alike_devices_is_one_row_and_a_few_stay_apart():
    rows = _node_rows(_record(["stb"] * 128 + ["nuc"] * 2))
    assert rows[0] == ("stb1..stb128 (128)", "10.77.0.2..10.77.0.129", "stb", "docsis-27m (27 Mbit/s)",
                       "0.0095 CPU", "0.00945", "256 MiB")
    assert [r[0] for r in rows[1:]] == ["nuc129", "nuc130"]
    assert rows[1][2:] == ("nuc", "docsis-27m (27 Mbit/s)", "1 CPU", "-", "not limited")
