"""`shoal pallex lifetime` as a library call: battery lifetime (eq. 3 of "Profiling and Improving
the Duty-Cycling Performance of Linux-based IoT Devices") of a device's boot-only cycle per unit
configuration, and the cycle energies the seed's reported gains imply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shoal.model import lifetime
from shoal.pallex import boot, seedtables


def boot_only(profile, battery_J: float, rates: list[float], sleep_W: float) -> list[dict[str, Any]]:
    """One row per unit configuration: the cycle's energy and time, lifetimes at each rate."""
    rows = []
    for name, us in sorted(profile.userspace.items()):
        energy = profile.bootloader_kernel_J + us.energy_J + profile.shutdown_J
        seconds = profile.bootloader_kernel_s + us.duration_s + profile.shutdown_s
        rows.append({"config": name, "cycle_J": energy, "cycle_s": seconds,
                     "max_cycles_per_h": lifetime.max_cycles_per_h(seconds),
                     **{f"lifetime_h_at_{n:g}": lifetime.lifetime_h(battery_J, energy, n, sleep_W, seconds)
                        for n in rates}})
    return rows


def implied_by_seed(profile) -> list[dict[str, Any]]:
    """Per scenario of the seed's tables: its gains and the post-kernel energy they imply."""
    implied = []
    for scenario, (dur, en, life) in seedtables.GAINS.get(profile.device, {}).items():
        if en is not None and life is not None:
            fixed = profile.bootloader_kernel_J + profile.shutdown_J
            ratio = seedtables.implied_post_kernel_ratio(en / 100, life / 100)
            implied.append({"scenario": scenario, "paper_energy_gain": en / 100, "paper_lifetime_gain": life / 100,
                            "implied_U_over_B": ratio, "implied_baseline_cycle_J": fixed * (1 + ratio),
                            "implied_pallex_cycle_J": fixed * (1 + (1 - en / 100) * ratio)})
    return implied


def run(profile_name: str, rates: list[float], *, capacity_mAh: float = 2400.0, voltage: float = 5.0,
        usable: float = 1.0, sleep_W: float = 0.0, plot: Path | None = None) -> dict[str, Any]:
    """The lifetimes, the seed's implied cycles and its tables checked; with ``plot``, the
    lifetime figure written there (its path under ``figure``)."""
    profile = boot.load(profile_name)
    battery = lifetime.battery_J(capacity_mAh, voltage, usable)
    implied = implied_by_seed(profile)
    out = {"profile": profile.device, "battery_J": battery, "sleep_W": sleep_W,
           "boot_only": boot_only(profile, battery, rates, sleep_W),
           "seed_gains_implied": implied, "table_problems": seedtables.check_tables()}
    if plot:
        from shoal.pallex import figures

        cycles = {i["scenario"]: {"baseline": (i["implied_baseline_cycle_J"], 0.0),
                                  "pallex": (i["implied_pallex_cycle_J"], 0.0)} for i in implied}
        fig = figures.lifetime_figure(cycles, battery, 0.0, [float(n) for n in range(1, 61)],
                                      f"{profile.device}: lifetimes implied by seed 004's reported gains")
        Path(plot).mkdir(parents=True, exist_ok=True)
        path = Path(plot) / f"lifetime-{profile.device}.png"
        fig.savefig(path, dpi=120)
        out["figure"] = str(path)
    return out
