"""MPI jobs on this machine keep their temporary files in a directory of the shoal process's
own, gone when it exits: a killed job's session files never meet another user's launcher."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from shoal.mpi import scratch
from shoal.mpi.launch import Job

# Each rank writes what it sees to a file of its own: the launcher forwards the ranks' output
# in pieces, and two ranks' lines can arrive interleaved on one stdout.
SHOW_TMPDIR = ("import os, sys; "
               "open(os.path.join(sys.argv[1], str(os.getpid())), 'w').write(os.environ['TMPDIR'])")


def test_a_local_job_gets_this_processs_directory(mpich, tmp_path):
    done = Job(mpich, 2, [sys.executable, "-c", SHOW_TMPDIR, str(tmp_path)]).run(timeout=120)
    assert done.ok, done.stderr
    mine = scratch.directory()
    assert Path(mine) == Path(tempfile.gettempdir()) / f"shoal-{os.geteuid()}" / str(os.getpid())
    shown = [f.read_text() for f in tmp_path.iterdir()]
    assert shown == [mine] * 2, shown
    assert os.stat(mine).st_mode & 0o777 == 0o700


def test_directories_of_gone_processes_are_removed_and_a_run_removes_its_own(tmp_path):
    base = Path(tempfile.gettempdir()) / f"shoal-{os.geteuid()}"
    gone = subprocess.Popen(["true"])
    gone.wait()
    scratch.directory()  # makes the base
    left = base / str(gone.pid)
    (left / "ompi.1").mkdir(parents=True)
    (left / "ompi.1" / "hwloc.sm").write_text("x")
    code = ("from shoal.mpi import scratch; import os; d = scratch.directory(); "
            "open(os.path.join(d, 'f'), 'w').close(); print(d)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    theirs = Path(done.stdout.strip())
    assert theirs.parent == base and not theirs.exists()  # removed when that process exited
    assert not left.exists()  # its maker was gone: removed when the next one made its own
    assert Path(scratch.directory()).exists()  # this live process's stays


def test_a_process_in_another_pid_namespace_leaves_the_hosts_directories(tmp_path):
    # An ordinary user's cluster runs shoal in a PID namespace of its own, as that namespace's
    # root: the host's processes are invisible there, so their directories look orphaned.
    mine = Path(scratch.directory())
    code = ("from shoal.mpi import scratch; import os; d = scratch.directory(); print(d, os.getpid())")
    inside = subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc",
                             sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert inside.returncode == 0, inside.stderr
    theirs, pid = inside.stdout.split()
    assert pid == "1" and Path(theirs).parent != mine.parent and "-pidns" in Path(theirs).parent.name
    assert mine.exists()  # the host's live process keeps its directory
