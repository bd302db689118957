"""The bad-input corpus: every case is refused with exit 2 and one line naming the input.

One TOML file per case in ``cases/``::

    why = "what is wrong with this input"
    argv = ["bench", "--budget", "0"]       # {dir} is the case's own directory
    names = "--budget"                       # the line must contain this (the input it is about)
    [env]                                    # optional: environment variables for the case
    SHOAL_WAIT_SLACK_NS = "abc"
    [files]                                  # optional: files written into {dir} first
    "inv.toml" = "..."
    [hex]                                    # optional: binary files, as hex
    "inv.toml" = "00ff"

Each case runs in this process (``shoal.cli.main``), in its own directory
as the working directory, with runs, caches and cluster state pointed into
it. Checked: exit code 2, exactly one line on stderr that starts with
``shoal:``, contains ``names`` and says what to do, no traceback, nothing
on stdout, and no file written anywhere in the case's directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from shoal import cli
from tests.badinput.corpus import CASES, argv, load, write_files
# A line that says what to do names a remedy; these words are how shoal's messages do.
ADVICE = ("use ", "give ", "add ", "fix ", "check ", "choose ", "raise ", "lower ", "remove ",
          "set ", "write ", "see ", "unset ", "restore ", "e.g.", "drop ", "start ", "create ",
          "separate ", "leave ", "known:", "must be", "needs ", "need ", "expected ", "at most",
          "at least")


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size if p.is_file() else -1
            for p in root.rglob("*")}


@pytest.mark.timeout(60)  # a case accepted by mistake would start a whole sweep
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bad_input_is_refused_in_one_line(path, tmp_path, monkeypatch, capsys):
    case = load(path)
    assert set(case) <= {"why", "argv", "names", "env", "files", "hex"}, f"{path.name}: unknown keys"
    work = tmp_path / "case"
    work.mkdir()
    write_files(case, work)
    monkeypatch.chdir(work)
    monkeypatch.setenv("SHOAL_RUNS", str(work / "runs"))
    monkeypatch.setenv("SHOAL_STATE_DIR", str(work / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(work / "config"))
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "matplotlib"))  # the library's cache, not shoal's
    for name, value in case.get("env", {}).items():
        monkeypatch.setenv(name, value.replace("{dir}", str(work)))
    words = argv(case, work)
    monkeypatch.setattr(sys, "argv", ["shoal", *words])
    before = _tree(work)

    code = cli.main(words)

    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, f"{path.name}: exit {code}, stderr: {err!r}"
    assert len(lines) == 1 and lines[0].startswith("shoal: "), f"{path.name}: {err!r}"
    assert case["names"] in lines[0], f"{path.name}: the line does not name {case['names']!r}: {lines[0]}"
    assert any(word in lines[0] for word in ADVICE), f"{path.name}: no advice in {lines[0]}"
    assert "Traceback" not in err and out == "", f"{path.name}: stdout {out!r}"
    assert _tree(work) == before, f"{path.name}: wrote {set(_tree(work)) - set(before)}"


def test_the_corpus_is_large_and_every_case_says_why():
    assert len(CASES) >= 200
    for path in CASES:
        case = load(path)
        assert case.get("why") and case.get("argv") and case.get("names"), path.name
