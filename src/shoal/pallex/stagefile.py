"""The stage file: an application's stages, their dependencies and data edges, checked.

    [app]
    name = "icc"
    deadline_s = 60                 # from the start of userspace (systemd's start)
    config = "EU"                   # unit configuration the baseline boots with
    on_success = "poweroff-force"   # what ends the cycle: none | poweroff | poweroff-force | ...
    on_failure = "poweroff-force"

    [stages.cap]
    command = ["{python}", "-m", "shoal.pallex.apps.capture"]
    [stages.clas]
    command = ["{python}", "-m", "shoal.pallex.apps.knn_classify"]
    needs = ["cap", "load"]         # D(s): stages that must finish (or send) first
    requires_units = []             # D'(s): units it needs (Requires= + After=)
    wants_units = []                # units it would like (Wants= + After=)

    [[edges]]                       # data: from sends, to receives; also a need
    from = "cap"
    to = "clas"
    bytes = 2_499_000               # expected size

``{python}`` in a command stands for the Python that runs shoal. A need
carried by a data edge is met when the data arrive (socket activation); a
need without one is met when that stage exits.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import AfterValidator, Field

from shoal.errors import ShoalError
from shoal.inputs.grammar import MAX_SECONDS
from shoal.inputs.schema import Table, Text

ACTIONS = ("none", "poweroff", "poweroff-force", "poweroff-immediate", "halt", "halt-force",
           "halt-immediate", "reboot", "reboot-force", "reboot-immediate", "exit")
UNIT_SUFFIXES = (".service", ".target", ".socket", ".mount", ".device", ".path", ".timer", ".swap")
SOCKET_DIR = "/run/pallex"
RESERVED = ("done", "deadline")
UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL (unix(7))


# -- The file's fields, declared once (checked by shoal.inputs.schema) ------------------
_STAGE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _stage_name(value: str) -> str:
    if not _STAGE_NAME.match(value):
        raise ValueError(f"{value!r}: use only letters, digits, '_', '.' and '-' in names")
    return value


def _unit(value: str) -> str:
    if not value.endswith(UNIT_SUFFIXES) or "/" in value:
        raise ValueError(f"{value!r} is not a unit name (use one ending in {', '.join(UNIT_SUFFIXES)})")
    return value


def _argv(value: Union[str, list[str]]) -> tuple[str, ...]:
    argv = shlex.split(value) if isinstance(value, str) else value
    if not argv:
        raise ValueError('is empty; give the program and its arguments, e.g. ["/path/to/program"]')
    return tuple(argv)


Unit = Annotated[str, AfterValidator(_unit)]


class AppTable(Table):
    required_hint = 'the [app] table needs a name, e.g. [app] name = "icc"'
    name: Annotated[str, AfterValidator(_stage_name)]
    description: str = ""
    deadline_s: Annotated[float, Field(gt=0, le=MAX_SECONDS)] = 120.0
    config: Text = "EU"
    on_success: Literal[ACTIONS] = "poweroff-force"  # type: ignore[valid-type]
    on_failure: Literal[ACTIONS] = "poweroff-force"  # type: ignore[valid-type]


class StageTable(Table):
    required_hint = 'every stage needs a command, e.g. command = ["/path/to/program"]'
    command: Annotated[Union[str, list[Text]], AfterValidator(_argv)]
    needs: list[Text] = []
    requires_units: list[Unit] = []
    wants_units: list[Unit] = []
    description: str = ""


class EdgeTable(Table):
    required_hint = "every [[edges]] table needs from, to and bytes"
    src: Text = Field(alias="from")
    dst: Text = Field(alias="to")
    bytes: Annotated[int, Field(ge=0)] = 0


class StageFile(Table):
    required_hint = 'a stage file needs an [app] table and at least one [stages.NAME]'
    app: AppTable
    stages: Annotated[dict[Annotated[str, AfterValidator(_stage_name)], StageTable], Field(min_length=1)]
    edges: list[EdgeTable] = []
    params: dict[str, Union[str, int, float]] = {}


class StageFileError(ShoalError):
    """A stage file that cannot run: one line naming the stage and the fix."""


@dataclass(frozen=True)
class Stage:
    name: str
    command: tuple[str, ...]
    needs: tuple[str, ...] = ()
    requires_units: tuple[str, ...] = ()
    wants_units: tuple[str, ...] = ()
    description: str = ""

    def argv(self, python: str | None = None, params: dict[str, str] | None = None) -> list[str]:
        """The command with ``{python}`` and ``{PARAM}`` replaced."""
        values = {**(params or {}), "python": python or sys.executable}
        out = []
        for arg in self.command:
            for key, value in values.items():
                arg = arg.replace("{" + key + "}", str(value))
            out.append(arg)
        return out

    @property
    def units(self) -> tuple[str, ...]:
        return self.requires_units + self.wants_units


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    bytes: int = 0

    @property
    def name(self) -> str:
        return f"{self.src}-{self.dst}"


@dataclass
class App:
    name: str
    stages: dict[str, Stage]
    edges: list[Edge]
    deadline_s: float = 120.0
    config: str = "EU"
    on_success: str = "poweroff-force"
    on_failure: str = "poweroff-force"
    description: str = ""
    path: str = ""
    order: list[str] = field(default_factory=list)  # topological
    params: dict[str, str] = field(default_factory=dict)  # {NAME} in commands

    def inputs(self, stage: str) -> list[Edge]:
        return [e for e in self.edges if e.dst == stage]

    def outputs(self, stage: str) -> list[Edge]:
        return [e for e in self.edges if e.src == stage]

    def ordering_needs(self, stage: str) -> list[str]:
        """Needs not carried by data: met when that stage exits."""
        carried = {e.src for e in self.inputs(stage)}
        return [n for n in self.stages[stage].needs if n not in carried]

    def sinks(self) -> list[str]:
        """Stages whose results leave the application: no output edges, nothing needs them."""
        needed = {n for s in self.stages.values() for n in s.needs}
        return [s for s in self.order if not self.outputs(s) and s not in needed]

    def socket_path(self, edge: Edge, base: str = SOCKET_DIR) -> str:
        return f"{base}/{self.name}/{edge.name}.sock"

    def done_path(self, base: str = SOCKET_DIR) -> str:
        return f"{base}/{self.name}/done.sock"

    def units(self) -> list[str]:
        return sorted({u for s in self.stages.values() for u in s.units})


def load(path: str | Path) -> App:
    """Read and check a stage file; StageFileError (exit 2) names what is wrong."""
    from shoal.inputs import schema

    path = Path(path)
    if not path.exists():
        raise StageFileError(f"stage file {path} does not exist; give the path of a stage file "
                             "(or a scenario name: ic, ice, icc, icu1, icu2, icu3)")
    try:
        data, text = schema.read_toml(path, "stage file", "shoal pallex")
    except ShoalError as exc:
        raise StageFileError(str(exc)) from None
    return parse(data, str(path), text)


def parse(data: dict, where: str = "stage file", text: str = "") -> App:
    """Check a parsed stage file (fields: StageFile above) and build the App."""
    from shoal.inputs import schema

    try:
        declared = schema.validate(StageFile, data, where, text)
    except ShoalError as exc:
        raise StageFileError(str(exc)) from None

    def error(keys: tuple, message: str) -> StageFileError:
        return StageFileError(str(schema.locate(where, text, keys, message)))

    stages: dict[str, Stage] = {}
    for sname, table in declared.stages.items():
        if sname in RESERVED:
            raise error(("stages", sname), f"{sname!r} names the completion units; give the stage another name")
        stages[sname] = Stage(sname, table.command, tuple(table.needs), tuple(table.requires_units),
                              tuple(table.wants_units), table.description)
    for stage in stages.values():
        for need in stage.needs:
            if need not in stages:
                raise error(("stages", stage.name, "needs"), f"stage {stage.name!r} needs unknown stage "
                            f"{need!r}; use one of {', '.join(stages)}")
            if need == stage.name:
                raise error(("stages", stage.name, "needs"),
                            f"stage {stage.name!r} needs itself; remove it from its needs")
    edges = _edges(declared.edges, stages, error)
    order = _topological(stages, where)
    app = declared.app
    result = App(name=app.name, stages=stages, edges=edges, deadline_s=app.deadline_s,
                 config=app.config, on_success=app.on_success, on_failure=app.on_failure,
                 description=app.description, path=where, order=order,
                 params={k: str(v) for k, v in declared.params.items()})
    for stage in stages.values():
        for token in re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", " ".join(stage.command)):
            if token != "python" and token not in result.params:
                raise error(("stages", stage.name, "command"), f"stage {stage.name!r} uses {{{token}}} "
                            f"but [params] has no {token}; add it to [params]")
    _deadlocks(result, where)
    for edge in edges:
        if len(result.socket_path(edge)) > UNIX_PATH_MAX:
            raise StageFileError(f"{where}: socket path {result.socket_path(edge)} is longer than "
                                 f"{UNIX_PATH_MAX} bytes (unix(7)); shorten the app or stage names")
    return result


def _edges(declared: list, stages: dict[str, Stage], error) -> list[Edge]:
    edges: list[Edge] = []
    for k, table in enumerate(declared):
        src, dst = table.src, table.dst
        for end, key in ((src, "from"), (dst, "to")):
            if end not in stages:
                raise error(("edges", k, key), f"unknown stage {end!r}; use one of {', '.join(stages)}")
        if src == dst:
            raise error(("edges", k), f"stage {src!r} sends to itself; remove this edge")
        if src not in stages[dst].needs:
            raise error(("edges", k), f"data edge {src} -> {dst}: stage {dst!r} does not list {src!r} "
                        "in needs; add it (a data edge is also a stage dependency)")
        if any(e.src == src and e.dst == dst for e in edges):
            raise error(("edges", k), f"a second edge {src} -> {dst}; send everything over one edge")
        edges.append(Edge(src, dst, table.bytes))
    return edges


def _find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A cycle of ``graph`` (node -> successors) as a list of nodes, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _topological(stages: dict[str, Stage], where: str) -> list[str]:
    cycle = _find_cycle({s: list(st.needs) for s, st in stages.items()})
    if cycle:
        path = " -> ".join(reversed(cycle))
        raise StageFileError(f"{where}: dependency cycle {path}; stage {cycle[0]!r} can never start, "
                             "remove one of these needs")
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(stages):
        for name, stage in stages.items():
            if name not in placed and all(n in placed for n in stage.needs):
                order.append(name)
                placed.add(name)
    return order


def _deadlocks(app: App, where: str) -> None:
    """Refuse stages that would wait for each other forever although their needs are acyclic.

    Events: a stage's start and its exit. A sender exits only once each
    receiver has started and read its data; a stage starts only once every
    need without data has exited; a stage exits after it starts.
    """
    waits: dict[str, list[str]] = {}
    for stage in app.stages:
        waits[f"exit {stage}"] = [f"start {stage}"] + [f"start {e.dst}" for e in app.outputs(stage)]
        waits[f"start {stage}"] = [f"exit {p}" for p in app.ordering_needs(stage)]
    cycle = _find_cycle(waits)
    if cycle:
        first = next(k for k, e in enumerate(cycle) if e.startswith("start"))
        cycle = cycle[first:-1] + cycle[:first] + [cycle[first]]
        chain = ", which waits for ".join(cycle)
        stage = cycle[0].split()[1]
        raise StageFileError(f"{where}: stages would wait for each other forever: {chain} (a sender exits only "
                             f"once its receivers read; a need without data waits for that stage's exit); "
                             f"stage {stage!r} never starts: carry one of those needs as a data edge or drop it")


SCENARIOS = ("ic", "ice", "icc", "icu1", "icu2", "icu3")


def scenario_path(name: str) -> Path:
    """The built-in stage file of one of seed 004's scenarios."""
    return Path(__file__).resolve().parent / "scenarios" / f"{name}.toml"


def resolve(spec: str) -> App:
    """A stage file path, or the name of a built-in scenario."""
    if spec in SCENARIOS:
        return load(scenario_path(spec))
    return load(spec)
