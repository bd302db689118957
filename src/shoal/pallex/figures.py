"""Lifetime against cycles per hour, one line per scenario and mode (seed 004 Figs 17/18)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from shoal.model import lifetime  # noqa: E402

PANELS = (("networking-independent", ("ic", "ice", "icc")), ("networking-dependent", ("icu1", "icu2", "icu3")))
LABELS = {"ic": "IC", "ice": "IC&E", "icc": "IC&C", "icu1": "IC&U1", "icu2": "IC&U2", "icu3": "IC&U3"}


def lifetime_figure(cycles: dict[str, dict[str, tuple[float, float]]], battery_J: float, sleep_W: float,
                    rates: list[float], title: str):
    """``cycles``: scenario -> mode -> (cycle energy J, cycle duration s)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, (panel, names) in zip(axes, PANELS):
        for k, name in enumerate(n for n in names if n in cycles):
            color = f"C{k}"
            for mode, style in (("baseline", "--"), ("pallex", "-")):
                if mode not in cycles[name]:
                    continue
                energy, seconds = cycles[name][mode]
                hours = [lifetime.lifetime_h(battery_J, energy, n, sleep_W, seconds) for n in rates]
                ax.plot(rates, hours, style, color=color, label=f"{LABELS.get(name, name)} {mode}")
        ax.set_yscale("log")
        ax.set_xlabel("cycles per hour")
        ax.set_title(panel)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_lines():   # a panel none of the asked scenarios falls in stays empty
            ax.legend(fontsize=7)
    axes[0].set_ylabel("lifetime (h)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
