"""shoal's benchmark program checks its own results under every wait mode."""

from __future__ import annotations

import json
import subprocess

import pytest

from shoal.mpi import build
from shoal.mpi.launch import Job
from shoal.wait import apply
from tests.wait.helpers import MODES

POINTS = ("imb.PingPong:8,imb.PingPong:65536,imb.Sendrecv:1024,imb.Exchange:512,"
          "imb.Allreduce:1024,imb.Reduce:256,imb.Reduce_scatter:1024,imb.Allgather:64,"
          "imb.Gather:64,imb.Scatter:64,imb.Bcast:4096,imb.Alltoall:256,imb.Barrier:0,"
          "mpbench.bibw:1024")


@pytest.mark.parametrize("mode", [m for m in MODES if m != "linear:1000,20000,1000"])
def test_bench_check_ok_in_every_mode(any_mpi, mode, tmp_path):
    exe = build.build("bench", any_mpi)
    job = apply(Job(any_mpi, 3, [str(exe), "--points", POINTS, "--check", "--max-reps", "20"]),
                mode, telemetry_dir=tmp_path)
    argv, _ = job.command()
    proc = subprocess.run(argv, env=job.popen_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    points = [json.loads(ln) for ln in proc.stdout.splitlines()
              if ln.startswith("{") and '"type":"point"' in ln]
    assert len(points) == len(POINTS.split(","))
    assert all(p["check"] == "ok" and p["check_errors"] == 0 for p in points), points
    # The library really was in the ranks: every rank left telemetry in this mode.
    ranks = sorted(json.loads(f.read_text())["rank"] for f in tmp_path.glob("rank-*.json"))
    assert ranks == [0, 1, 2]
    assert json.loads((tmp_path / "rank-0.json").read_text())["mode"] == mode
