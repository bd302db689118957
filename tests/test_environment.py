"""Every SHOAL_* variable is listed in shoal.environment, read only through it, and documented."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from shoal import environment

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "shoal"
NAME = re.compile(r"SHOAL_[A-Z0-9_]+")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def test_no_module_but_the_list_names_a_shoal_variable():
    """Names in code (string literals, f-string parts) — not in docstrings or comments."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "environment.py":   # the list itself
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docs and NAME.search(node.value)):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value!r}")
    assert found == []


def test_every_variable_the_native_programs_read_is_listed():
    listed = {v.name for v in environment.ALL}
    native = set()
    for path in (SRC / "native").rglob("*.c"):
        native |= set(re.findall(r'"(SHOAL_[A-Z0-9_]+)"', path.read_text()))
    assert native and native <= listed
    assert {v.name for v in environment.ALL if v.reader == "native"} == native


def test_the_docs_table_is_the_list(monkeypatch):
    assert environment.markdown_table() in (ROOT / "docs" / "architecture.md").read_text()
    assert len({v.name for v in environment.ALL}) == len(environment.ALL)


def test_unset_and_empty_give_the_fallback(monkeypatch):
    monkeypatch.delenv("SHOAL_RUNS", raising=False)
    assert environment.RUNS.get() == "runs"
    monkeypatch.setenv("SHOAL_RUNS", "")
    assert environment.RUNS.get() == "runs" and not environment.RUNS.is_set()
    monkeypatch.setenv("SHOAL_RUNS", "/data/runs")
    assert environment.RUNS.get() == "/data/runs"
    monkeypatch.delenv("SHOAL_SSH", raising=False)
    assert environment.SSH.get() is None
