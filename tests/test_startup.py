"""`shoal --help` stays light: the heavy libraries load only in the commands that use them.

(How fast it is, against `python -c pass`, is measured by benchmarks/startup.py.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

HEAVY = ("pandas", "numpy", "matplotlib", "scipy", "sklearn", "rich", "shoal.report",
         "shoal.bench.sweep", "shoal.study.run", "shoal.cluster.emulated")

PROBE = """
import contextlib, io, json, sys
from shoal.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps({"help": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def _loaded(*argv: str) -> tuple[str, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    return result["help"], set(result["modules"])


def test_help_loads_no_heavy_module():
    text, modules = _loaded("--help")
    assert "COMMAND" in text and "bench" in text and "study" in text
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY) == []


def test_a_command_s_help_loads_no_heavy_module_either():
    for command in ("bench", "study", "plot", "waitlab", "run", "power", "cluster", "doctor", "pallex",
                    "dsm", "work"):
        text, modules = _loaded(command, "--help")
        assert f"usage: shoal {command}" in text
        assert sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY) == [], command


def test_help_cites_papers_by_title_not_by_number():
    for argv in ([], ["waitlab"], ["pallex"], ["pallex", "lab"], ["pallex", "lifetime"], ["run"],
                 ["dsm"], ["dsm", "lab"], ["work"]):
        text, _ = _loaded(*argv, "--help")
        # seed003 is a contender's name (the issue's and the docs'), not a citation.
        text = re.sub(r"\bseed003\b", "", text)
        assert not re.search(r"\b00[0-4]\b|seed", text), (argv, text)
