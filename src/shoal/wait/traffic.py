"""Who talks to whom: the traffic matrix of a run under libshoalwait.

Each rank's telemetry file holds what that rank sent to each rank of
MPI_COMM_WORLD (its row of the matrix), counted at the sender from the calls
the library intercepts:

p2p     MPI_Send, MPI_Ssend, MPI_Isend, MPI_Issend, MPI_Sendrecv and
        MPI_Sendrecv_replace (and the Fortran MPI_SEND/MPI_SSEND), by their
        destination: the bytes of the message, one message per call
coll    a collective by its logical pattern, the same whatever algorithm the
        MPI picks: one message from a rank to each rank its data must reach,
        carrying that rank's share. Bcast/Scatter(v): root to every other
        rank; Gather(v)/Reduce: every other rank to the root; Allgather(v),
        Allreduce, Alltoall(v), Reduce_scatter(_block): every rank to every
        other; Barrier: 0 B to every other rank. Nothing a rank sends itself.

The tidy table has one row per (src, dst, kind) that carried a message:
``src``, ``dst`` (ranks of MPI_COMM_WORLD), ``kind`` (p2p or coll), ``bytes`` (B)
and ``messages``. Ranks are world ranks even when the program talks on its own
communicators (they are translated once per communicator).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

COLUMNS = ["src", "dst", "kind", "bytes", "messages"]
KINDS = ("p2p", "coll")
TABLE = "traffic"


def rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tidy table of a run's telemetry records (one per rank), by src, dst, kind."""
    out = []
    for rec in records:
        for cell in rec.get("traffic", []):
            out.append({"src": rec["rank"], "dst": cell["dst"], "kind": cell["kind"],
                        "bytes": cell["bytes"], "messages": cell["messages"]})
    return sorted(out, key=lambda r: (r["src"], r["dst"], KINDS.index(r["kind"])))


def ranks(records: list[dict[str, Any]]) -> int:
    """How many ranks the run had (the matrix is ranks x ranks)."""
    return max((rec["size"] for rec in records), default=0)


def matrix(table: list[dict[str, Any]], size: int, kinds: tuple[str, ...] = KINDS,
           value: str = "bytes") -> list[list[int]]:
    """``value`` (bytes or messages) from row src to column dst, over ``kinds``."""
    m = [[0] * size for _ in range(size)]
    for r in table:
        if r["kind"] in kinds:
            m[r["src"]][r["dst"]] += r[value]
    return m


def sent(table: list[dict[str, Any]], kinds: tuple[str, ...] = KINDS) -> dict[int, int]:
    """Bytes each rank sent (its row sum)."""
    out: dict[int, int] = {}
    for r in table:
        if r["kind"] in kinds:
            out[r["src"]] = out.get(r["src"], 0) + r["bytes"]
    return out


def write(directory: Path | str, table: list[dict[str, Any]], size: int,
          title: str = "") -> list[Path]:
    """traffic.csv, traffic.json and the heatmap (traffic.png, .svg) in ``directory``."""
    directory = Path(directory)
    csv_path = directory / f"{TABLE}.csv"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(table)
    json_path = directory / f"{TABLE}.json"
    json_path.write_text(json.dumps({"ranks": size, "columns": COLUMNS, "rows": table,
                                     "bytes": {k: matrix(table, size, (k,)) for k in KINDS},
                                     "messages": {k: matrix(table, size, (k,), "messages")
                                                  for k in KINDS}}, indent=1) + "\n")
    return [csv_path, json_path, *heatmap(table, size, directory / TABLE, title)]


def _short(n: int) -> str:
    """A cell's label: 3 significant digits and a decimal prefix (12.3k)."""
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= factor:
            return f"{n / factor:.3g}{prefix}"
    return str(n)


def heatmap(table: list[dict[str, Any]], size: int, stem: Path, title: str = "") -> list[Path]:
    """Bytes from each rank (rows) to each rank (columns): a panel for point-to-point
    messages and one for collectives, log colour scale, each cell labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    present = [k for k in KINDS if any(r["kind"] == k for r in table)] or ["p2p"]
    side = max(3.2, 0.55 * size + 1.6)
    fig, axes = plt.subplots(1, len(present), figsize=(side * len(present) + 0.8, side),
                             squeeze=False)
    names = {"p2p": "point-to-point", "coll": "collectives (logical pattern)"}
    for ax, kind in zip(axes[0], present):
        m = matrix(table, size, (kind,))
        cells = [v for row in m for v in row if v > 0] or [1]
        peak, least = max(cells), min(cells)
        shown = [[v if v > 0 else float("nan") for v in row] for row in m]
        image = ax.imshow(shown, cmap="viridis",
                          norm=LogNorm(vmin=max(least / 2, 0.5), vmax=max(peak, least + 1)))
        for i in range(size):
            for j in range(size):
                if m[i][j]:
                    ax.text(j, i, _short(m[i][j]), ha="center", va="center", fontsize=6,
                            color="white" if m[i][j] < peak ** 0.5 else "black")
        ax.set_xticks(range(size))
        ax.set_yticks(range(size))
        ax.set_xlabel("to rank")
        ax.set_ylabel("from rank")
        ax.set_title(names[kind], fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="bytes")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    paths = []
    for ext in ("png", "svg"):
        path = stem.with_suffix(f".{ext}")
        fig.savefig(path, dpi=120, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths
