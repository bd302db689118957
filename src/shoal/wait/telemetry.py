"""Reading and summarising libshoalwait's per-rank telemetry.

At MPI_Finalize every rank writes ``rank-<N>.json`` into
``SHOAL_WAIT_TELEMETRY``. Per wrapped MPI function it holds:

calls, waits        calls, and calls whose first test did not complete them
tests               MPI_Test*/Iprobe calls made by the loop
wait_s              time from entry to the completion being noticed
sleep_s, sleeps     wall time inside clock_nanosleep, and how many sleeps
oversleep_s         sleep time beyond what was asked (timer slack, scheduling)
notice_*            the *notice delay* of each call that waited: the time
                    from the last test that found the operation incomplete to
                    the test that found it complete. The operation finished
                    somewhere in that window, so it is an upper bound of how
                    late the rank noticed (its wake-up lateness);
                    notice_hist_log2ns[k] counts delays in [2^k, 2^(k+1)) ns.

and for the rank: wall_s (from MPI_Init's return to MPI_Finalize),
utime_s/stime_s (the kernel's CPU accounting over the same span), the mode,
the timer slack obtained, and ``wake`` (socket: sleeps end at a TCP socket
event; timer: they run their length) with ``socket_wakes``, how many did,
and ``alltoall_pairwise_calls``/``alltoall_bruck_calls``: the MPI_Alltoall calls run
pairwise and by Bruck's algorithm (docs/wait.md), ``alltoall_comms_made``: the private
communicators those ran on, and ``alltoall_world_in_init``: 1 if MPI_COMM_WORLD's was made
in MPI_Init (so that no first Alltoall holds the time of making it).

Per call site (``sites``: the object file and offset of the call, the same in
every rank) it holds how the site's predictions of arrivals fared:

predicted           waits that slept towards a predicted arrival
hits, early, late   the arrival came inside the predicted window, before it,
                    after it (a miss makes the site back off once)
miss_s, miss_max_s  how far outside the window the misses came, at least
rhythm_s, cap_s     the site's typical interval between arrivals, and the
                    longest backoff sleep that allowed (its last wait)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shoal.errors import ShoalError

FORMAT = "shoalwait-telemetry/1"


def read_dir(path: Path | str) -> list[dict[str, Any]]:
    """All rank files of one run, sorted by rank."""
    records = []
    for file in sorted(Path(path).glob("rank-*.json")):
        try:
            data = json.loads(file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ShoalError(f"telemetry file {file} is unreadable ({exc}); "
                             "the rank probably died before MPI_Finalize") from exc
        if data.get("format") != FORMAT:
            raise ShoalError(f"{file} is not shoalwait telemetry (format {data.get('format')!r})")
        records.append(data)
    return sorted(records, key=lambda r: r["rank"])


def hist_quantile(hist: list[int], q: float) -> float:
    """Upper edge (s) of the log2 bucket holding quantile q: a safe over-estimate."""
    total = sum(hist)
    if total == 0:
        return 0.0
    need, seen = q * total, 0
    for k, n in enumerate(hist):
        seen += n
        if seen >= need and n:
            return 2.0 ** (k + 1) * 1e-9
    return 2.0 ** len(hist) * 1e-9


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per rank and call class (p2p, send, coll), SI units."""
    rows = []
    for rec in records:
        by_class: dict[str, dict[str, Any]] = {}
        for entry in rec.get("calls", {}).values():
            agg = by_class.setdefault(entry["class"], {
                "calls": 0, "waits": 0, "wait_s": 0.0, "sleep_s": 0.0, "sleeps": 0,
                "yields": 0, "notice_count": 0, "notice_s": 0.0, "notice_max_s": 0.0,
                "hist": [0] * len(entry["notice_hist_log2ns"])})
            for key in ("calls", "waits", "wait_s", "sleep_s", "sleeps", "yields",
                        "notice_count", "notice_s"):
                agg[key] += entry[key]
            agg["notice_max_s"] = max(agg["notice_max_s"], entry["notice_max_s"])
            agg["hist"] = [a + b for a, b in zip(agg["hist"], entry["notice_hist_log2ns"])]
        for cls in sorted(by_class):
            agg = by_class[cls]
            rows.append({
                "rank": rec["rank"], "class": cls, "mode": rec["mode"],
                "calls": agg["calls"], "waits": agg["waits"],
                "wait_s": agg["wait_s"], "sleep_s": agg["sleep_s"], "sleeps": agg["sleeps"],
                "yields": agg["yields"],
                "notice_mean_s": agg["notice_s"] / agg["notice_count"] if agg["notice_count"] else 0.0,
                # A bin's upper edge can lie above the largest delay seen.
                "notice_p50_s": min(hist_quantile(agg["hist"], 0.50), agg["notice_max_s"]),
                "notice_p99_s": min(hist_quantile(agg["hist"], 0.99), agg["notice_max_s"]),
                "notice_max_s": agg["notice_max_s"],
                "cpu_s": rec["utime_s"] + rec["stime_s"], "wall_s": rec["wall_s"],
            })
    return rows


def sites(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per rank and call site that waited, SI units."""
    rows = []
    for rec in records:
        for site in rec.get("sites", []):
            if not site["waits"]:
                continue
            misses = site["early"] + site["late"]
            rows.append({
                "rank": rec["rank"], "function": site["function"],
                "site": f"{site['object']}+{site['offset']}", "symbol": site["symbol"],
                "calls": site["calls"], "waits": site["waits"], "sleeps": site["sleeps"],
                "predicted": site["predicted"], "hits": site["hits"], "early": site["early"],
                "late": site["late"],
                "miss_mean_s": site["miss_s"] / misses if misses else 0.0,
                "miss_max_s": site["miss_max_s"], "rhythm_s": site["rhythm_s"],
                "cap_s": site["cap_s"],
            })
    return sorted(rows, key=lambda r: (r["rank"], -r["waits"]))


def render(rows: list[dict[str, Any]], title: str = "waiting per rank and call class",
           site_rows: list[dict[str, Any]] | None = None) -> None:
    """Print the summary as a table on stderr (stdout stays the program's)."""
    from rich.console import Console

    from shoal.render import narrow_table

    table = narrow_table(["rank", "class", "calls", "wait\ns", "sleep\ns", "sleeps",
                          "notice\np50 µs", "notice\np99 µs", "notice\nmax µs", "CPU\n%"],
                         title=title)
    for r in rows:
        load = 100.0 * r["cpu_s"] / r["wall_s"] if r["wall_s"] > 0 else 0.0
        table.add_row(str(r["rank"]), r["class"], str(r["calls"]), f"{r['wait_s']:.4f}",
                      f"{r['sleep_s']:.4f}", str(r["sleeps"]), f"{r['notice_p50_s'] * 1e6:.1f}",
                      f"{r['notice_p99_s'] * 1e6:.1f}", f"{r['notice_max_s'] * 1e6:.1f}",
                      f"{load:.1f}")
    console = Console(stderr=True)
    console.print(table)
    if site_rows:
        console.print(_site_table(site_rows))


def _site_table(rows: list[dict[str, Any]]):
    from shoal.render import narrow_table

    # The site by its offset only: the object (the program, mostly) is in the JSON.
    table = narrow_table(["rank", "call", "site", "sleeps", "pred", "hits", "early", "late",
                          "miss\nmax ms", "rhythm\nms", "cap\nms"], left=("call", "site"),
                         title="predicted arrivals per call site")
    for r in rows:
        table.add_row(str(r["rank"]), r["function"].removeprefix("MPI_"),
                      r["site"].rpartition("+")[2], str(r["sleeps"]), str(r["predicted"]),
                      str(r["hits"]), str(r["early"]), str(r["late"]),
                      f"{r['miss_max_s'] * 1e3:.2f}", f"{r['rhythm_s'] * 1e3:.1f}",
                      f"{r['cap_s'] * 1e3:.2f}")
    return table
