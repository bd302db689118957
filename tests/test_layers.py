"""The layers of shoal, written once: a package imports only packages of its own layer or below,
and no two packages import each other, directly or around a loop (lazy imports inside
functions count: they are imports all the same, and so does a module named in a string, as
``importlib.import_module`` or ``python -m`` takes it). docs/architecture.md shows the same order.

Run on another tree (``python tests/test_layers.py SRC``) it prints what breaks the rules.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "shoal"
# A string that is a module's name ("shoal.power.spec", or "shoal.power.rapl:RaplSource"
# as an entry point names an object in it): the code imports it by that name.
MODULE_NAME = re.compile(r"(shoal(?:\.\w+)+)(?::\w+)?")

# Top to bottom. A module at the top of shoal/ (profiles is a package) counts as a package.
LAYERS: list[tuple[str, ...]] = [
    ("__main__", "cli"),                           # parse arguments, call the library, render
    ("study", "report", "doctor"),                 # the main job and its report; the checklist
    ("bench", "work", "dsm", "pallex"),            # what runs
    ("execute",),                                  # where ranks run and how; one validate()
    ("wait",),                                     # libshoalwait: modes, preload, telemetry, lab
    ("power",),                                    # power sources, sampler, energy
    ("cluster",),                                  # local | emulated | ssh | Slurm
    ("mpi",),                                      # one interface, one module per MPI; builds
    ("model",),                                    # pure functions
    ("profiles",),                                 # device, link and switch profiles
    ("runs",),                                     # run directories and the live-run registry
    ("inputs",),                                   # TOML with positions, grammars, one-line errors
    ("proc", "heldfiles", "hostfacts", "stackfacts", "render", "verbose", "environment", "errors", "jsonfile",
     "__init__"),
]


def package_of(module: str) -> str:
    """``shoal.cluster.session`` -> ``cluster``; ``shoal`` itself (its __version__) -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(src: Path) -> dict[str, dict[str, str]]:
    """Package -> {package it imports: the first place it does}."""
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for path in sorted(src.rglob("*.py")):
        relative = path.relative_to(src)
        me = relative.parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = ([f"shoal.{a.name}" for a in node.names] if node.module == "shoal"
                         else [node.module])
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and (named := MODULE_NAME.fullmatch(node.value)):
                names = [named.group(1)]
            else:
                continue
            for name in names:
                if name == "shoal" or name.startswith("shoal."):
                    other = package_of(name)
                    if (src / other).is_dir() or (src / f"{other}.py").exists() or other == "__init__":
                        if other != me:
                            found[me].setdefault(other, f"{relative}:{node.lineno}")
    return found


def upward(src: Path) -> list[str]:
    """Every import of a package from a layer above the importer's."""
    level = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    problems = []
    for package, targets in sorted(imports(src).items()):
        if package not in level:
            problems.append(f"{package}: in no layer; add it to LAYERS (tests/test_layers.py) "
                            "and docs/architecture.md")
            continue
        for other, where in sorted(targets.items()):
            if other in level and level[other] < level[package]:
                problems.append(f"{where}: {package} imports {other}, a layer above it")
    return problems


def cycles(src: Path) -> list[list[str]]:
    """Loops of packages importing each other (each loop once)."""
    graph = {p: set(t) for p, t in imports(src).items()}
    found, seen = [], set()

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                loop = path[path.index(nxt):]
                key = frozenset(loop)
                if key not in seen:
                    seen.add(key)
                    found.append(loop + [nxt])
            elif len(path) < 12:
                walk(nxt, path + [nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def test_no_package_imports_one_above_it():
    problems = upward(SRC)
    assert not problems, "\n".join(problems)


def test_no_two_packages_import_each_other():
    loops = cycles(SRC)
    assert not loops, "\n".join(" -> ".join(loop) for loop in loops)


def test_every_package_has_a_layer():
    packages = {p.name.removesuffix(".py") for p in SRC.iterdir()
                if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    placed = {p for layer in LAYERS for p in layer}
    assert packages - {"native", "data"} <= placed, sorted(packages - placed)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "shoal" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "shoal"


def test_the_check_fails_on_a_planted_upward_import(tmp_path):
    """The rules run on a copy of shoal with one import planted: an input grammar that asks
    the study (inputs sits at the bottom) is found, with its place."""
    import shutil

    copy = tmp_path / "shoal"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "native", "data"))
    grammar = copy / "inputs" / "grammar.py"
    grammar.write_text(grammar.read_text() + "\n\ndef _late():\n    from shoal.study import request\n")
    problems = upward(copy)
    assert len(problems) == 1 and "inputs/grammar.py:" in problems[0] \
        and "inputs imports study, a layer above it" in problems[0], problems
    assert cycles(copy), "inputs -> study -> ... -> inputs is a loop"


def test_the_check_finds_an_upper_layer_imported_by_its_name(tmp_path):
    """importlib with a module's name is an import: inputs asking power that way is found."""
    src = _tree(tmp_path, {"__init__.py": "", "power/__init__.py": "", "power/spec.py": "",
                           "inputs/__init__.py": "",
                           "inputs/options.py": "import importlib\n\n\ndef check(text):\n"
                                                "    importlib.import_module('shoal.power.spec')"
                                                ".parse(text)\n"})
    assert upward(src) == ["inputs/options.py:5: inputs imports power, a layer above it"]


def test_the_check_finds_a_loop_within_one_layer(tmp_path):
    src = _tree(tmp_path, {"__init__.py": "", "bench/__init__.py": "from shoal.work import x\n",
                           "work/__init__.py": "def f():\n    import shoal.bench\n"})
    assert upward(src) == []
    assert cycles(src) == [["bench", "work", "bench"]]


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else SRC
    for line in upward(root) + [" -> ".join(loop) for loop in cycles(root)]:
        print(line)
