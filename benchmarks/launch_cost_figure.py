"""Draw launch and wire-up cost against N from launch_cost.py's --out lines.

Three panels, log-log, one series per MPI and layout (median of the launches at each N,
bars from min to max): launcher start to the last MPI_Init return, the bytes each box
moved on the plant from launch to exit, and each box's memory-cgroup peak (rank, daemons
and the pages charged to the box). The legend gives the power fit c*N^k of each series.
.venv/bin/python benchmarks/launch_cost_figure.py docs/img/launch-cost.jsonl docs/img/launch-cost.png
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from launch_cost import power_fit  # noqa: E402

PANELS = (("init_done_max_s", "last MPI_Init return (s)", 1.0),
          ("wire_B_per_box", "bytes per box on the plant (kB)", 1e-3),
          ("box_memory_peak_max_B", "box memory peak (MB)", 1e-6))
NAMES = {"mpich": "MPICH", "openmpi": "Open MPI"}
LAYOUTS = {"box": "daemon in every box", "head": "daemons in the head"}
STYLE = {("mpich", "box"): ("tab:blue", "o", "-"), ("mpich", "head"): ("tab:blue", "s", "--"),
         ("openmpi", "box"): ("tab:red", "o", "-"), ("openmpi", "head"): ("tab:red", "s", "--")}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("data", type=Path)
    p.add_argument("png", type=Path)
    args = p.parse_args()
    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 4.6))
    for ax, (key, label, scale) in zip(axes, PANELS):
        for series in STYLE:
            mine = [r for r in rows if (r["mpi"], r["layout"]) == series]
            counts = sorted({r["n"] for r in mine})
            if not counts:
                continue
            values = [[r[key] * scale for r in mine if r["n"] == n] for n in counts]
            mid = [statistics.median(v) for v in values]
            low = [m - min(v) for m, v in zip(mid, values)]
            high = [max(v) - m for m, v in zip(mid, values)]
            _, k = power_fit([float(n) for n in counts], mid)
            color, marker, line = STYLE[series]
            ax.errorbar(counts, mid, yerr=[low, high], color=color, marker=marker, linestyle=line,
                        capsize=3, label=f"{NAMES[series[0]]}, {LAYOUTS[series[1]]}: N^{k:.2f}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("set-top boxes N (one rank each, docsis-27m)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7.5)
    fig.suptitle("Launch and wire-up cost against N (device times; median of the launches, "
                 "bars min..max)", fontsize=11)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
