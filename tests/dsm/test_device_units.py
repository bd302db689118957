"""A run on emulated devices in the devices' units: times over the dilation D, each rank's CPU
seconds over the host-core share its device core is held to (the same at any D)."""

from __future__ import annotations

import pytest

from shoal.cluster.emulated import held_core_share
from shoal.dsm import apps
from shoal.execute.session import DeviceClock


def _rank(rank: int, wall: float, cpu: float) -> dict:
    return {"rank": rank, "role": "task", "wall_s": wall, "cpu_s": cpu, "lib_s": wall / 2,
            "wait_s": wall / 4, "compute_s": wall / 8, "quiet": [[1.0, 2.0]]}


def test_a_device_core_busy_for_its_whole_run_shows_its_wall_time_in_cpu_seconds():
    d = 4.0
    # Host seconds: rank 0 kept a device core held to 0.25 of a host core busy for 8 s of
    # host time (2 host CPU seconds); rank 1, on a device as fast as the host, half of it.
    report = {"ranks": [_rank(0, 8.0, 2.0), _rank(1, 8.0, 4.0)],
              "timeline": [{"rank": 0, "t_s": [0.0, 4.0, 8.0], "cpu_s": [0.0, 1.0, 2.0]},
                           {"rank": 1, "t_s": [0.0, 8.0], "cpu_s": [0.0, 4.0]}]}
    records = [{"rank": 0, "calls": {"MPI_Recv": {"calls": 3, "sleep_s": 2.0}}}]
    apps._to_device(report, records, DeviceClock(d), [0.25, 1.0])
    busy, half = report["ranks"]
    assert busy["wall_s"] == 2.0 and busy["cpu_s"] == 8.0 and busy["cpu_host_s"] == 2.0
    assert busy["lib_s"] == 1.0 and busy["wait_s"] == 0.5 and busy["compute_s"] == 0.25
    assert busy["quiet"] == [[0.25, 0.5]]
    assert half["cpu_s"] == 4.0 and half["wall_s"] == 2.0
    assert report["timeline"][0] == {"rank": 0, "t_s": [0.0, 1.0, 2.0], "cpu_s": [0.0, 4.0, 8.0]}
    assert report["timeline"][1]["cpu_s"] == [0.0, 4.0]
    assert records[0]["calls"]["MPI_Recv"] == {"calls": 3, "sleep_s": 0.5}


@pytest.mark.parametrize("limited, entry, d, share", [
    (True, {"cpu_fraction": 0.05}, 4.0, 0.2),    # recorded at D = 4: 0.2 of a core at real time
    (True, {"cpu_fraction": 0.25}, 1.0, 0.25),
    (False, {"cpu_fraction": 0.05}, 4.0, 1.0),   # not held: the device runs at the host's speed
    (True, {}, 2.0, 1.0),                        # not an emulated device
])
def test_the_held_share_is_the_recorded_fraction_at_real_time(limited, entry, d, share):
    assert held_core_share(limited, entry, d) == pytest.approx(share)
