"""A job that hangs after its last point (its launcher waits on a daemon that never ends):
every point it measured stands, and the run's manifest says the job failed after them,
instead of a failure charged to a point it did not run."""

from __future__ import annotations

import sys

from shoal import proc
from shoal.bench.sweep import Config, Options, Point, Sweep
from shoal.runs.store import Run

# Says hello and skips its one point (as a program does for a test it cannot run) in one
# write, so however busy the host no timeout falls between them; then hangs.
PROGRAM = ("import json, time; print(json.dumps({'type': 'hello', 'ranks': 2}) + chr(10) + "
           "json.dumps({'type': 'skip', 'test': 'imb.PingPong', 'size_B': 8, 'reason': 'not here'}), "
           "flush=True); time.sleep(600)")


class _Job:
    def start(self, stdout, stderr) -> proc.Process:
        return proc.start([sys.executable, "-c", PROGRAM], stdout=stdout, stderr=stderr)


def test_a_job_that_hangs_after_its_last_point_keeps_it_and_says_so(tmp_path):
    run = Run.create("bench", ["shoal", "bench"], tmp_path / "run")
    sweep = Sweep(run, tmp_path / "program", Options(point_timeout_s=0.5))
    config = Config("here", 1, 2, lambda argv: _Job())
    sweep.run_config(config, [Point("imb.PingPong", 8)])
    assert [r["point_id"] for r in run.rows("skipped")] == ["here/1/2/imb.PingPong/8"]
    assert run.rows("failures") == []
    assert run.manifest["jobs_failed_after_points"] == [
        {"job": "here/1/2", "reason": "timeout", "detail": "no result within 0 s"}]
