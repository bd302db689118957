"""waitlab figures, drawn from a run's tables (PNG and SVG side by side)."""

from __future__ import annotations

from pathlib import Path

from shoal.runs.store import Run


def _save(fig, run: Run, name: str) -> list[Path]:
    paths = []
    for ext in ("png", "svg"):
        path = run.path / f"{name}.{ext}"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        paths.append(path)
    return paths


def _per_mpi(plt, run: Run, frame, name: str, height: float, title: str, xlabel: str, ylabel: str,
             draw, style) -> list[Path]:
    """One panel per MPI, one line per contender (``draw``), axes set by ``style``."""
    mpis = sorted(frame["mpi"].unique())
    frame = frame.assign(series=frame["contender"])
    if "place" in frame:   # runs across devices: the contender and where it ran
        place = frame["place"].fillna("host").astype(str)
        frame["series"] = frame["contender"].where(place.isin(["host", ""]), frame["contender"] + " @ " + place)
    fig, axes = plt.subplots(len(mpis), 1, figsize=(9, height * len(mpis)), squeeze=False)
    for ax, mpi in zip(axes[:, 0], mpis):
        for label, part in frame[frame["mpi"] == mpi].groupby("series", sort=False):
            draw(ax, part, label)
        style(ax)
        ax.set_title(f"{title} ({mpi})")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    paths = _save(fig, run, name)
    plt.close(fig)
    return paths


def _sleep_figure(plt, run: Run, sleep) -> list[Path]:
    """Seed 003 Fig. 4's layout: requested against measured sleep, a row per place, a panel
    per condition, the ideal (measured = requested) as a line. The y axis stops at twice the
    longest request, the same on every panel: a shared machine's long stalls (tens of ms)
    would flatten the rest; how many lie above is in the panel's title."""
    from shoal.wait.sleepaccuracy import CONDITIONS

    places = list(dict.fromkeys(zip(sleep["device"], sleep["profile"])))
    fig, axes = plt.subplots(len(places), len(CONDITIONS), figsize=(3.6 * len(CONDITIONS), 3 * len(places)),
                             squeeze=False, sharex=True)
    for row, (device, profile) in enumerate(places):
        mine = sleep[sleep["device"] == device]
        top = 2e6 * mine["requested_s"].max()
        for col, condition in enumerate(CONDITIONS):
            ax = axes[row, col]
            part = mine[(mine["load"] == condition.load) & (mine["slack"] == condition.slack)]
            above = int((1e6 * part["measured_s"] > top).sum())
            ax.plot(1e6 * part["requested_s"], 1e6 * part["measured_s"], ".", ms=1.5, alpha=0.4)
            ax.plot([0, 1000], [0, 1000], "k-", lw=0.6)
            ax.set_ylim(0, top)
            where = device if profile in ("host", device) else f"{device} ({profile})"
            ax.set_title(f"{where}: {condition.load}, slack {condition.slack}"
                         + (f" ({above} above)" if above else ""), fontsize=8)
            ax.set_xlabel("requested (µs)")
            if col == 0:
                ax.set_ylabel("measured (µs)")
    fig.tight_layout()
    paths = _save(fig, run, "waitlab_C_sleep")
    plt.close(fig)
    return paths


def plot_all(run: Run) -> list[Path]:
    """Draw every figure the run has data for; return the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    sleep = run.read("sleep")
    if not sleep.empty:
        written += _sleep_figure(plt, run, sleep)
    load = run.read("load")
    if not load.empty:
        written += _per_mpi(plt, run, load, "waitlab_A_load", 3.2, "A: receiver CPU load, bursts of 10 "
                            "messages then a pause", "time (s)", "CPU load (%)",
                            lambda ax, part, label: ax.plot(part["t_s"], 100 * part["load"], label=label,
                                                            lw=1.2),
                            lambda ax: ax.set_ylim(bottom=0))
    reaction = run.read("reaction")
    if not reaction.empty:
        written += _per_mpi(plt, run, reaction, "waitlab_D_reaction", 3.6, "D: reaction time as the gap "
                            "between messages grows", "gap between messages (s)", "reaction time (s)",
                            lambda ax, part, label: ax.plot(part["gap_s"], part["reaction_s"], label=label,
                                                            lw=1, marker=".", ms=2),
                            lambda ax: (ax.set_xscale("log"), ax.set_yscale("log")))

    results = run.read("results")
    if not results.empty:
        pats = [e for e in ("full", "burst", "lock") if e in set(results["experiment"])]
        ok = results[results["status"] == "ok"]
        if pats and not ok.empty:
            fig, axes = plt.subplots(2, len(pats), figsize=(5 * len(pats), 7), squeeze=False)
            for col, exp in enumerate(pats):
                part = ok[ok["experiment"] == exp]
                labels = [f"{r.contender}\n{r.mpi.split()[0]}" for r in part.itertuples()]
                axes[0, col].bar(range(len(part)), 100 * part["cpu_load"])
                axes[0, col].set_title(f"{exp}: server CPU load (%)")
                axes[1, col].bar(range(len(part)), part["wall_s"])
                axes[1, col].set_title(f"{exp}: run time (s)")
                for row in (0, 1):
                    axes[row, col].set_xticks(range(len(part)))
                    axes[row, col].set_xticklabels(labels, rotation=90, fontsize=6)
            fig.tight_layout()
            written += _save(fig, run, "waitlab_patterns")
            plt.close(fig)
    return written
