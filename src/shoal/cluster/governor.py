"""This machine's frequency governor: read it, set it for a run where permitted, restore it.

The kernel's cpufreq policy of each CPU lives in /sys/devices/system/cpu/cpuN/cpufreq
(``scaling_governor``, ``scaling_available_governors``, ``scaling_driver``,
``scaling_cur_freq``, ``scaling_min_freq``/``scaling_max_freq`` in kHz). Writing the governor
needs root; an ordinary user's run keeps the current one, says so and records it, so two runs
can still be compared by what they ran with. The tree is read under ``SHOAL_SYSFS_ROOT`` when
set (tests: a fake tree shaped as the kernel's).
"""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path
from typing import Any, Iterator

from shoal import environment
from shoal.errors import ShoalError

CPUS = Path("sys/devices/system/cpu")


def _root() -> Path:
    return Path(environment.SYSFS_ROOT.get() or "/")


def policies() -> dict[int, Path]:
    """CPU number -> its cpufreq directory, for every CPU that has one."""
    base = _root() / CPUS
    found = {}
    for path in base.glob("cpu[0-9]*/cpufreq"):
        number = re.fullmatch(r"cpu(\d+)", path.parent.name)
        if number and (path / "scaling_governor").is_file():
            found[int(number.group(1))] = path
    return dict(sorted(found.items()))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _khz_to_hz(text: str | None) -> float | None:
    return float(text) * 1e3 if text and text.isdigit() else None


def read() -> dict[str, Any]:
    """The governor, driver and clocks of every CPU (an empty ``cpus`` where there is no cpufreq)."""
    cpus = {}
    for number, path in policies().items():
        cpus[str(number)] = {
            "governor": _read(path / "scaling_governor"),
            "driver": _read(path / "scaling_driver"),
            "cur_Hz": _khz_to_hz(_read(path / "scaling_cur_freq")),
            "min_Hz": _khz_to_hz(_read(path / "scaling_min_freq")),
            "max_Hz": _khz_to_hz(_read(path / "scaling_max_freq")),
        }
    return {"cpus": cpus, "available": available()}


def available() -> list[str]:
    """The governors every CPU offers (their intersection, in the first CPU's order)."""
    offered: list[str] | None = None
    for path in policies().values():
        mine = (_read(path / "scaling_available_governors") or "").split()
        offered = mine if offered is None else [g for g in offered if g in mine]
    return offered or []


def check(wanted: str) -> None:
    """Refuse a governor this host does not offer, before anything starts."""
    if not policies():
        raise ShoalError(f"--governor {wanted}: this machine has no cpufreq policy "
                         f"({_root() / CPUS}/cpu0/cpufreq is absent: a VM or a kernel without "
                         "CONFIG_CPU_FREQ); leave --governor out")
    offered = available()
    if wanted not in offered:
        raise ShoalError(f"--governor {wanted}: this machine offers {', '.join(offered) or 'none'}; "
                         "choose one of them")


@contextlib.contextmanager
def held(wanted: str) -> Iterator[dict[str, Any]]:
    """Every CPU on governor ``wanted`` for the block, then each back to its own; yields the record
    the manifest keeps: what was asked, what was there before, whether it was set (and why not)."""
    check(wanted)
    before = read()
    record: dict[str, Any] = {"asked": wanted, "before": before, "set": False, "reason": ""}
    changed: list[tuple[Path, str]] = []
    try:
        for number, path in policies().items():
            old = before["cpus"][str(number)]["governor"]
            if old == wanted:
                continue
            try:
                (path / "scaling_governor").write_text(wanted)
            except OSError as exc:
                record["reason"] = (f"cannot write {path / 'scaling_governor'} ({exc.strerror or exc}; "
                                    "setting a governor needs root)")
                break
            changed.append((path, old))
        else:
            record["set"] = True
        if not record["set"]:
            current = sorted({c["governor"] for c in before["cpus"].values()})
            print(f"shoal: --governor {wanted}: {record['reason']}; running with the current "
                  f"governor {', '.join(current)} (recorded in the manifest)", file=sys.stderr)
            _restore(changed)
            changed = []
        record["during"] = read()
        yield record
    finally:
        _restore(changed)


def _restore(changed: list[tuple[Path, str]]) -> None:
    """Each CPU back on the governor it had; a failure to restore is said, never raised."""
    for path, old in reversed(changed):
        try:
            (path / "scaling_governor").write_text(old)
        except OSError as exc:
            print(f"shoal: warning: could not restore governor {old} in {path} ({exc})", file=sys.stderr)
