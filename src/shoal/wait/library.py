"""Build libshoalwait for an MPI and put it into a launch.

The library is compiled with the MPI's own mpicc (``shoal.mpi.build``
caches it per MPI identity); a launch gets it through ``LD_PRELOAD`` and the
``SHOAL_WAIT*`` variables in ``Job.rank_env``, which ``shoal.mpi.launch``
passes to every rank on the launcher's command line.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Mapping

from shoal import environment
from shoal.mpi.base import MPIInstall
from shoal.mpi.launch import Job, preload_first
from shoal.wait.modes import parse_classes, parse_mode

TARGET = "shoalwait"
# Variables libshoalwait reads, which a user-written mpiexec line must pass
# on to its ranks (some launchers pass only what they are told to).
ENV_NAMES = ("LD_PRELOAD", *(v.name for v in environment.WAIT_VARIABLES))


def library_for(mpi: MPIInstall) -> Path:
    """Path of libshoalwait.so built for this MPI (compiled on first use)."""
    from shoal.mpi import build   # the compiler cache: not needed for `shoal --help`

    return build.build(TARGET, mpi)


def wait_env(mode: str, mpi: MPIInstall, telemetry_dir: Path | str | None = None,
             classes: str | None = None, slack_ns: int | None = None,
             place: dict | None = None, given: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment that makes every rank wait in ``mode`` (validated first), with the
    parameters the user left unset (not in ``mode``, ``slack_ns``, this environment or
    ``given``, the ranks' own) taken from the stored calibration of ``place``
    (shoal.wait.tuning; None: this host)."""
    from shoal.wait import tuning

    tuned = tuning.for_launch(parse_mode(mode), place, slack_given=slack_ns is not None, given=given)
    env = {"LD_PRELOAD": preload_first(library_for(mpi)), environment.WAIT.name: tuned.mode, **tuned.env}
    if classes is not None:
        env[environment.WAIT_CLASSES.name] = parse_classes(classes)
    if telemetry_dir is not None:
        env[environment.WAIT_TELEMETRY.name] = str(Path(telemetry_dir).resolve())
    if slack_ns is not None:
        env[environment.WAIT_SLACK_NS.name] = str(int(slack_ns))
    rewritten = classes or os.environ.get(environment.WAIT_CLASSES.name, "all")
    if rewritten == "all" or "coll" in rewritten.split(","):
        env.update(same_algorithms(mpi, os.environ))
    return env


_warned: set[str] = set()


def same_algorithms(mpi: MPIInstall, chosen: Mapping[str, str]) -> dict[str, str]:
    """Settings that keep the collective algorithms the user ``chosen`` for the blocking
    calls once libshoalwait runs them as their nonblocking forms (the MPI picks those by
    other settings: a 16 KiB broadcast on 8 ranks scattered and gathered where the binomial
    tree was asked). A choice with no nonblocking twin is said once."""
    twins, lone = mpi.impl.nonblocking_twins(chosen)
    for setting in lone:
        if setting not in _warned:
            _warned.add(setting)
            print(f"shoal: warning: {setting} has no nonblocking form in {mpi.impl.title}: "
                  "collectives under libshoalwait run the MPI's own choice "
                  f"({environment.WAIT_CLASSES.name}=p2p,send keeps them blocking)",
                  file=sys.stderr)
    return twins


def apply(job: Job, mode: str, telemetry_dir: Path | str | None = None,
          classes: str | None = None, slack_ns: int | None = None, place: dict | None = None) -> Job:
    """A copy of ``job`` whose ranks wait in ``mode`` (LD_PRELOAD + env in rank_env)."""
    env = wait_env(mode, job.mpi, telemetry_dir, classes, slack_ns, place, given=job.rank_env)
    return dataclasses.replace(job, rank_env={**job.rank_env, **env})


def forwarding_env(env: dict[str, str], mpi: MPIInstall) -> dict[str, str]:
    """Environment for a user-written mpiexec line so its ranks see ``env``
    (the MPI's module says how its launcher forwards variables)."""
    return mpi.impl.forward_env(env, ENV_NAMES)
