"""Files an MPI leaves when its job is stopped: which no live process holds, and removing them
(by shoal after a job that did not end cleanly, and by ``shoal doctor --fix``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from shoal import heldfiles

HOLD_MAPPED = """
import mmap, sys, time
with open(sys.argv[1], "r+b") as fh:
    m = mmap.mmap(fh.fileno(), 0)
print("mapped", flush=True)
time.sleep(120)
"""


def _file(path: Path, age_s: float) -> str:
    path.write_bytes(b"\0" * 4096)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return str(path)


def _holding(path: str, mapped: bool) -> subprocess.Popen:
    """A process that holds ``path`` open (its stdin) or only mapped (the file closed)."""
    if mapped:
        holder = subprocess.Popen([sys.executable, "-c", HOLD_MAPPED, path], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "mapped"
        return holder
    with open(path) as fh:
        return subprocess.Popen(["sleep", "120"], stdin=fh)


def test_only_old_files_that_no_process_maps_or_holds_open_are_leftovers(tmp_path):
    old, young = 3 * heldfiles.MIN_AGE_S, 1.0
    left = _file(tmp_path / "seg_left", old)
    mapped = _file(tmp_path / "seg_mapped", old)
    open_ = _file(tmp_path / "seg_open", old)
    _file(tmp_path / "seg_young", young)
    _file(tmp_path / "other", old)
    holders = [_holding(mapped, mapped=True), _holding(open_, mapped=False)]
    try:
        pattern = [str(tmp_path / "seg_*")]
        assert heldfiles.unheld(pattern) == [(left, 4096)]
        # With no age asked, the young file counts too; since a time, only what changed after it.
        assert [p for p, _ in heldfiles.unheld(pattern, min_age_s=0)] == [left, str(tmp_path / "seg_young")]
        assert heldfiles.unheld(pattern, min_age_s=0, newer_than=time.time() - 30) == [
            (str(tmp_path / "seg_young"), 4096)]
        # remove() looks again: a held file named to it stays.
        assert heldfiles.remove([left, mapped, open_]) == [left]
        assert not os.path.exists(left) and os.path.exists(mapped) and os.path.exists(open_)
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
    assert heldfiles.remove([mapped, open_]) == [mapped, open_]


def test_doctor_reports_and_fix_removes_shared_memory_that_no_process_holds(tmp_path):
    """A segment named as the default MPI names its own, left in /dev/shm by a job that was
    killed: doctor counts it, --fix removes it and leaves one that a process still maps."""
    tag = uuid.uuid4().hex[:12]
    left = _file(Path(f"/dev/shm/mpich_shm_{tag}_0"), 2 * heldfiles.MIN_AGE_S)
    held = _file(Path(f"/dev/shm/mpich_shm_{tag}_1"), 2 * heldfiles.MIN_AGE_S)
    holder = _holding(held, mapped=True)
    env = {**os.environ, "SHOAL_STATE_DIR": str(tmp_path / "state")}

    def doctor(*extra: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "shoal", "doctor", "--json", *extra], env=env,
                              capture_output=True, text=True, timeout=300)
        return {f["area"]: f for f in json.loads(done.stdout)}["MPI leftovers"]

    try:
        found = doctor()
        assert not found["ok"] and "no running process holds" in found["found"]
        assert "--fix" in found["fix"]
        fixed = doctor("--fix")
        assert fixed["ok"] and fixed["found"].startswith("removed ")
        assert not os.path.exists(left) and os.path.exists(held)
    finally:
        holder.kill()
        holder.wait()
        for path in (left, held):
            if os.path.exists(path):
                os.unlink(path)
