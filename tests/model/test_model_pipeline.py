"""From a tidy results table to per-benchmark fits, one node count, and the offload verdict."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from shoal.errors import ShoalError
from shoal.model import (
    OffloadScenario,
    amdahl_speedup,
    decide,
    fit_table,
    optimal_nodes,
    overall_optimum,
    woo_lee_power,
)


def _sweep() -> pd.DataFrame:
    """A sweep shaped like the bench table: rows per benchmark, size and node count, watts measured."""
    rng = np.random.default_rng(4)
    rows = []
    truth = {"allreduce": (0.92, 0.44, 1.0), "alltoall": (0.85, 0.44, 1.0)}
    for bench, (f, k, c) in truth.items():
        for size in (1024, 65536):
            for n in range(1, 7):
                for _ in range(3):
                    noise = 1 + 0.01 * rng.standard_normal(2)
                    perf = size * 1e3 * amdahl_speedup(n, f) * noise[0]
                    # Average power: 5.79 W for one busy board, plus shared power c in the same unit.
                    power = 5.79 * (1 + c) * woo_lee_power(n, f, k, c) * noise[1]
                    rows.append({"benchmark": bench, "size_B": size, "nodes": n, "bandwidth_Bps": perf,
                                 "power_W": power})
    # The latency test gets no faster with more boards.
    for n in range(1, 7):
        for _ in range(3):
            rows.append({"benchmark": "latency", "size_B": 8, "nodes": n,
                         "bandwidth_Bps": 1e5 * (1 + 0.02 * rng.standard_normal()), "power_W": 5.0 * n})
    return pd.DataFrame(rows)


def test_table_to_fits_to_optimum_to_offload():
    table = _sweep()
    table["bandwidth_Bps_per_W"] = table["bandwidth_Bps"] / table["power_W"]
    fits = fit_table(table, by=["benchmark", "size_B"], perf_col="bandwidth_Bps",
                     ppw_col="bandwidth_Bps_per_W", shared_power_fraction=None)
    assert set(fits) == {("allreduce", 1024), ("allreduce", 65536), ("alltoall", 1024), ("alltoall", 65536),
                         ("latency", 8)}
    assert fits[("latency", 8)].status == "flat"
    for key in [("allreduce", 1024), ("alltoall", 65536)]:
        fit = fits[key]
        assert fit.status == "ok", fit.reason
        truth = {"allreduce": 0.92, "alltoall": 0.85}[key[0]]
        assert abs(fit.f - truth) <= 3 * fit.stderr["f"]
        assert abs(fit.k - 0.44) <= 3 * fit.stderr["k"]
    # Shared power makes an interior optimum: sqrt(c f / (k (1 - f))) = 5.1 (allreduce), 3.6 (alltoall).
    assert optimal_nodes(fits[("allreduce", 1024)]).n_best_efficiency in (5, 6)
    assert optimal_nodes(fits[("alltoall", 1024)]).n_best_efficiency in (3, 4)
    overall = overall_optimum({f"{b}/{s}": fit for (b, s), fit in fits.items()})
    assert overall.status == "ok"
    assert 3 <= overall.n_best_efficiency <= 6
    assert overall.members["latency/8"].startswith("flat")

    # The fitted parallel fraction feeds the offload decision.
    verdict = decide(replace(OffloadScenario(), nodes=overall.n_best_efficiency,
                             parallel_fraction=fits[("allreduce", 65536)].f))
    assert verdict.inputs["parallel_fraction"] == pytest.approx(fits[("allreduce", 65536)].f)
    json.dumps({"fits": {"/".join(map(str, k)): v.to_dict() for k, v in fits.items()},
                "overall": overall.to_dict(), "offload": verdict.to_dict()}, allow_nan=False)


def test_fit_table_without_grouping_and_with_a_missing_column():
    table = _sweep().query("benchmark == 'allreduce' and size_B == 1024")
    fits = fit_table(table, perf_col="bandwidth_Bps")
    assert list(fits) == [()] and fits[()].status == "ok"
    with pytest.raises(ShoalError, match="no column"):
        fit_table(table, by="message_size", perf_col="bandwidth_Bps")
