"""The boot's resource use, read from the board layer's monitor (seed 004 §IV-C, Figs. 8/9).

The guest samples /proc every 100 ms from the start of userspace (``vmlayer.MONITOR``); each
line is the guest's uptime, /proc/stat's CPU times, MemTotal and MemAvailable, and the root
disk's sectors read and written. Between two samples that makes one interval: the CPU's busy
share (all but idle and iowait), the memory in use at its end, and the disk's read and write
rates. Times are seconds since userspace started (systemd's UserspaceTimestampMonotonic, on
the same clock as the uptime).
"""

from __future__ import annotations

SECTOR_B = 512
KIB_B = 1024
USER_HZ = 100  # the unit of /proc's CPU times on Linux, whatever the kernel's HZ
COLUMNS = ["config", "shutdown", "cycle", "t_s", "dt_s", "cpu_busy", "mem_used_B", "read_B_per_s", "write_B_per_s"]


def samples(text: str) -> list[tuple[float, list[int], int, int, int, int]]:
    """(uptime s, CPU times, MemTotal kB, MemAvailable kB, sectors read, sectors written) per
    complete line; a line cut short (the report cut off mid-line) is left out."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) != 13:
            continue
        try:
            up = float(words[0])
            numbers = [int(w) for w in words[1:]]
        except ValueError:
            continue
        out.append((up, numbers[:8], numbers[8], numbers[9], numbers[10], numbers[11]))
    return out


def intervals(text: str, userspace_s: float) -> list[dict]:
    """One row per interval between consecutive samples, timed at its end from userspace's start."""
    rows = []
    got = samples(text)
    for (t0, cpu0, *_), (t1, cpu1, total, avail, rd, wr), (_, _, _, _, rd0, wr0) in zip(got, got[1:], got):
        dt = t1 - t0
        spent = [b - a for a, b in zip(cpu0, cpu1)]
        ticks = sum(spent)
        if dt <= 0 or ticks <= 0:
            continue
        idle = spent[3] + spent[4]
        rows.append({"t_s": t1 - userspace_s, "dt_s": dt, "cpu_busy": (ticks - idle) / ticks,
                     "mem_used_B": (total - avail) * KIB_B,
                     "read_B_per_s": (rd - rd0) * SECTOR_B / dt, "write_B_per_s": (wr - wr0) * SECTOR_B / dt})
    return rows


def own_cost(text: str) -> dict:
    """The monitor's own CPU (its shell; it starts nothing per sample) over its life, and that as
    a share of the board's CPUs: what measuring cost the boot it measured. None where its last
    line is missing (the report cut off)."""
    for line in text.splitlines():
        words = line.split()
        if len(words) == 8 and words[0] == "self":
            try:
                ticks = [int(w) for w in words[1:6]]
                end, cpus = float(words[6]), int(words[7])
            except ValueError:
                break
            cpu_s, life = sum(ticks[:4]) / USER_HZ, end - ticks[4] / USER_HZ
            return {"monitor_cpu_s": cpu_s, "board_cpus": cpus,
                    "monitor_cpu_share": cpu_s / (life * cpus) if life > 0 and cpus > 0 else None}
    return {"monitor_cpu_s": None, "board_cpus": None, "monitor_cpu_share": None}


def over_userspace(rows: list[dict], t_usi_s: float | None) -> dict:
    """The cycle's figures over userspace initialisation (its intervals ending by T_usi): the
    CPU's mean busy share, the bytes read and written, and the most memory in use."""
    within = [r for r in rows if t_usi_s is not None and 0 < r["t_s"] <= t_usi_s + 1e-9]
    if not within:
        return {"usi_cpu_busy": None, "usi_read_B": None, "usi_write_B": None, "usi_mem_peak_B": None,
                "monitor_samples": len(rows)}
    seconds = sum(r["dt_s"] for r in within)
    busy = sum(r["cpu_busy"] * r["dt_s"] for r in within) / seconds
    return {"usi_cpu_busy": busy, "usi_read_B": sum(r["read_B_per_s"] * r["dt_s"] for r in within),
            "usi_write_B": sum(r["write_B_per_s"] * r["dt_s"] for r in within),
            "usi_mem_peak_B": max(r["mem_used_B"] for r in within), "monitor_samples": len(rows)}


def figure(rows: list[dict], t_usi_s: dict[str, float]):
    """Figs. 8/9 in one: CPU busy share, memory in use and the disk's rates against time since
    userspace started, one line per configuration (its first cycle with samples); a dashed line
    at each configuration's median T_usi."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for k, config in enumerate(dict.fromkeys(r["config"] for r in rows)):
        mine = [r for r in rows if r["config"] == config]
        first = min((r["shutdown"], r["cycle"]) for r in mine)
        mine = [r for r in mine if (r["shutdown"], r["cycle"]) == first]
        t = [r["t_s"] for r in mine]
        color = f"C{k}"
        axes[0].plot(t, [100 * r["cpu_busy"] for r in mine], color=color, label=config)
        axes[1].plot(t, [r["mem_used_B"] / 1e6 for r in mine], color=color, label=config)
        axes[2].plot(t, [r["read_B_per_s"] / 1e6 for r in mine], color=color, label=f"{config} read")
        axes[2].plot(t, [r["write_B_per_s"] / 1e6 for r in mine], ":", color=color, label=f"{config} write")
        if config in t_usi_s:
            for ax in axes:
                ax.axvline(t_usi_s[config], color=color, linestyle="--", alpha=0.5)
    axes[0].set_ylabel("CPU busy (%)")
    axes[1].set_ylabel("memory in use (MB)")
    axes[2].set_ylabel("disk (MB/s)")
    axes[2].set_xlabel("time since userspace started (s); dashed: median T_usi")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Boot resource use on the virtual board (seed 004 Figs. 8/9)")
    fig.tight_layout()
    return fig
