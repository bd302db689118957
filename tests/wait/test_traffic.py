"""Who talks to whom: the bytes and messages libshoalwait counts between every pair
of ranks, cell by cell against a program whose traffic is known in advance, and the
row sums of a 4-rank Hough on the S-DSM against the ranks' own counters."""

from __future__ import annotations

import json

import pandas as pd

from shoal.cli import main
from shoal.wait import telemetry, traffic
from tests.wait.helpers import run_scenario, waittest

RANKS = 3


def expected(n: int) -> dict[tuple[str, str], list[list[int]]]:
    """shoal-waittest traffic's matrices by docs/wait.md's rules (src row, dst column)."""
    def zero():
        return [[0] * n for _ in range(n)]

    out = {(k, v): zero() for k in ("p2p", "coll") for v in ("bytes", "messages")}

    def add(kind, src, dst, b):
        out[(kind, "bytes")][src][dst] += b
        out[(kind, "messages")][src][dst] += 1

    for w in range(n):
        add("p2p", w, (w + 1) % n, 100 + w)          # MPI_Send on the world
        add("p2p", w, (w - 1) % n, 3 * 4)            # MPI_Isend to the next rank of the reversed comm
        add("p2p", w, (w + 1) % n, 8 * 8)            # MPI_Sendrecv's send
        others = [d for d in range(n) if d != w]
        for d in others:
            add("coll", w, d, 4 * 4)                 # Allreduce: every rank to every other
            add("coll", w, d, d + 1)                 # Alltoallv: d + 1 bytes to rank d
            add("coll", w, d, 0)                     # Barrier
            if w == n - 1:
                add("coll", w, d, 10 * 4)            # Bcast from root 0 of the reversed comm
            if w == n - 2:
                add("coll", w, d, 5)                 # Scatter from its root 1
        if w != 1:
            add("coll", w, 1, 2 * 8)                 # Gather to world rank 1
    return out


def _check(records, n):
    table = traffic.rows(records)
    want = expected(n)
    for kind in ("p2p", "coll"):
        for value in ("bytes", "messages"):
            assert traffic.matrix(table, n, (kind,), value) == want[(kind, value)], (kind, value)
    return table


def test_traffic_matrix_cell_by_cell_passing_through(mpich, tmp_path):
    """busy: every call goes straight to the MPI, counted on the way."""
    done = run_scenario(mpich, "busy", RANKS, "traffic", telemetry=tmp_path)
    assert done.returncode == 0, done.stderr
    _check(telemetry.read_dir(tmp_path), RANKS)


def test_traffic_matrix_when_rewritten_kept_by_shoal_run(openmpi, capfd, tmp_path):
    """backoff: the rewritten waits count the same; `shoal run --telemetry` keeps the
    tidy table (pandas reads it), its JSON and the heatmap."""
    code = main(["run", "--wait", "backoff", "--mpi", "openmpi", "-n", str(RANKS),
                 "--telemetry", str(tmp_path), "--json", "--", str(waittest(openmpi)), "traffic"])
    out = capfd.readouterr().out
    assert code == 0
    printed = json.loads([ln for ln in out.splitlines() if ln.startswith('{"mode"')][-1])["traffic"]
    table = _check(telemetry.read_dir(tmp_path), RANKS)
    assert printed == table
    frame = pd.read_csv(tmp_path / "traffic.csv")
    assert list(frame.columns) == traffic.COLUMNS
    assert frame["bytes"].dtype.kind == "i" and len(frame) == len(table)
    kept = json.loads((tmp_path / "traffic.json").read_text())
    assert kept["bytes"]["p2p"] == expected(RANKS)[("p2p", "bytes")]
    assert (tmp_path / "traffic.png").stat().st_size > 5000


def test_hough_row_sums_equal_the_ranks_own_counters(mpich, capfd, tmp_path):
    """4-rank Hough (2 servers, I/O, a task) kept by `shoal dsm run --out`: each rank's
    point-to-point row sum is the bytes (and messages) libshoalsdsm counted for it,
    exactly; and the pattern is server-centred: every message has a server at one end.
    (One MPI: the counting is the library's, checked under both MPIs above.)"""
    out = tmp_path / "hough"
    code = main(["dsm", "run", "hough", "--mpi", "mpich", "--wait", "busy", "-n", "4",
                 "--out", str(out), "--json", "--", "--size", "32", "--thetas", "60",
                 "--sample", "0"])
    printed = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    kept = json.loads((out / "report.json").read_text())
    assert kept["traffic"] == printed["traffic"]
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    table = pd.read_csv(out / "traffic.csv").to_dict("records")
    sent = traffic.sent(table, ("p2p",))
    messages = traffic.matrix(table, 4, ("p2p",), "messages")
    ranks = kept["report"]["ranks"]
    for r in ranks:
        assert sent[r["rank"]] == r["bytes_sent"] > 0
        assert sum(messages[r["rank"]]) == r["msgs_sent"]
    servers = {r["rank"] for r in ranks if r["role"] == "server"}
    assert servers == {0, 1}
    assert all(row["src"] in servers or row["dst"] in servers
               for row in table if row["kind"] == "p2p")
