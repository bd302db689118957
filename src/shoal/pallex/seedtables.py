"""Seed 004's numbers as printed, and the checks that show where they do not add up.

Tables II (RPi3) and III (RPi Zero W): per board, SD card (slow/fast), fill
(5/50/95 %, AVG) and unit configuration (EU; ALLU = ALLU w/o NET3 w/o WiFi),
the userspace cell (T_usi s, E_usi J) and the total cell (T s, E J).
Bootloader+kernel is 6.5 s in every row, with 4.51 J (RPi3) or 3.26 J
(RPi Zero W). ``None`` = the cell is missing from the text.
"""

from __future__ import annotations

BOOTLOADER_KERNEL = {"rpi3": (6.5, 4.51), "rpi0w": (6.5, 3.26)}

# (board, sdc, fill, config) -> ((T_usi, E_usi), (T_total, E_total))
TABLES: dict[tuple[str, str, str, str], tuple[tuple | None, tuple | None]] = {
    ("rpi3", "slow", "5", "EU"): ((2.94, 5.77), (9.44, 10.28)),
    ("rpi3", "slow", "50", "EU"): ((3.23, 5.95), (9.73, 10.46)),
    ("rpi3", "slow", "95", "EU"): ((3.23, 5.89), (9.73, 10.4)),
    ("rpi3", "slow", "AVG", "EU"): ((3.13, 5.87), (9.63, 10.38)),
    ("rpi3", "fast", "5", "EU"): ((2.94, 5.6), (9.44, 10.11)),
    ("rpi3", "fast", "50", "EU"): ((2.97, 5.68), (9.46, 10.19)),
    ("rpi3", "fast", "95", "EU"): ((2.96, 5.67), (9.46, 10.18)),
    ("rpi3", "fast", "AVG", "EU"): ((2.95, 5.65), (9.45, 10.16)),
    ("rpi3", "slow", "5", "ALLU"): (None, None),
    ("rpi3", "slow", "50", "ALLU"): ((3.72, 7.32), (10.22, 11.74)),
    ("rpi3", "slow", "95", "ALLU"): ((3.72, 7.28), (10.22, 11.79)),
    ("rpi3", "slow", "AVG", "ALLU"): ((3.83, 8.91), (10.33, 11.92)),
    ("rpi3", "fast", "5", "ALLU"): ((3.74, 7.13), (10.24, 11.64)),
    ("rpi3", "fast", "50", "ALLU"): ((3.66, 7.07), (10.16, 11.58)),
    ("rpi3", "fast", "95", "ALLU"): ((3.71, 7.2), (10.21, 11.71)),
    ("rpi3", "fast", "AVG", "ALLU"): ((3.7, 7.133), (10.2, 11.64)),
    ("rpi0w", "slow", "5", "EU"): ((9.73, 7.02), (16.23, 10.28)),
    ("rpi0w", "slow", "50", "EU"): ((9.43, 6.34), (15.93, 9.6)),
    ("rpi0w", "slow", "95", "EU"): ((9.8, 6.57), (16.3, 9.83)),
    ("rpi0w", "slow", "AVG", "EU"): ((9.65, 6.64), (16.15, 9.9)),
    ("rpi0w", "fast", "5", "EU"): ((9.47, 6.56), (15.97, 9.82)),
    ("rpi0w", "fast", "50", "EU"): ((9.41, 6.31), (15.91, 9.57)),
    ("rpi0w", "fast", "95", "EU"): ((9.47, 6.35), (15.97, 9.61)),
    ("rpi0w", "fast", "AVG", "EU"): ((9.45, 6.41), (15.95, 9.67)),
    ("rpi0w", "slow", "5", "ALLU"): (None, None),
    ("rpi0w", "slow", "50", "ALLU"): ((15.4, 10.97), (21.9, 14.23)),
    ("rpi0w", "slow", "95", "ALLU"): ((15.47, 10.94), (21.97, 14.2)),
    ("rpi0w", "slow", "AVG", "ALLU"): ((15.45, 10.94), (21.92, 14.2)),
    ("rpi0w", "fast", "5", "ALLU"): ((15.3, 10.86), (21.8, 14.12)),
    ("rpi0w", "fast", "50", "ALLU"): ((15.39, 10.92), (21.89, 14.18)),
    ("rpi0w", "fast", "95", "ALLU"): ((15.34, 10.92), (21.84, 14.18)),
    ("rpi0w", "fast", "AVG", "ALLU"): ((15.34, 10.9), (21.84, 14.16)),
}

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
    for (board, sdc, fill, config), (usi, total) in TABLES.items():
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
