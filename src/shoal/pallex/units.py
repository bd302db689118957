"""systemd units for a stage file: a target, a service per stage, a socket per data edge.

Design (docs/pallex.md has the why of each line):

* every unit has ``DefaultDependencies=no`` (plus ``Conflicts=``/``Before=``
  ``shutdown.target``), so a stage starts as soon as its own dependencies are
  met, before ``basic.target``;
* a data edge is a socket unit whose ``Service=`` is the receiver: traffic
  starts the receiver, and no ``After=`` ties a receiver to its sender (a
  oneshot sender blocked on a write larger than the socket buffer would never
  exit, and the receiver ordered after it would never start);
* unit dependencies are ``Requires=``/``Wants=`` *with* ``After=``; a need not
  carried by data is ``Requires=`` + ``After=`` on that stage's service
  (``RemainAfterExit=yes``, so a finished stage is not started again);
* sinks report to a done socket; its service exits when every sink has, and
  its ``SuccessAction=`` ends the cycle; a timer fires the deadline.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from shoal import proc
from shoal.errors import ShoalError
from shoal.pallex.stagefile import SOCKET_DIR, App, Edge


def _tool(name: str) -> str:
    return proc.tool(name, "to check and install systemd units", package="systemd")


def prefix(app: App) -> str:
    return f"pallex-{app.name}"


def service(app: App, stage: str) -> str:
    return f"{prefix(app)}-{stage}.service"


def socket_unit(app: App, edge: Edge) -> str:
    return f"{prefix(app)}-{edge.name}.socket"


def quote(arg: str) -> str:
    """One ExecStart= word: specifiers and variables escaped, quoted when needed."""
    arg = arg.replace("\\", "\\\\").replace("%", "%%").replace("$", "$$")
    if re.search(r'[\s"\';]', arg) or not arg:
        return '"' + arg.replace('"', '\\"') + '"'
    return arg


def _env(pairs: dict[str, str]) -> str:
    return " ".join(quote(f"{k}={v}") for k, v in pairs.items())


def _lines(section: str, items: list[tuple[str, str]]) -> str:
    return f"[{section}]\n" + "".join(f"{k}={v}\n" for k, v in items if v != "")


def generate(app: App, python: str | None = None, socket_dir: str = SOCKET_DIR,
             record: str | None = None, params: dict[str, str] | None = None) -> dict[str, str]:
    """File name -> text of every unit of ``app``.

    ``python`` replaces ``{python}`` in commands (default: the Python running
    shoal); ``record`` makes the done and deadline services append their JSON
    line to that file as well (for tests).
    """
    import sys

    py = python or sys.executable
    units: dict[str, str] = {}
    head = [("DefaultDependencies", "no"), ("Conflicts", "shutdown.target"), ("Before", "shutdown.target")]
    timeout = f"{app.deadline_s:g}s"
    fail = [] if app.on_failure == "none" else [("FailureAction", app.on_failure)]
    sinks = app.sinks()
    done_sock = f"{prefix(app)}-done.socket"
    done_path = app.done_path(socket_dir)
    for name in app.order:
        stage = app.stages[name]
        outs = [socket_unit(app, e) for e in app.outputs(name)]
        ins = [socket_unit(app, e) for e in app.inputs(name)]
        needs = [service(app, n) for n in app.ordering_needs(name)]
        after = outs + ([done_sock] if name in sinks else []) + list(stage.units) + needs
        env = {"PALLEX_APP": app.name, "PALLEX_STAGE": name}
        if app.outputs(name):
            env["PALLEX_OUTPUTS"] = ",".join(f"{e.dst}={app.socket_path(e, socket_dir)}" for e in app.outputs(name))
        if name in sinks:
            env["PALLEX_DONE"] = done_path
        unit = [("Description", f"Pallex {app.name}: stage {name}" + (f" ({stage.description})" if stage.description else "")),
                *head,
                ("Wants", " ".join(outs + ([done_sock] if name in sinks else []) + list(stage.wants_units))),
                ("Requires", " ".join(list(stage.requires_units) + needs)),
                ("After", " ".join(after)), *fail]
        svc = [("Type", "oneshot"), ("RemainAfterExit", "yes"),
               ("ExecStart", " ".join(quote(a) for a in stage.argv(py, {**app.params, **(params or {})}))),
               ("Environment", _env(env)), ("TimeoutStartSec", timeout), ("Sockets", " ".join(ins))]
        units[service(app, name)] = _lines("Unit", unit) + "\n" + _lines("Service", svc)
    for edge in app.edges:
        unit = [("Description", f"Pallex {app.name}: data {edge.src} -> {edge.dst} ({edge.bytes} B expected)"), *head]
        sock = [("ListenStream", app.socket_path(edge, socket_dir)), ("Accept", "no"),
                ("Service", service(app, edge.dst)), ("FileDescriptorName", edge.src),
                ("SocketMode", "0600"), ("RemoveOnStop", "yes")]
        units[socket_unit(app, edge)] = _lines("Unit", unit) + "\n" + _lines("Socket", sock)
    tool = [quote(py), "-m", "shoal.pallex.done"]
    if record:
        tool += ["--record", quote(record)]
    units[done_sock] = (_lines("Unit", [("Description", f"Pallex {app.name}: sinks report here"), *head]) + "\n"
                        + _lines("Socket", [("ListenStream", done_path), ("Accept", "no"),
                                            ("Service", f"{prefix(app)}-done.service"), ("SocketMode", "0600"),
                                            ("RemoveOnStop", "yes")]))
    ok = [] if app.on_success == "none" else [("SuccessAction", app.on_success)]
    units[f"{prefix(app)}-done.service"] = (
        _lines("Unit", [("Description", f"Pallex {app.name}: every stage done, end the cycle"), *head, *ok, *fail])
        + "\n" + _lines("Service", [("Type", "oneshot"),
                                    ("ExecStart", " ".join(tool + ["--app", app.name, "--expect", str(len(sinks))])),
                                    ("TimeoutStartSec", timeout), ("Sockets", done_sock)]))
    units[f"{prefix(app)}-deadline.timer"] = (
        _lines("Unit", [("Description", f"Pallex {app.name}: deadline {app.deadline_s:g} s after start"), *head])
        + "\n" + _lines("Timer", [("OnStartupSec", timeout), ("AccuracySec", "100ms")]))
    late = [] if app.on_failure == "none" else [("SuccessAction", app.on_failure)]
    units[f"{prefix(app)}-deadline.service"] = (
        _lines("Unit", [("Description", f"Pallex {app.name}: deadline passed, end the cycle"), *head, *late])
        + "\n" + _lines("Service", [("Type", "oneshot"),
                                    ("ExecStart", " ".join(tool + ["--app", app.name, "--deadline"]))]))
    first = [service(app, s) for s in app.order if not app.inputs(s)]
    wanted = first + [socket_unit(app, e) for e in app.edges] + [done_sock, f"{prefix(app)}-deadline.timer"]
    units[f"{prefix(app)}.target"] = (
        _lines("Unit", [("Description", f"Pallex application {app.name}" + (f": {app.description}" if app.description else "")),
                        ("DefaultDependencies", "no"), ("Wants", " ".join(wanted))])
        + "\n" + _lines("Install", [("WantedBy", "multi-user.target")]))
    return units


def write(units: dict[str, str], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in units.items():
        path = out / name
        path.write_text(text)
        paths.append(path)
    return paths


@dataclass
class Verdict:
    ok: bool
    returncode: int
    warnings: list[str]


def verify(paths: list[Path]) -> Verdict:
    """``systemd-analyze verify`` on the files: pass = exit 0 and nothing on stderr."""
    dirs = sorted({str(Path(p).resolve().parent) for p in paths})
    # The units' own directory first; the trailing ':' appends systemd's default search path.
    result = proc.run([_tool("systemd-analyze"), "verify", "--man=no", *[str(p) for p in paths]],
                      env_add={"SYSTEMD_UNIT_PATH": ":".join(dirs) + ":", "SYSTEMD_LOG_COLOR": "0"}, timeout=120)
    lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    return Verdict(result.returncode == 0 and not lines, result.returncode, lines)


def install(unit_dir: Path, root: Path, app: App) -> list[str]:
    """Copy the units into ``root``/etc/systemd/system and enable the target with ``systemctl --root``."""
    dest = root / "etc" / "systemd" / "system"
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(unit_dir.iterdir()):
        if path.name.startswith(prefix(app)):
            shutil.copy2(path, dest / path.name)
    result = proc.run([_tool("systemctl"), f"--root={root}", "enable", f"{prefix(app)}.target"], timeout=60)
    if not result.ok:
        raise ShoalError(result.error_line(f"systemctl --root={root} enable"))
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
