"""What the multihost benchmarks share: `shoal cluster ...` on the namespaced Slurm of
tests/cluster/slurm_hosts.py (its stdout, or the script ends with the command's last
words), and the spread of a measurement's rounds."""

from __future__ import annotations

import statistics
import sys

SHOAL = [sys.executable, "-m", "shoal", "cluster"]


def shoal(hosts, argv: list[str], env: dict[str, str], node: str | None = None) -> str:
    """Run ``shoal cluster ARGV`` on ``node`` (the controller: a login node)."""
    where = {"node": node} if node else {}
    done = hosts.run([*SHOAL, *argv], env=env, check=False, timeout=900, **where)
    if done.returncode != 0:
        raise SystemExit(f"cluster {' '.join(argv[:2])} failed: {done.stderr.strip()[-600:]}")
    return done.stdout


def spread(values: list[float]) -> float:
    """(max - min) / median of the rounds."""
    return (max(values) - min(values)) / statistics.median(values)
