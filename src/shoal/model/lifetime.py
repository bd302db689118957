"""Battery lifetime of a duty-cycled device (seed 004 eq. 3, generalised).

    E_bat   = 3600 * capacity_Ah * V * usable              (J)
    per hour: N * E_cycle + P_sleep * (3600 - N * T_cycle)  (J)
    lifetime = E_bat / per_hour                             (h)

With P_sleep = 0 this is seed 004's eq. 3 (2400 mAh at 5 V: 43 200 J), and a
relative gain in lifetime equals E_base / E_new - 1 at every N. With a sleep
draw the gain shrinks as N falls, because the off-state energy is the same.
"""

from __future__ import annotations

from shoal.errors import ShoalError

SECONDS_PER_HOUR = 3600.0


def battery_J(capacity_mAh: float, voltage_V: float, usable: float = 1.0) -> float:
    if capacity_mAh <= 0 or voltage_V <= 0 or not 0 < usable <= 1:
        raise ShoalError(f"battery needs capacity > 0 mAh, voltage > 0 V and 0 < usable <= 1, "
                         f"got {capacity_mAh:g} mAh, {voltage_V:g} V, {usable:g}")
    return SECONDS_PER_HOUR * capacity_mAh / 1000.0 * voltage_V * usable


def energy_per_hour_J(cycle_J: float, cycles_per_h: float, sleep_W: float = 0.0, cycle_s: float = 0.0) -> float:
    if cycles_per_h <= 0 or cycle_J < 0 or sleep_W < 0 or cycle_s < 0:
        raise ShoalError("cycles per hour must be > 0, cycle energy, sleep power and cycle time >= 0")
    if cycles_per_h * cycle_s > SECONDS_PER_HOUR:
        raise ShoalError(f"{cycles_per_h:g} cycles of {cycle_s:g} s do not fit in an hour "
                         f"(at most {max_cycles_per_h(cycle_s):.0f} per hour)")
    return cycles_per_h * cycle_J + sleep_W * (SECONDS_PER_HOUR - cycles_per_h * cycle_s)


def lifetime_h(battery: float, cycle_J: float, cycles_per_h: float, sleep_W: float = 0.0,
               cycle_s: float = 0.0) -> float:
    """Hours a battery of ``battery`` joules lasts."""
    return battery / energy_per_hour_J(cycle_J, cycles_per_h, sleep_W, cycle_s)


def max_cycles_per_h(cycle_s: float) -> float:
    return float("inf") if cycle_s <= 0 else SECONDS_PER_HOUR / cycle_s


def gain(baseline: float, improved: float) -> float:
    """Relative improvement of a lifetime: improved / baseline - 1."""
    return improved / baseline - 1.0
