"""Whether cyclictest can run: root of the host's user namespace, or a real-time rlimit."""

from __future__ import annotations

import subprocess
import sys

from shoal import proc


def test_root_of_a_user_namespace_of_its_own_is_told_cyclictest_cannot_run():
    # An ordinary user's emulated cluster runs shoal as root of its own user namespace:
    # the kernel still refuses SCHED_FIFO there, so cyclictest is a skipped row, not a failure.
    code = "from shoal.wait import cyclictest; print(cyclictest.unavailable())"
    inside = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                             f"ulimit -r 0 && exec {sys.executable} -c '{code}'"],
                            capture_output=True, text=True, timeout=60)
    assert inside.returncode == 0, inside.stderr
    if proc.find("cyclictest") is None:
        assert inside.stdout.startswith("cyclictest not found")
    else:
        assert inside.stdout.startswith("cyclictest needs root or an RLIMIT_RTPRIO"), inside.stdout
