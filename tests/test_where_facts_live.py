"""Each kind of fact has one home: device watts in profiles.toml, one profile class."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import shoal
from shoal import profiles

SRC = Path(shoal.__file__).resolve().parent


def _python_files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _literal_numbers(path: Path) -> set[float]:
    """Every float literal of a Python file (docstrings and comments included, as text)."""
    text = path.read_text()
    return {float(m) for m in re.findall(r"(?<![\w.])\d+\.\d+(?:e-?\d+)?(?![\w.])", text)}


def _device_watts() -> dict[float, str]:
    """Every watt figure of the built-in profiles with at least three significant digits
    (round figures such as 3.0 W also stand for other things)."""
    found: dict[float, str] = {}
    for profile in profiles.load_all()[0].values():
        numbers = {"idle_W": profile.idle_W, "busy_W": profile.busy_W, "max_W": profile.max_W}
        if profile.per_test is not None:
            for row in ("average_W", "max_W", "min_W"):
                numbers.update({f"per_test.{row}.{t}": w for t, w in getattr(profile.per_test, row).items()})
        for field, watts in numbers.items():
            if watts is not None and len(f"{watts:g}".replace(".", "").strip("0")) >= 3:
                found[watts] = f"{profile.name}.{field}"
    return found


def test_device_watts_live_only_in_profiles_toml():
    watts = _device_watts()
    assert len(watts) > 40  # the two thesis tables and the boards' idle/busy figures
    offenders = []
    for path in _python_files():
        for number in _literal_numbers(path) & set(watts):
            offenders.append(f"{path.relative_to(SRC)}: {number} ({watts[number]})")
    assert not offenders, "device watts written outside shoal/data/profiles.toml: " + "; ".join(offenders)


def test_the_grep_would_find_a_copied_watt_figure(tmp_path):
    copied = tmp_path / "copy.py"
    copied.write_text("BUSY = 5.7889875  # a MinnowBoard\n")
    assert 5.7889875 in _literal_numbers(copied) and 5.7889875 in _device_watts()


def test_one_device_profile_class():
    """Devices' power (idle/busy watts) is held by one class, shoal.profiles.DeviceProfile,
    the switches devices share included (role "switch"), and its P-states (the same device at
    its other clocks, shoal.profiles.clock.PState, read only from a profile's table). (The
    file's schema in shoal.profiles.tables declares the same fields; it holds no device.)"""
    holders = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            schema = any(getattr(b, "id", "").endswith(("Table", "BaseModel")) for b in getattr(node, "bases", []))
            if isinstance(node, ast.ClassDef) and not schema:
                fields = {item.target.id for item in node.body
                          if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
                if fields & {"idle_W", "busy_W"}:
                    holders.append(f"{path.relative_to(SRC)}:{node.name}")
    assert holders == ["profiles/__init__.py:DeviceProfile", "profiles/clock.py:PState"]


def test_busy_watts_are_the_mean_of_the_max_rows():
    """seed 000 Tables 5.6/5.7: busy_W is the fully-loaded draw, the MAX row's mean."""
    for name in ("minnowboard", "nuc"):
        profile = profiles.builtin(name)
        rows = profile.per_test
        assert len(rows.max_W) == len(rows.average_W) == len(rows.min_W) == 8
        assert abs(profile.busy_W - sum(rows.max_W.values()) / 8) < 1e-9
        assert max(rows.average_W.values()) < profile.busy_W < profile.max_W == max(rows.max_W.values())
        assert profile.idle_W < profile.busy_W


CLUSTER_KINDS = {"local", "emulated", "ssh", "slurm", "userns"}


def _kind_tests(tree: ast.AST) -> list[int]:
    """Lines comparing something with a cluster kind name (== / != / in / getattr defaults)."""
    def names(node) -> set:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*(names(e) for e in node.elts)) if node.elts else set()
        return set()

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            if any(names(x) & CLUSTER_KINDS for x in [node.left, *node.comparators]):
                lines.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) == 3 and names(node.args[2]) & CLUSTER_KINDS):
            lines.append(node.lineno)
    return sorted(lines)


def test_cluster_kinds_are_tested_only_inside_the_cluster_package():
    offenders = []
    for path in _python_files():
        relative = path.relative_to(SRC)
        # The cluster package, and the tag of where a request's ranks run (shoal.execute.where).
        if relative.parts[0] == "cluster" or relative == Path("execute/where.py"):
            continue
        offenders += [f"{relative}:{line}" for line in _kind_tests(ast.parse(path.read_text()))]
    assert not offenders, "cluster kinds compared outside shoal/cluster (ask the cluster instead): " + \
        ", ".join(offenders)


def test_the_kind_grep_finds_comparisons():
    tree = ast.parse('if where.kind == "emulated" or mode in ("ssh", "slurm"):\n    pass\n'
                     'kind = getattr(where, "kind", "local")\nchoice = "local"\n')
    assert _kind_tests(tree) == [1, 1, 3]


def _run_creations(tree: ast.AST) -> list[int]:
    """Lines that call ``Run.create`` (a run directory made)."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "create" and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "Run"]


def test_commands_make_no_runs_the_library_does():
    """A command parses, calls one library entry point and renders: the run directory is made
    by the library (power.run, pallex.run, dsm.lab, wait.lab, ...), so a call without the
    command line measures and keeps the same."""
    found = {str(p.relative_to(SRC)): lines for p in sorted((SRC / "cli").glob("*.py"))
             if (lines := _run_creations(ast.parse(p.read_text())))}
    assert found == {}
    assert _run_creations(ast.parse("record = Run.create('x', [], None)")) == [1]
