"""A broadcast sent down the medium once (--bcast multicast, libshoalplantcast)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from shoal import environment, profiles
from shoal.cluster import plantcast
from shoal.errors import ShoalError


def test_the_root_is_paced_at_a_boxs_service_flow_on_the_plant_and_at_the_link_elsewhere():
    from shoal.mpi import discover

    links, mpich = profiles.load_links(), discover.resolve("mpich")
    pace = environment.PLANTCAST_RATE_BPS.name
    # The pace in host time: the device's upstream over the dilation.
    assert float(plantcast.rank_env(mpich, [links["docsis-27m"]], 1.0)[pace]) == 5.12e6
    assert float(plantcast.rank_env(mpich, [links["ethernet-100m"]], 2.0)[pace]) == 100e6 / 2


def test_the_library_goes_ahead_of_what_the_job_preloads():
    merged = plantcast.preloaded({"LD_PRELOAD": "/x/libshoalwait.so", "SHOAL_WAIT": "event"},
                                 {"LD_PRELOAD": "/y/libshoalplantcast.so", environment.PLANTCAST.name: "g:1"})
    assert merged["LD_PRELOAD"] == "/y/libshoalplantcast.so:/x/libshoalwait.so"
    assert merged["SHOAL_WAIT"] == "event" and merged[environment.PLANTCAST.name] == "g:1"


def test_multicast_is_refused_where_the_links_are_not_emulated():
    for kind in ("local", "inventory"):
        with pytest.raises(ShoalError, match="--bcast multicast sends broadcasts as multicast"):
            plantcast.refuse_unless_emulated("multicast", kind)
    plantcast.refuse_unless_emulated("multicast", "emulated")
    plantcast.refuse_unless_emulated("mpi", "local")


def test_every_byte_arrives_on_a_plant_that_loses_datagrams(tmp_path):
    # The plant of the seed with 2 % of its frames lost: datagrams go missing and are sent
    # again; the benchmark program checks every byte of every repetition at every rank.
    extra = tmp_path / "lossy.toml"
    extra.write_text('[links.lossy-plant]\nrate_bps = 27e6\nlatency_s = 0.005\nshared = true\n'
                     'grant_interval_s = 0.002\ndevice_rate_bps = 5.12e6\ndevice_buffer_B = 262144\n'
                     'loss = 0.02\nswitch = "docsis-cmts"\n')
    stats = tmp_path / "stats"
    stats.mkdir()
    env = {**os.environ, environment.PROFILES.name: str(extra), environment.PLANTCAST_STATS.name: str(stats)}
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "shoal", "bench", "--emulate", "4xminnowboard", "--link",
                           "lossy-plant", "--nodes", "4", "--tests", "imb.Bcast", "--sizes", "64K",
                           "--budget", "1", "--check", "--bcast", "multicast", "--mpi", "mpich", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    results = pd.read_csv(out / "results.csv")
    assert list(results["check"]) == ["ok"], results[["check", "check_errors"]]
    ranks = [json.loads(p.read_text()) for p in sorted(stats.glob("plantcast-*.json"))]
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2, 3]
    # Every broadcast of 64 KiB went down the plant (none by the MPI's tree), and the lost
    # datagrams were sent again.
    assert all(r["bcasts"] > 0 and r["bytes"] == r["bcasts"] * 65536 and r["fallbacks"] == 0 for r in ranks)
    assert sum(r["resent_chunks"] for r in ranks) > 0
    assert json.loads((out / "manifest.json").read_text())["request"]["bcast"] == "multicast"


def test_a_cluster_spread_over_hosts_refuses_multicast_before_anything_starts():
    from shoal.cluster import inventory as inventories
    from shoal.cluster.session import SpreadDevices
    from shoal.cluster.spread import SpreadCluster
    from shoal.mpi import discover

    spread = SpreadCluster({"id": "s1", "dilation": 1.0, "shares": {"h1": 1, "h2": 1}},
                           inventories.from_emulate("2xminnowboard"))
    devices = SpreadDevices(spread)
    devices.bcast = "multicast"
    with pytest.raises(ShoalError, match="--bcast multicast needs the devices on one host"):
        devices.job(discover.resolve("mpich"), 2, ["true"])


def test_a_job_goes_down_the_medium_only_where_all_its_devices_share_one():
    links = profiles.load_links()
    plant, blades, ethernet = links["docsis-27m"], links["gigabit-blades"], links["ethernet-100m"]
    assert plantcast.applies_to([plant, plant])
    assert not plantcast.applies_to([plant, blades])   # boxes and a blade in one job
    assert not plantcast.applies_to([blades] * 8)      # a study's reference blades
    assert not plantcast.applies_to([])
    plantcast.refuse_without_a_medium("multicast", [plant, blades])   # the boxes are on one
    plantcast.refuse_without_a_medium("mpi", [ethernet])
    with pytest.raises(ShoalError, match=r"no device here is on one \(links: ethernet-100m\)"):
        plantcast.refuse_without_a_medium("multicast", [ethernet, ethernet])


def test_a_study_gives_bcast_to_every_plan_on_its_devices_and_keeps_it_to_resume():
    from shoal.study import run as study_run
    from shoal.study.request import StudyRequest

    request = StudyRequest.create(emulate="2xstb", reference="none", suite="imb.Bcast", sizes="64K",
                                  workloads="raytrace", work_sizes={"raytrace": "64"}, bcast="multicast")
    planned = study_run.plan(request)
    assert [p.request.bcast for p in planned.plans] == ["multicast"]
    assert [w.request.bcast for w in planned.work.cluster] == ["multicast"]
    again = StudyRequest.from_manifest(request.to_manifest())
    assert again.bcast == "multicast" and again.where().bcast == "multicast"
    assert StudyRequest.create(emulate="2xstb").bcast == "mpi"
