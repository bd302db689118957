"""Adding a workload is a C file plus one catalog line (docs/work.md, "Adding a workload"):
the steps followed on a copy of the native tree, and the new workload runs, is checked and
is found by shoal's catalog with its small size."""

from __future__ import annotations

import shutil

from shoal.mpi import build
from shoal.work import catalog

from work_helpers import launch

# Step 1: one C file. The sum of squares 1..N, blocks of it per rank, one reduction.
SUMSQ_C = r"""
#include "work.h"

#include <stdlib.h>

static int sq_parse(const char *size, double *memory_B, char *err, size_t errlen)
{
    long n;
    if (wk_parse_count(size, &n) != 0 || n < 1) {
        snprintf(err, errlen, "sumsq size '%s': give a count of numbers (e.g. 1000 or 4M)", size);
        return 1;
    }
    *memory_B = 0;
    return 0;
}

static double sum_squares(long lo, long hi)
{
    double s = 0;
    for (long i = lo; i < hi; i++)
        s += (double)(i + 1) * (double)(i + 1);
    return s;
}

static void sq_run(const wk_opts *opts, wk_result *res, MPI_Comm comm)
{
    int rank, p;
    long n, lo, hi;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    wk_parse_count(opts->size, &n);
    wk_block(n, p, rank, &lo, &hi);
    double t = wk_now();
    double mine = sum_squares(lo, hi), total = 0;
    res->compute_s = wk_now() - t;
    t = wk_now();
    MPI_Reduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
    res->comm_s = wk_now() - t;
    wk_timed_end(res);
    if (rank != 0)
        return;
    res->work = (double)n;
    if (opts->corrupt)
        total += 1;
    res->digest = wk_fnv1a(WK_FNV_INIT, &total, sizeof total);
    double exact = (double)n * (n + 1) * (2 * n + 1) / 6;
    if (opts->check && total != exact)
        wk_fail(res, "sum %.17g, exact %.17g", total, exact);
}

WK_WORKLOAD(sumsq, "number", "100M", "1000", sq_parse, sq_run,
            "sum of squares: blocks per rank, one reduction; numbers/s");
"""


def test_a_new_workload_is_one_c_file_and_one_catalog_line(mpich, tmp_path, monkeypatch):
    native = tmp_path / "native"
    for target in ("work", "common"):
        shutil.copytree(build.NATIVE_DIR / target, native / target)
    (native / "work" / "sumsq.c").write_text(SUMSQ_C)
    # Step 2: its line in main.c's catalog.
    main_c = native / "work" / "main.c"
    text = main_c.read_text()
    assert "    X(is)\n" in text
    main_c.write_text(text.replace("    X(is)\n", "    X(is)             \\\n    X(sumsq)\n", 1))
    monkeypatch.setattr(build, "NATIVE_DIR", native)
    monkeypatch.setenv("SHOAL_CACHE", str(tmp_path / "cache"))
    program = build.build("work", mpich)

    workloads = catalog.load(program)
    sumsq = catalog.find(workloads, "sumsq")
    assert [w.name for w in workloads][-2:] == ["is", "sumsq"]
    assert (sumsq.unit, sumsq.default_size, sumsq.small_size) == ("number", "100M", "1000")
    assert catalog.resolve_size(sumsq, "small") == "1000"
    assert catalog.describe(program, sumsq, "4M")["memory_per_rank_B"] == 0
    code, results, stderr = launch(mpich, program, 2, ["--runs", "sumsq:1000,ep:M18", "--check"])
    assert code == 0, stderr
    assert results["sumsq"]["check"] == "pass" and results["sumsq"]["work"] == 1000
    assert results["ep"]["check"] == "pass"
    code, results, stderr = launch(mpich, program, 2, ["--runs", "sumsq:1000", "--check", "--corrupt"])
    assert results["sumsq"]["check"] == "fail"
