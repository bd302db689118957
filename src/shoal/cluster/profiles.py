"""Device profiles and link types as data, with the source of every number.

Profiles come from ``shoal/data/profiles.toml``; users add or override them
without editing shoal in ``~/.config/shoal/profiles.toml``, in files named by
``SHOAL_PROFILES`` (colon-separated), or in an inventory's ``[profiles]``.
The power model takes ``idle_W``, ``busy_W`` and ``cores`` from here.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shoal.errors import ShoalError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

BUILTIN = Path(__file__).resolve().parent.parent / "data" / "profiles.toml"


@dataclass(frozen=True)
class LinkType:
    """A network link: rate per direction (bit/s), one-way delay (s), loss fraction."""

    name: str
    rate_bps: float
    latency_s: float = 0.0
    loss: float = 0.0
    source: str = ""

    def describe(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DeviceProfile:
    """One kind of device: cores, per-core speed relative to the reference core, watts."""

    name: str
    cores: int
    speed: float
    idle_W: float
    busy_W: float
    link: str = "gigabit"
    description: str = ""
    clock_Hz: float | None = None
    max_W: float | None = None
    # P-states as [[frequency_Hz, watts], ...] where known.
    pstates: tuple = ()
    sources: dict = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        data = asdict(self)
        data["pstates"] = [list(p) for p in self.pstates]
        return data


_NUMBERS = {"cores": int, "speed": float, "idle_W": float, "busy_W": float,
            "clock_Hz": float, "max_W": float}
_TEXT = {"link": str, "description": str}


def profile_from_table(name: str, table: dict, where: str) -> DeviceProfile:
    """Build a profile from a TOML table; ``where`` names it in error messages."""
    if not isinstance(table, dict):
        raise ShoalError(f"{where}: profile {name!r} must be a table of fields")
    missing = [k for k in ("cores", "speed", "idle_W", "busy_W") if k not in table]
    if missing:
        raise ShoalError(f"{where}: profile {name!r} lacks {', '.join(missing)}; "
                         "every profile needs cores, speed, idle_W and busy_W")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value in table.items():
        if key.endswith("_source"):
            sources[key[: -len("_source")]] = str(value)
        elif key in _NUMBERS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ShoalError(f"{where}: profile {name!r} field {key} must be a "
                                 f"non-negative number, got {value!r}")
            if key == "cores" and (not isinstance(value, int) or value < 1):
                raise ShoalError(f"{where}: profile {name!r} field cores must be a whole "
                                 f"number >= 1, got {value!r}")
            values[key] = _NUMBERS[key](value)
        elif key in _TEXT:
            values[key] = str(value)
        elif key == "pstates":
            try:
                values["pstates"] = tuple((float(f), float(w)) for f, w in value)
            except (TypeError, ValueError):
                raise ShoalError(f"{where}: profile {name!r} pstates must be a list of "
                                 "[frequency_Hz, watts] pairs") from None
        else:
            raise ShoalError(f"{where}: profile {name!r} has unknown field {key!r} (known: "
                             f"{', '.join(sorted([*_NUMBERS, *_TEXT, 'pstates']))}, *_source)")
    if values["speed"] <= 0:
        raise ShoalError(f"{where}: profile {name!r} speed must be above 0")
    return DeviceProfile(name=name, sources=sources, **values)


def link_from_table(name: str, table: dict, where: str) -> LinkType:
    if not isinstance(table, dict) or "rate_bps" not in table:
        raise ShoalError(f"{where}: link {name!r} needs rate_bps (bits per second)")
    known = {"rate_bps", "latency_s", "loss", "source"}
    unknown = set(table) - known
    if unknown:
        raise ShoalError(f"{where}: link {name!r} has unknown field {sorted(unknown)[0]!r} "
                         f"(known: {', '.join(sorted(known))})")
    for key in ("rate_bps", "latency_s", "loss"):
        value = table.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ShoalError(f"{where}: link {name!r} field {key} must be a non-negative "
                             f"number, got {value!r}")
    if table["rate_bps"] <= 0 or table.get("loss", 0.0) >= 1:
        raise ShoalError(f"{where}: link {name!r} needs rate_bps > 0 and loss < 1")
    return LinkType(name, float(table["rate_bps"]), float(table.get("latency_s", 0.0)),
                    float(table.get("loss", 0.0)), str(table.get("source", "")))


def _read(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ShoalError(f"cannot read profiles file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ShoalError(f"{path}: not valid TOML ({exc})") from exc


def user_files() -> list[Path]:
    """Profile files a user supplies, in the order they override each other."""
    files = []
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    if (config / "shoal" / "profiles.toml").is_file():
        files.append(config / "shoal" / "profiles.toml")
    for item in filter(None, os.environ.get("SHOAL_PROFILES", "").split(os.pathsep)):
        path = Path(item).expanduser()
        if not path.is_file():
            raise ShoalError(f"SHOAL_PROFILES names {path}, which does not exist; "
                             "fix the variable or create the file")
        files.append(path)
    return files


def _load_all(extra: dict | None = None, extra_where: str = "inventory"
              ) -> tuple[dict[str, DeviceProfile], dict[str, LinkType]]:
    profiles: dict[str, DeviceProfile] = {}
    links: dict[str, LinkType] = {}
    sources = [(BUILTIN, _read(BUILTIN))] + [(p, _read(p)) for p in user_files()]
    if extra:
        sources.append((extra_where, extra))
    for where, data in sources:
        for name, table in (data.get("links") or {}).items():
            links[name] = link_from_table(name, table, str(where))
        for name, table in (data.get("profiles") or {}).items():
            profiles[name] = profile_from_table(name, table, str(where))
    for profile in profiles.values():
        if profile.link not in links:
            raise ShoalError(f"profile {profile.name!r} names link {profile.link!r}, which is "
                             f"not defined (known links: {', '.join(sorted(links))})")
    return profiles, links


def load(extra: dict | None = None) -> dict[str, DeviceProfile]:
    """All device profiles: built-in, then user files, then ``extra`` (an inventory's tables)."""
    return _load_all(extra)[0]


def load_links(extra: dict | None = None) -> dict[str, LinkType]:
    """All link types, overridden in the same order as profiles."""
    return _load_all(extra)[1]
