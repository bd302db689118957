"""Performance per watt and energy per unit of work. Pure functions, SI units.

``watts`` is the mean power over the work (``mean_power_W`` of
Session.energy_between), or the power above idle when the question is what
the work itself costs. Non-positive denominators raise ValueError: a zero
watt reading is a missing measurement, not infinite efficiency.
"""

from __future__ import annotations


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return float(value)


def bytes_per_s_per_W(nbytes: float, seconds: float, watts: float) -> float:
    """Throughput per watt, (B/s)/W = B/J."""
    return nbytes / _positive("seconds", seconds) / _positive("watts", watts)


def ops_per_s_per_W(ops: float, seconds: float, watts: float) -> float:
    """Operations per second per watt (= operations per joule)."""
    return ops / _positive("seconds", seconds) / _positive("watts", watts)


def energy_per_byte(energy_J: float, nbytes: float) -> float:
    """Joules per byte moved or processed."""
    return energy_J / _positive("bytes", nbytes)


def energy_per_op(energy_J: float, ops: float) -> float:
    """Joules per operation."""
    return energy_J / _positive("ops", ops)


def above_idle(energy_J: float, idle_W: float, seconds: float) -> float:
    """Energy beyond what the device spends idling for the same time."""
    return energy_J - idle_W * seconds
