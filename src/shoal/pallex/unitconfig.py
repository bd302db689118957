"""Seed 004's unit configurations (§IV-B, Appendix A) as data, and applying one to a root file system.

``pallex_units.toml`` lists each Appendix A unit with its class (EU, NRS, MMS,
IO, MISC), the Debian 12 unit that provides it (or why none does) and each
configuration's optional units. A configuration is applied to an offline root
with ``systemctl --root``: every unit enabled in the root that is neither
essential, nor kept by the configuration, nor shoal's own is disabled, and
masked where something other than its [Install] section would start it.

The record of an apply is the change in the root's unit links
(``etc/systemd/system``, and the SysV ``etc/rc?.d`` links Debian's
systemd-sysv-install moves along): links removed (with their targets) and
links added.
Undo puts back exactly those links, so apply-then-undo leaves the unit state
as it was whatever ``systemctl enable`` would regenerate.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from shoal import proc
from shoal.errors import ShoalError

CLASSES = ("EU", "NRS", "MMS", "IO", "MISC")
OWN_PREFIXES = ("shoal-", "pallex-")  # shoal's own units: the completion signal, Pallex stages
RECORD_NAME = "shoal-pallex-config.json"  # kept in the root's etc/, so the root says what it carries
LINKS_DIR = "etc/systemd/system"


@dataclass(frozen=True)
class Unit:
    seed: str
    cls: str
    debian: str
    source: str
    missing: str = ""
    mask: bool = False
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    name: str
    keep: tuple[str, ...]
    end: str
    source: str


@dataclass(frozen=True)
class Catalog:
    units: dict[str, Unit]
    configs: dict[str, Config]

    def config(self, name: str) -> Config:
        if name not in self.configs:
            raise ShoalError(f"no unit configuration {name!r} (known: {', '.join(self.configs)})")
        return self.configs[name]

    def by_debian(self) -> dict[str, Unit]:
        out = {}
        for u in self.units.values():
            for name in (u.debian, *u.also):
                if name:
                    out[name] = u
        return out

    def end_unit(self, config: Config, present: set[str]) -> str:
        """The unit whose activation ends userspace initialisation (seed 004 §IV-B): NET3's and
        ALLU's bluetooth.service where the root has it and keeps it, else rc.local."""
        unit = self.units.get(config.end)
        if unit and unit.debian and unit.debian in present:
            return unit.debian
        return "rc-local.service"


def _schema():
    from typing import Literal

    from shoal.inputs.schema import Table, Text

    class UnitRow(Table):
        cls: Literal["EU", "NRS", "MMS", "IO", "MISC"]
        debian: str
        source: Text
        missing: str = ""
        mask: bool = False
        also: list[Text] = []

    class ConfigRow(Table):
        keep: list[Text]
        end: Text
        source: Text

    return UnitRow, ConfigRow


def load() -> Catalog:
    """The built-in catalogue (``shoal/data/pallex_units.toml``)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    from pydantic import ValidationError

    UnitRow, ConfigRow = _schema()
    data = tomllib.loads(resources.files("shoal.data").joinpath("pallex_units.toml").read_text())
    units, configs = {}, {}
    try:
        for name, row in data["units"].items():
            row = dict(row)
            row["cls"] = row.pop("class")
            r = UnitRow(**row)
            units[name] = Unit(name, r.cls, r.debian, r.source, r.missing, r.mask, tuple(r.also))
        for name, row in data["configs"].items():
            r = ConfigRow(**row)
            configs[name] = Config(name, tuple(r.keep), r.end, r.source)
    except ValidationError as exc:  # the package's own data: a defect, said in one line
        raise ShoalError(f"pallex_units.toml: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
    for c in configs.values():
        for k in c.keep:
            if k != "*" and k not in units:
                raise ShoalError(f"pallex_units.toml: configs.{c.name} keeps unknown unit {k!r}")
    return Catalog(units, configs)


# -- a root file system ------------------------------------------------------------------
def check_root(root: Path) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise ShoalError(f"--root {root}: no such directory; give the root file system of a systemd system")
    if not any((root / d / "systemd/system").is_dir() for d in ("usr/lib", "lib")) or not (root / "etc").is_dir():
        raise ShoalError(f"--root {root}: not a systemd root file system (no usr/lib/systemd/system or etc/); "
                         "give the directory a board's root is mounted or unpacked at")
    return root


def _systemctl() -> str:
    found = shutil.which("systemctl")
    if not found:
        raise ShoalError("systemctl not found; install systemd (Debian: apt-get install systemd)")
    return found


def unit_files(root: Path) -> dict[str, str]:
    """unit -> state (enabled, disabled, static, masked, alias, ...) as ``systemctl --root`` sees it."""
    out = proc.run([_systemctl(), f"--root={root}", "list-unit-files", "--no-legend", "--no-pager"])
    if not out.ok:
        raise ShoalError(out.error_line("systemctl list-unit-files"))
    return parse_unit_files(out.stdout)


def parse_unit_files(text: str) -> dict[str, str]:
    states = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            states[parts[0]] = parts[1]
    return states


@dataclass(frozen=True)
class Action:
    unit: str        # the Debian unit
    verb: str        # enable | disable | mask
    seed: str        # the seed's name, or "" for a unit Appendix A does not list
    cls: str         # its class, or "other"
    before: str      # state before

    def to_json(self) -> dict:
        return {"unit": self.unit, "verb": self.verb, "seed": self.seed, "class": self.cls, "before": self.before}


@dataclass(frozen=True)
class Plan:
    config: str
    actions: list[Action]
    kept: list[str]
    not_available: list[dict] = field(default_factory=list)

    def commands(self, root: str) -> list[list[str]]:
        """One systemctl command per verb, in the order unmask, disable, mask, enable."""
        cmds = []
        for verb in ("unmask", "disable", "mask", "enable"):
            units = [a.unit for a in self.actions if a.verb == verb]
            if units:
                cmds.append(["systemctl", f"--root={root}", "--no-reload", verb, *units])
        return cmds

    def to_json(self) -> dict:
        return {"config": self.config, "actions": [a.to_json() for a in self.actions], "kept": self.kept,
                "not_available": self.not_available}


def _own(unit: str) -> bool:
    return unit.startswith(OWN_PREFIXES)


def plan(catalog: Catalog, config_name: str, states: dict[str, str]) -> Plan:
    """What ``config_name`` means for a root whose unit files are in ``states`` (as shipped)."""
    config = catalog.config(config_name)
    debian = catalog.by_debian()
    keep_all = "*" in config.keep
    kept_units = {n for s in config.keep if s != "*" for n in (catalog.units[s].debian, *catalog.units[s].also) if n}
    actions, kept, missing = [], [], []
    for seed in config.keep:
        if seed == "*":
            continue
        u = catalog.units[seed]
        if not u.debian or u.debian not in states:
            missing.append({"unit": seed, "reason": u.missing or f"{u.debian} is not installed in this root"})
    if keep_all:
        missing = [{"unit": u.seed, "reason": u.missing} for u in catalog.units.values()
                   if u.cls != "EU" and not u.debian]
    for unit, state in sorted(states.items()):
        row = debian.get(unit)
        cls = row.cls if row else "other"
        if cls == "EU" or _own(unit):
            continue
        if keep_all or unit in kept_units:
            if unit in kept_units and state in ("disabled", "masked"):
                actions.append(Action(unit, "enable", row.seed if row else "", cls, state))
            elif state in ("enabled", "enabled-runtime"):
                kept.append(unit)
            continue
        if state in ("enabled", "enabled-runtime"):
            actions.append(Action(unit, "disable", row.seed if row else "", cls, state))
        if row and row.mask and state != "masked":
            actions.append(Action(unit, "mask", row.seed, cls, state))
    unmask = [Action(a.unit, "unmask", a.seed, a.cls, a.before) for a in actions
              if a.verb == "enable" and a.before == "masked"]
    return Plan(config.name, unmask + actions, kept, missing)


# -- links: the unit state the record keeps ----------------------------------------------
def links(root: Path) -> dict[str, str]:
    """Every symlink under the root's etc/systemd/system and etc/rc?.d (systemctl runs Debian's
    systemd-sysv-install for units with an init script, which moves those), relative path -> target."""
    out = {}
    for base in [Path(root) / LINKS_DIR, *sorted(Path(root).glob("etc/rc?.d"))]:
        for dirpath, dirnames, filenames in os.walk(base):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                if p.is_symlink():
                    out[str(p.relative_to(root))] = os.readlink(p)
    return out


def link_change(before: dict[str, str], after: dict[str, str]) -> dict:
    removed = {p: t for p, t in before.items() if after.get(p) != t}
    added = {p: t for p, t in after.items() if before.get(p) != t}
    return {"removed": removed, "added": added}


def apply(catalog: Catalog, config_name: str, root: Path) -> dict:
    """Apply a configuration to an offline root; returns (and writes into the root) the record."""
    root = check_root(root)
    record_path = root / "etc" / RECORD_NAME
    if record_path.exists():
        prior = json.loads(record_path.read_text())
        raise ShoalError(f"--root {root} already carries configuration {prior.get('config')!r}; "
                         f"undo it first (shoal pallex config undo --root {root})")
    p = plan(catalog, config_name, unit_files(root))
    before = links(root)
    for cmd in p.commands(str(root)):
        cmd[0] = _systemctl()
        out = proc.run(cmd)
        if not out.ok:
            undo_change(root, link_change(before, links(root)))
            raise ShoalError(out.error_line(f"systemctl {cmd[3]}") + "; the root is left as it was")
    record = {"config": config_name, "plan": p.to_json(), "links": link_change(before, links(root))}
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return record


def undo_change(root: Path, change: dict) -> None:
    """Remove the links an apply added and put back the ones it removed."""
    root = Path(root)
    for path in change["added"]:
        p = root / path
        if p.is_symlink():
            p.unlink()
        parent = p.parent
        while parent.name.endswith((".wants", ".requires")) and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    for path, target in change["removed"].items():
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_symlink():
            p.unlink()
        p.symlink_to(target)


def undo(root: Path) -> dict:
    """Undo the configuration the root carries, from the record its apply wrote."""
    root = check_root(root)
    record_path = root / "etc" / RECORD_NAME
    if not record_path.exists():
        raise ShoalError(f"--root {root} carries no configuration record (etc/{RECORD_NAME}); nothing to undo")
    record = json.loads(record_path.read_text())
    undo_change(root, record["links"])
    record_path.unlink()
    return record
