"""CI runs as root; this runs the ordinary user's tests (tests/user) as uid 65534.

As tests that parallel runs of the suite start at once: without any cgroup, all of them (in
two parts, ``PARTS``) and the bad-input cases whose command emulates devices here
(tests/badinput: such a command re-runs itself in a user namespace for an ordinary user, so
it must refuse bad input before; every other case takes the path root's run of the corpus
takes); inside a cpu
cgroup delegated to that user (its own v1 group owned by it, or a v2 group it may divide),
those marked ``cgroup``, whose outcome turns on it (the others, a study among them, would
repeat the first run's paths: the devices' limiter is what differs, and the marked tests
check it). The user's environment is a venv made from the system
Python (scripts/unprivileged-venv.sh, cached under /var/tmp) with shoal from this
repository's src/, a fresh HOME, a fresh cache in which the user builds the native
programs, and a PATH without /usr/sbin. Run as an ordinary user, it runs tests/user as is.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.badinput.corpus import CASES, emulates_here, load, write_files

REPO = Path(__file__).resolve().parent.parent
USER = 65534
CGROUP = Path("/sys/fs/cgroup")


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=1800)


def _delegated_groups(name: str) -> list[Path]:
    """cpu cgroups owned by the user, as an administrator (or systemd) delegates them."""
    if (CGROUP / "cgroup.controllers").exists():
        # v2: the user's processes sit in a leaf under the group they may divide.
        (CGROUP / name / "tests").mkdir(parents=True)
        (CGROUP / "cgroup.subtree_control").write_text("+cpu")
        groups = [CGROUP / name / "tests", CGROUP / name]
    else:
        groups = []
        for controller in ("cpu", "cpuacct"):
            if (CGROUP / controller / "cgroup.procs").exists():
                (CGROUP / controller / name).mkdir()
                groups.append(CGROUP / controller / name)
    for group in groups:
        for path in [group, *group.iterdir()]:
            os.chown(path, USER, USER)
    return groups


def _remove(groups: list[Path]) -> None:
    for group in groups:
        if not group.exists():
            continue
        for path in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: len(str(p)),
                           reverse=True):
            path.rmdir()
        group.rmdir()


# Without a cgroup, the tests of tests/user in two parts that parallel runs of the suite start
# at once (run whole, behind the rest of a loaded suite, it ended the suite 40 s after the
# others): those of the study fixture with the longest test, then the others with the
# bad-input cases.
STUDIES = ("test_study_runs_without_root", "test_an_interrupted_study_resumes_without_root_and_keeps_what_it_measured",
           "test_one_cluster_brought_up_once_serves_bench_work_dsm_and_study")
# id: (inside a delegated cgroup, the tests/user tests it runs (None: every one), with the
# bad-input cases)
PARTS = {"delegated-cgroup": (True, None, False), "no-cgroup-studies": (False, "studies", False),
         "no-cgroup-rest": (False, "rest", True)}


def _user_tests(which: str | None) -> list[str]:
    """tests/user's tests as node ids: every one, the STUDIES or the rest."""
    if which is None:
        return ["tests/user"]
    found = []
    for path in sorted((REPO / "tests" / "user").glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found.append((f"{path.relative_to(REPO)}::{node.name}", node.name))
    missing = set(STUDIES) - {name for _, name in found}
    assert not missing, f"STUDIES names tests that tests/user does not have: {missing}"
    return [nodeid for nodeid, name in found if (name in STUDIES) == (which == "studies")]


@pytest.mark.timeout(3600)
# As an ordinary user, once, in whatever cgroups the user has.
@pytest.mark.parametrize("delegated,part,badinput",
                         list(PARTS.values()) if os.geteuid() == 0 else [(None, None, False)],
                         ids=list(PARTS) if os.geteuid() == 0 else ["as-is"])
def test_ordinary_user_tests_pass_as_uid_65534(delegated, part, badinput):
    if os.geteuid() != 0:
        proc = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/user"],
                    dict(os.environ), REPO)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        return
    venv = subprocess.run([str(REPO / "scripts" / "unprivileged-venv.sh")], capture_output=True,
                          text=True, check=True).stdout.strip().splitlines()[-1]
    cache = Path(tempfile.mkdtemp(prefix="shoal-user-cache-"))
    os.chown(cache, USER, USER)
    try:
        _run_user_tests(venv, cache, delegated, part, badinput)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _emulating_cases() -> list[str]:
    """The bad-input cases whose command emulates devices here, as pytest node ids."""
    chosen = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in CASES:
            case, work = load(path), Path(tmp) / path.stem
            work.mkdir()
            write_files(case, work)
            if emulates_here(case, work):
                chosen.append(f"tests/badinput/test_corpus.py::test_bad_input_is_refused_in_one_line[{path.stem}]")
    assert len(chosen) >= 50, f"only {len(chosen)} bad-input cases emulate devices"  # the selection works
    return chosen


def _run_user_tests(venv: str, cache: Path, delegated: bool, part: str | None, badinput: bool) -> None:
    # Outside root's own temporary directory, which the user may not enter.
    home = Path(tempfile.mkdtemp(prefix="shoal-user-home-"))
    os.chown(home, USER, USER)
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "TMPDIR": str(home), "XDG_CACHE_HOME": str(cache)}
    # Without a cgroup, the bad-input cases that emulate too: a command that re-runs itself in
    # a user namespace must refuse bad input before (the corpus calls shoal in its own process).
    inner = [f"{venv}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--basetemp", str(home / "pytest"), *(["-m", "cgroup"] if delegated else []),
             *_user_tests(part), *(_emulating_cases() if badinput else [])]
    user = [shutil.which("setpriv") or "/usr/bin/setpriv", "--reuid", str(USER), "--regid", str(USER),
            "--clear-groups", "--"]
    groups = _delegated_groups(f"shoal-test-user-{os.getpid()}") if delegated else []
    try:
        # Join the delegated groups first, then become the user.
        joined = [g for g in groups if not any(o != g and o.is_relative_to(g) for o in groups)]
        enter = "".join(f'echo $$ > "{g}/cgroup.procs"; ' for g in joined)
        proc = _run(["/bin/sh", "-c", enter + 'exec "$@"', "sh", *user, *inner], env, REPO)
    finally:
        _remove(groups)
        shutil.rmtree(home, ignore_errors=True)
    assert proc.returncode == 0, (f"as uid {USER} ({'with' if delegated else 'without'} a delegated "
                                  f"cgroup):\n" + proc.stdout[-6000:] + proc.stderr[-2000:])
