"""A device at one clock: its P-states, and the profile it becomes at one of them.

A profile's ``pstates`` list the clocks its CPU runs at, each with the core's speed relative
to the profile's own ``speed`` (1 at ``clock_Hz``) and the device's idle and busy watts there.
``at_clock`` turns a profile into the same device held at one state: its speed (hence an
emulated device's CPU budget) and its watts (hence the power model) are the state's, so
everything downstream of a profile follows the clock without knowing about it.

A clock is a frequency in Hz or a governor: ``performance`` holds the highest state,
``powersave`` the lowest (the kernel's two static governors). An emulated device has no
governor of its own that moves between states; on a real host shoal reads and sets the
kernel's (``shoal.cluster.governor``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from shoal.errors import ShoalError

if TYPE_CHECKING:
    from shoal.profiles import DeviceProfile

# The static governors and the state each holds.
GOVERNORS = ("performance", "powersave")
# A frequency names a P-state within this fraction of it (1.33G is the E3825's 1.333 GHz).
MATCH = 0.01


@dataclass(frozen=True)
class PState:
    """One clock of a device: Hz, the core's speed relative to the profile's, watts there."""

    Hz: float
    relative_speed: float
    idle_W: float
    busy_W: float
    source: str


def parse(text: str) -> float | str:
    """``--freq`` or ``@CLOCK`` text: a governor's name, else a frequency in Hz."""
    from shoal.inputs import grammar

    word = str(text).strip().lower()
    if word in GOVERNORS:
        return word
    try:
        return grammar.frequency(str(text))
    except grammar.GrammarError as exc:
        raise ShoalError(f"clock {text!r}: {exc}, or a governor ({', '.join(GOVERNORS)})") from None


def text(clock: float | str) -> str:
    """A clock as the emulate spec writes it: ``500M``, ``1.333G``, ``powersave``."""
    if isinstance(clock, str):
        return clock
    return f"{clock / 1e9:g}G" if clock >= 1e9 else f"{clock / 1e6:g}M"


def mhz(hz: float) -> str:
    return f"{hz / 1e6:.0f} MHz"


def state(profile: "DeviceProfile", clock: float | str, option: str = "--freq") -> PState:
    """The P-state ``clock`` names on ``profile`` (a one-line error when it has none)."""
    if not profile.pstates:
        raise ShoalError(f"{option} {text(clock)}: profile {profile.name} has no P-states; give it "
                         f"[[profiles.{profile.name}.pstates]] tables (Hz, relative_speed, idle_W, "
                         "busy_W, source) or leave the clock out")
    ordered = sorted(profile.pstates, key=lambda s: s.Hz)
    if clock == "performance":
        return ordered[-1]
    if clock == "powersave":
        return ordered[0]
    if isinstance(clock, str):
        raise ShoalError(f"--governor {clock}: an emulated device holds one P-state; use "
                         f"{' or '.join(GOVERNORS)} (its highest or lowest state) or --freq")
    for candidate in ordered:
        if abs(candidate.Hz - clock) <= MATCH * candidate.Hz:
            return candidate
    raise ShoalError(f"{option} {text(clock)}: profile {profile.name} has no P-state at {mhz(clock)}; "
                     f"choose one of its P-states: {', '.join(mhz(s.Hz) for s in ordered)}")


def at_clock(profile: "DeviceProfile", clock: float | str, option: str = "--freq") -> "DeviceProfile":
    """``profile`` held at the P-state ``clock`` names: a profile of its own name
    (``minnowboard-500mhz``), the state's speed and watts, the state's source beside each."""
    chosen = state(profile, clock, option)
    nominal = profile.clock_Hz is not None and abs(chosen.Hz - profile.clock_Hz) <= MATCH * chosen.Hz
    sources = {**profile.sources, **{k: chosen.source for k in ("clock", "speed", "idle", "busy")}}
    return replace(profile, name=f"{profile.name}-{chosen.Hz / 1e6:.0f}mhz",
                   description=f"{profile.description} at {mhz(chosen.Hz)}".strip(),
                   clock_Hz=chosen.Hz, speed=profile.speed * chosen.relative_speed,
                   idle_W=chosen.idle_W, busy_W=chosen.busy_W,
                   # Watts measured at the nominal clock say nothing of another one.
                   max_W=profile.max_W if nominal else None,
                   per_test=profile.per_test if nominal else None,
                   pstates=(), sources=sources)


def with_clock(spec: str, clock: str) -> str:
    """An emulate spec with ``@clock`` on every term that has no clock of its own (a term's
    other suffixes, ``@OS`` and ``@BACKGROUND``, name an OS noise profile and a background)."""
    from shoal import profiles

    others = {**profiles.load_os_noise(), **profiles.load_backgrounds()}

    def has_clock(term: str) -> bool:   # a service flow (@qos=RATE) or storage is not a clock either
        return any(word not in others and not word.startswith(("qos=", "storage="))
                   for word in term.split("@")[1:])

    return "+".join(term if has_clock(term) else f"{term}@{clock}" for term in spec.replace(" ", "").split("+"))
