"""The head-side launch layout (seed 002's OERTE-like layout): the launcher's daemon stays in
the head namespace and starts each rank into its device, whose traffic still crosses the
emulated plant. Real MPI ranks in real namespaces (needs root, as CI has)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shoal import cluster
from shoal.cluster import linkemu, state
from shoal.errors import ShoalError

HERE = Path(__file__).resolve().parent

host_namespaces = pytest.mark.skipif(os.geteuid() != 0, reason="clusters in the host's namespaces need root; an ordinary user's (in a user namespace) are tested in tests/user")


def _compile(mpi, out: Path) -> Path:
    exe = out / f"where_rank_{mpi.kind}"
    done = subprocess.run([str(mpi.mpicc), "-O2", "-o", str(exe), str(HERE / "where_rank.c")],
                          capture_output=True, text=True, env={**os.environ, **mpi.env()})
    assert done.returncode == 0, done.stderr
    return exe


def _box_wire_bytes(record: dict) -> list[int]:
    counters = linkemu.stats(record["forwarder"], state.cluster_dir(record["id"]) / "forwarder.json")
    return [p["up"]["wire_bytes"] + p["down"]["wire_bytes"] for p in counters["ports"][1:4]]


@host_namespaces
def test_head_layout_starts_each_rank_in_its_box_from_a_daemon_in_the_head(any_mpi, tmp_path):
    from shoal.execute.placement import config_placements
    from shoal.execute.where import Where

    exe = _compile(any_mpi, tmp_path)
    # One job over the boxes and a blade (seed 002's configuration 3 in small): a rank on each
    # box and on each of the blade's 8 cores (--ranks-per-device). Boxes alone, with Open MPI's
    # lookups instead of its full exchange of cards, run in test_bench_runs_with_the_head_launch.
    where = Where(emulate="3xstb+1xxeon-blade", link="docsis-27m", ranks_per_device={"stb": 1, "xeon-blade": 8},
                  launch="head")
    where.validate()
    [mixed] = config_placements(where)
    assert mixed.ranks == 11 and mixed.per_node == (1, 1, 1, 8)
    with cluster.open(emulate=where.emulate, link=where.link, calibrate=False) as c:
        record = state.read(c.emulated.id)
        job = c.job(any_mpi, nodes=mixed.nodes, argv=[str(exe)], ranks_per_node=mixed.rank_counts, layout="head")
        argv, _ = job.command()
        assert "-hosts" not in argv and "--host" not in argv  # no daemon sent to any device
        before = _box_wire_bytes(record)
        done = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True, timeout=300)
        after = _box_wire_bytes(record)
        netns = {name: os.stat(f"/run/netns/{c.emulated.netns(name)}").st_ino
                 for name in ("head", "stb1", "stb2", "stb3", "xeon-blade1")}
    assert done.returncode == 0, done.stderr[-2000:]
    lines = sorted((line.split() for line in done.stdout.strip().splitlines()), key=lambda w: int(w[0]))
    assert [h for _, h, *_ in lines] == ["stb1", "stb2", "stb3"] + ["xeon-blade1"] * 8
    assert [int(r) for r, *_ in lines] == list(range(11))
    for rank, host, own, parent, core, total in lines:
        assert int(own) == netns[host]          # the rank runs in its device's namespace
        assert int(parent) == netns["head"]     # started by a daemon in the head
        assert int(total) == sum(range(11))
    assert [core for _, h, _, _, core, _ in lines if h.startswith("stb")] == ["0"] * 3  # one rank a box
    assert sorted(int(core) for _, h, _, _, core, _ in lines if h == "xeon-blade1") == list(range(8))
    # No shared memory between ranks of the one daemon: each box moved its share of the
    # 256 KiB Allreduce through the plant.
    assert all(b - a >= 256 * 1024 for a, b in zip(before, after)), (before, after)


def test_head_layout_is_refused_where_there_is_no_head(mpich):
    with pytest.raises(ShoalError, match="head launch layout needs an emulated cluster"):
        cluster.open().job(mpich, nodes=1, argv=["true"], layout="head")
    with pytest.raises(ShoalError, match="launch layout 'middle'"):
        cluster.open().job(mpich, nodes=1, argv=["true"], layout="middle")


def test_rank_helper_without_a_rank_number_fails_like_ssh():
    env = {k: v for k, v in os.environ.items() if k != "PMI_ID"}
    done = subprocess.run([sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", "nosuch",
                           "--rank", "PMI_ID", "a:1,b:1", "--", "true"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 255
    assert "the launcher set no rank number in PMI_ID" in done.stderr
    env["PMI_ID"] = "2"
    done = subprocess.run([sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", "nosuch",
                           "--rank", "PMI_ID", "a:1,b:1", "--", "true"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 255 and "rank 2 is beyond the 2 ranks" in done.stderr


@host_namespaces
@pytest.mark.parametrize("kind", ["mpich", "openmpi"])
def test_bench_runs_with_the_head_launch_and_records_it(tmp_path, kind):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "shoal", "bench", "--emulate", "2xstb", "--link",
                           "docsis-27m", "--launch", "head", "--mpi", kind, "--tests", "imb.Bcast",
                           "--sizes", "64", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["request"]["launch"] == "head"
    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == 2 and ",imb.Bcast,64," in rows[1]


def test_a_mixed_job_with_no_way_to_place_its_ranks_is_refused_before_anything_starts():
    from shoal.execute.where import Where

    with pytest.raises(ShoalError, match=r"--ranks-per-device stb=1: the cluster's devices are stb, "
                                         r"xeon-blade; give a rank count for each of them"):
        Where(emulate="2xstb+1xxeon-blade", ranks_per_device={"stb": 1}).validate()
    with pytest.raises(ShoalError, match="--ranks-per-node and --ranks-per-device both place ranks"):
        Where(emulate="2xstb+1xxeon-blade", ranks_per_node=2, ranks_per_device={"stb": 1, "xeon-blade": 8}
              ).validate()
