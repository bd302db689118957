"""Seed 004's numbers as printed, and the checks that show where they do not add up.

Tables II (RPi3) and III (RPi Zero W): per board, SD card (slow/fast), fill
(5/50/95 %, AVG) and unit configuration (EU; ALLU = ALLU w/o NET3 w/o WiFi),
the userspace cell (T_usi s, E_usi J) and the total cell (T s, E J), kept in
``shoal/data/seed004_boot_tables.csv``.
Bootloader+kernel is 6.5 s in every row, with 4.51 J (RPi3) or 3.26 J
(RPi Zero W). ``None`` = the cell is missing from the text.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

BOOTLOADER_KERNEL = {"rpi3": (6.5, 4.51), "rpi0w": (6.5, 3.26)}

# (board, sdc, fill, config) -> ((T_usi, E_usi), (T_total, E_total)), from the data file
TABLES_FILE = Path(__file__).resolve().parent.parent / "data" / "seed004_boot_tables.csv"


def _cells(row: dict, time: str, energy: str) -> tuple[float, float] | None:
    return None if row[time] == "" else (float(row[time]), float(row[energy]))


@functools.lru_cache(maxsize=None)
def tables() -> dict[tuple[str, str, str, str], tuple[tuple | None, tuple | None]]:
    """Tables II and III as printed (``None``: a cell missing from the text)."""
    with TABLES_FILE.open() as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return {(r["board"], r["sdc"], r["fill"], r["config"]):
                (_cells(r, "userspace_s", "userspace_J"), _cells(r, "total_s", "total_J")) for r in rows}


# Reported improvements, % [seed 004 Abstract, §I, §VI-C]: duration and energy of the
# post-kernel work, and lifetime. None = not reported.
GAINS = {
    "rpi3": {"ic": (None, 24.7, 18.3), "ice": (27.22, 21.54, 16.8), "icc": (22.68, 16.29, 13.89),
             "icu1": (27.57, 22.67, 18.06), "icu2": (None, None, 25.74), "icu3": (39.36, 31.35, 30.16)},
    "rpi0w": {"ic": (None, 10.77, None), "ice": (5.98, 4.89, None), "icc": (None, None, None),
              "icu1": (7.3, 7.04, 5.67), "icu2": (None, None, 6.7), "icu3": (11.89, 10.45, 9.01)},
}
SHUTDOWN_BOUND = {"rpi3": (0.2, 0.7), "rpi0w": (0.4, 0.35)}  # forced-forced, s and J upper bounds (§V-B)
ROUNDING = 0.011  # two decimals in the tables, plus one for a sum of two rounded cells


def check_tables() -> list[dict]:
    """Every cell where bootloader+kernel + userspace != total (beyond rounding), or that is missing."""
    out = []
    for (board, sdc, fill, config), (usi, total) in tables().items():
        where = f"{board} {sdc} SDC {fill}{'' if fill == 'AVG' else ' %'} {config}"
        if usi is None or total is None:
            out.append({"cell": where, "problem": "missing from the text"})
            continue
        bk_s, bk_J = BOOTLOADER_KERNEL[board]
        for what, part, whole, unit in (("duration", usi[0], total[0], "s"), ("energy", usi[1], total[1], "J")):
            base = bk_s if what == "duration" else bk_J
            if abs(base + part - whole) > ROUNDING:
                out.append({"cell": where, "problem": f"{what}: {base:g} + {part:g} = {base + part:.2f} {unit}, "
                                                      f"printed total {whole:g} {unit}",
                            "implied_userspace": round(whole - base, 3)})
    return out


def implied_post_kernel_ratio(energy_gain: float, lifetime_gain: float) -> float:
    """U/B where B = bootloader+kernel+shutdown energy and U the baseline's post-kernel energy.

    Saving a fraction e of U gives L = (B + U) / (B + (1 - e) U) - 1, so
    U / B = L / (1 - (1 + L)(1 - e)).
    """
    e, L = energy_gain, lifetime_gain
    return L / (1.0 - (1.0 + L) * (1.0 - e))


def lifetime_gain(energy_gain: float, post_kernel_J: float, fixed_J: float) -> float:
    """Lifetime gain of saving ``energy_gain`` of the post-kernel energy (eq. 3, any N)."""
    return (fixed_J + post_kernel_J) / (fixed_J + (1.0 - energy_gain) * post_kernel_J) - 1.0
