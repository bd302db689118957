"""Nothing in Pallex needs root: the runner, units, lifetime and lab as an ordinary user.

As root the test switches to uid 65534; run by an ordinary user (CI's uid 65534 pass)
it runs as that user directly.

The ordinary user cannot run the project's .venv when its Python lives below
/root (pyenv); the test then runs shoal from the virtual environment made from
the system's /usr/bin/python3 by scripts/unprivileged-venv.sh (made once, then
reused; keyed by the repository and its pyproject.toml).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Root becomes uid 65534; anyone else already is an ordinary user.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
USER = 65534 if os.geteuid() == 0 else os.geteuid()


def _runs_as_nobody(python: str) -> bool:
    # A child started by the child: exec of a path below an unreadable directory fails only there.
    probe = subprocess.run([*NOBODY, python, "-c", "import subprocess, sys; "
                            "sys.exit(subprocess.run([sys.executable, '-c', 'import shoal']).returncode)"],
                           capture_output=True, text=True, cwd="/tmp")
    return probe.returncode == 0


@pytest.fixture(scope="session")
def user_python() -> str:
    if _runs_as_nobody(sys.executable):
        return sys.executable
    # The ordinary user's environment of the whole suite (tests/test_user_tests_as_uid_65534.py).
    venv = subprocess.run([str(REPO / "scripts" / "unprivileged-venv.sh")], capture_output=True, text=True,
                          check=True, timeout=1200).stdout.strip().splitlines()[-1]
    python = str(Path(venv) / "bin" / "python")
    assert _runs_as_nobody(python), f"{python} does not run as uid {USER}"
    return python


def _as_nobody(python: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "MPLCONFIGDIR": str(tmp_path / "mpl"),
           "SHOAL_RUNS": str(tmp_path / "runs"), "LANG": "C.UTF-8"}
    return subprocess.run([*NOBODY, python, "-m", "shoal", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)



@pytest.fixture
def shared_dir():
    """A directory the ordinary user can reach (pytest's own tmp_path sits below a root-only one)."""
    path = Path(tempfile.mkdtemp(prefix="pallex-user-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_pallex_end_to_end_as_an_ordinary_user(shared_dir, user_python):
    tmp_path = shared_dir
    check = subprocess.run([*NOBODY, "id", "-u"], capture_output=True, text=True)
    assert check.stdout.strip() == str(USER) != "0"
    run = _as_nobody(user_python, tmp_path, "pallex", "run", "icc", "--time-scale", "0.1", "--power", "auto", "--json",
                     "--out", str(tmp_path / "run"))
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["outcome"] == "done" and out["done_reports"][0]["result"]["labels"] == [0]
    assert all(e["identical"] for e in out["edges"])
    assert (tmp_path / "run" / "stages.csv").stat().st_uid == USER

    units = _as_nobody(user_python, tmp_path, "pallex", "units", "icu2", "--out", str(tmp_path / "units"),
                       "--root", str(tmp_path / "root"))
    assert units.returncode == 0, units.stderr
    assert "exit 0, 0 warning(s)" in units.stdout

    life = _as_nobody(user_python, tmp_path, "pallex", "lifetime", "--json", "--plot", str(tmp_path / "fig"))
    assert life.returncode == 0, life.stderr
    assert json.loads(life.stdout)["battery_J"] == 43200.0

    lab = _as_nobody(user_python, tmp_path, "pallex", "lab", "--scenarios", "icu1", "--quick", "--json", "--out", str(tmp_path / "lab"))
    assert lab.returncode == 0, lab.stderr
    assert json.loads(lab.stdout)["summary"][0]["lifetime_gain"] > 0


def test_every_shipped_scenario_completes_for_an_ordinary_user(shared_dir, user_python):
    """As uid 65534, each in a network namespace of its own (port 8080 is its own there); the
    upload scenarios get the loopback sink shoal starts where nothing listens."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(shared_dir), "MPLCONFIGDIR": str(shared_dir / "mpl"),
           "SHOAL_RUNS": str(shared_dir / "runs"), "LANG": "C.UTF-8"}
    for scenario in ("ic", "ice", "icc", "icu1", "icu2", "icu3"):
        run = subprocess.run([*NOBODY, "unshare", "-Urn", "sh", "-c", 'ip link set lo up && exec "$@"', "own-net",
                              user_python, "-m", "shoal", "pallex", "run", scenario, "--time-scale", "0.1",
                              "--json"], capture_output=True, text=True, env=env, cwd=shared_dir, timeout=300)
        assert run.returncode == 0, f"{scenario}: {run.stderr}"
        out = json.loads(run.stdout)
        assert out["outcome"] == "done" and out["problems"] == [], scenario
        if scenario.startswith("icu"):
            assert out["upload_sinks"][0]["uploads"] == int(scenario[3:])
            assert len(out["done_reports"][0]["result"]["uploads"]) == int(scenario[3:])
