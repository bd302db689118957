"""A Pallex application on the virtual board: its stage programs and units on a layer, started by
the board's own systemd (``shoal pallex lab --vm``).

Over the testbed's board layer (``vmlayer``: boot monitor, shutdown hook) one more copy-on-write
disk per scenario and mode holds, written once by an offline boot and cached by its content:

* the stage programs: the modules of shoal they import (followed from their source), under
  ``/opt/shoal``, byte-compiled there as Debian compiles its own Python packages when it installs
  them (a board that cycles on one card finds them compiled); ``shoal-python`` runs Debian's
  Python 3 (the image has python3-numpy and python3-cryptography) with them on its path;
* the scenario's units (``units.generate``), the done service's record and each stage's report
  (``PALLEX`` line: when its process started, its work began and ended, on the board's clock)
  going to the serial line;
* pallex: the application's target wanted by multi-user.target, so each stage starts as soon as
  its own dependencies are met while userspace initialisation goes on;
  baseline: rc.local starts the target at the seed's end of userspace initialisation (the
  application as an ordinary service after the boot, seed 004's baseline).

Either way the done service ends the cycle with the stage file's ``SuccessAction=``
(``poweroff-force``), as on the seed's boards.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from shoal.errors import ShoalError
from shoal.pallex import stagefile, units, vmboard, vmconfig, vmimage, vmlayer

MODES = ("baseline", "pallex")
SHOAL_DIR = "/opt/shoal"
PYTHON = "/usr/local/bin/shoal-python"
SERIAL = "/dev/ttyS0"
PYTHON_WRAPPER = f"""#!/bin/sh
# shoal: Debian's Python 3 with shoal's stage programs ({SHOAL_DIR}) on its path.
PYTHONPATH={SHOAL_DIR} exec /usr/bin/python3 "$@"
"""
# Where the board's upload stages send (QEMU forwards it to the lab's cloud server: vmboard.argv)
CLOUD_ADDRESS = "10.0.2.100:80"
CLOUD_URL = f"http://{CLOUD_ADDRESS}/images"
STAGE_OUTPUT = f"[Service]\nStandardOutput=append:{SERIAL}\n"
_SIGNAL_LINE = vmlayer.RC_LOCAL.splitlines()[2]
assert _SIGNAL_LINE.startswith(f'echo "{vmimage.SIGNAL} rc-local'), "the layer's rc.local no longer signals first"


def config_for(app: stagefile.App) -> str:
    """The unit configuration a scenario boots: its stage file's, with NET1 (networking) for one
    whose stages need the network (seed 004 §VI-B: the upload scenarios run EU w/ NET1)."""
    needs_net = any("network-online.target" in (*s.requires_units, *s.wants_units) for s in app.stages.values())
    return "NET1" if needs_net and app.config == "EU" else app.config


def modules(roots: list[str], source: Path | None = None) -> dict[str, Path]:
    """Path under the source root -> source file, for ``roots`` and every ``shoal`` module they
    import, their packages' ``__init__`` included."""
    import shoal

    base = source or Path(shoal.__file__).resolve().parent.parent
    found: dict[str, Path] = {}
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name.split(".")[0] != "shoal":
            continue
        seen.add(name)
        parts = name.split(".")
        path = base.joinpath(*parts).with_suffix(".py")
        if not path.exists():
            path = base.joinpath(*parts, "__init__.py")
        if not path.exists():
            continue   # not a module: a name imported from one (``from shoal.pallex.protocol import StageIO``)
        found[str(path.relative_to(base))] = path
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                todo += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    missing = [r for r in roots if not {f"{r.replace('.', '/')}.py", f"{r.replace('.', '/')}/__init__.py"} & set(found)]
    if missing:
        raise ShoalError(f"the stage programs {', '.join(missing)} are not in {base}")
    return found


def _program_modules(app: stagefile.App) -> list[str]:
    """What each stage runs with ``{python} -m``, and the done service."""
    out = ["shoal.pallex.done"]
    for stage in app.stages.values():
        argv = list(stage.command)
        if len(argv) >= 3 and argv[0] == "{python}" and argv[1] == "-m":
            out.append(argv[2])
        elif argv and argv[0] == "{python}":
            raise ShoalError(f"stage {stage.name}: the virtual board runs stage programs as '{{python}} -m MODULE'")
    return out


def files(app: stagefile.App, mode: str) -> tuple[dict[str, str], dict[str, str]]:
    """(path -> text, link -> target) the layer writes for ``app`` in ``mode``."""
    if mode not in MODES:
        raise ShoalError(f"mode {mode!r}: one of {', '.join(MODES)}")
    out = {PYTHON: PYTHON_WRAPPER}
    for rel, source in sorted(modules(_program_modules(app)).items()):
        out[f"{SHOAL_DIR}/{rel}"] = source.read_text()
    generated = units.generate(app, python=PYTHON, record=SERIAL, params={"upload_url": CLOUD_URL})
    out.update({f"/etc/systemd/system/{n}": text for n, text in generated.items()})
    for stage in app.order:   # each stage's report line (its times on the board's clock) on the serial line
        out[f"/etc/systemd/system/{units.service(app, stage)}.d/shoal-serial.conf"] = STAGE_OUTPUT
    links: dict[str, str] = {}
    target = f"{units.prefix(app)}.target"
    if mode == "pallex":
        links[f"/etc/systemd/system/multi-user.target.wants/{target}"] = f"/etc/systemd/system/{target}"
    else:
        out["/etc/rc.local"] = vmlayer.RC_LOCAL.replace(
            _SIGNAL_LINE, _SIGNAL_LINE + f"\nsystemctl start --no-block {target}", 1)
    return out, links


COMPILE = (f"python3 -m compileall -q {SHOAL_DIR}",)


def key(app: stagefile.App, mode: str) -> str:
    written, links = files(app, mode)
    return hashlib.sha256(repr((sorted(written.items()), sorted(links.items()), COMPILE)).encode()).hexdigest()[:10]


def path(img: vmimage.Image, config: str, app: stagefile.App, mode: str) -> Path:
    return img.directory / "configs" / f"{config}-app-{app.name}-{mode}-{key(app, mode)}.qcow2"


def disk_for(img: vmimage.Image, board_disk: Path, config: str, app: stagefile.App, mode: str,
             spec: vmboard.BoardSpec, on_note=None) -> Path:
    """The application's layer over the board layer ``board_disk``, made once (one offline boot)
    and cached; made again when its base was written after it."""
    out = path(img, config, app, mode)
    if vmlayer.cached(out, board_disk):
        return out
    if on_note:
        on_note(f"writing {app.name}'s stage programs and units ({mode}) on a layer over {config}'s board "
                "(one boot with init=shoal-offline)")
    written, links = files(app, mode)
    # Layers of an earlier shoal's programs (another key) are never booted again.
    vmconfig.made_layer(board_disk, out, lambda disk: vmconfig.run_offline(
        img, spec, disk, vmlayer.script(written, links, COMPILE), f"writing {app.name}'s layer ({mode})"),
        stale=f"{config}-app-{app.name}-{mode}-*.qcow2")
    return out
