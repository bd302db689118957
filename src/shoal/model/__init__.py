"""Pure models over measured numbers: perf/W, scaling fits, the node-count optimum, the offload decision.

No I/O, no MPI, no plotting: callers pass numbers and get dataclasses with
``to_dict()`` for JSON.
Every formula is written out in docs/model.md.
"""

from shoal.model.offload import OffloadScenario, OffloadVerdict, OptionCost, decide, decision_map, min_local_nodes
from shoal.model.optimum import Optimum, optimal_nodes, overall_optimum
from shoal.model.scaling import (
    Prediction,
    ScalingFit,
    amdahl_speedup,
    best_nodes_closed_form,
    fit_scaling,
    fit_table,
    woo_lee_energy,
    woo_lee_perf_per_watt,
    woo_lee_power,
)
from shoal.model.uplinks import UPLINKS, UplinkProfile

__all__ = [
    "OffloadScenario", "OffloadVerdict", "OptionCost", "decide", "decision_map",
    "min_local_nodes", "Optimum", "optimal_nodes", "overall_optimum", "UPLINKS",
    "UplinkProfile", "Prediction", "ScalingFit", "amdahl_speedup",
    "best_nodes_closed_form", "fit_scaling", "fit_table", "woo_lee_energy", "woo_lee_perf_per_watt", "woo_lee_power",
]
