"""perf/W on the gross and net bases, with hand-computed values and the thesis' watts."""

import math

import numpy as np
import pandas as pd
import pytest

from shoal.errors import ShoalError
from shoal.model import add_perf_per_watt, attributed_power_W, energy_per_work, idle_fraction, perf_per_watt
from shoal.profiles import builtin

# Seed 000 Tables 5.6 and 5.7, as profiles.toml carries them.
_MINNOW, _NUC = builtin("minnowboard"), builtin("nuc")
MINNOWBOARD_AVG_W = [_MINNOW.per_test.average_W[t] for t in ("allreduce", "reduce")]
NUC_AVG_W = [_NUC.per_test.average_W["allreduce"]]
MINNOWBOARD_IDLE_W, NUC_IDLE_W = _MINNOW.idle_W, _NUC.idle_W


def test_gross_and_net_by_hand():
    gross = perf_per_watt(100.0, 5.0)
    net = perf_per_watt(100.0, 5.0, 2.0, basis="net")
    assert gross.value == pytest.approx(20.0)
    assert net.value == pytest.approx(100.0 / 3.0)
    assert net.power_W == pytest.approx(3.0)
    assert gross.basis == "gross" and net.basis == "net"


def test_thesis_allreduce_net_power():
    # Table 5.6 / 5.7, Allreduce column: average minus idle.
    minnow = attributed_power_W(MINNOWBOARD_AVG_W[0], MINNOWBOARD_IDLE_W, basis="net")
    nuc = attributed_power_W(NUC_AVG_W[0], NUC_IDLE_W, basis="net")
    assert minnow == pytest.approx(4.234 - 2.5663)
    assert nuc == pytest.approx(18.0742 - 4.4801)
    # Same throughput on both machines: the board is ~8.2x better per net watt, ~4.3x per gross watt.
    ratio_net = perf_per_watt(1.0, MINNOWBOARD_AVG_W[0], MINNOWBOARD_IDLE_W, basis="net").value / \
        perf_per_watt(1.0, NUC_AVG_W[0], NUC_IDLE_W, basis="net").value
    assert ratio_net == pytest.approx(13.5941 / 1.6677, rel=1e-4)
    ratio_gross = perf_per_watt(1.0, MINNOWBOARD_AVG_W[0]).value / perf_per_watt(1.0, NUC_AVG_W[0]).value
    assert ratio_gross == pytest.approx(18.0742 / 4.234)


def test_net_power_below_idle_is_nan_not_a_number_made_up():
    # Table 5.6, Reduce: the average (2.231 W) is below the idle figure (2.5663 W).
    q = perf_per_watt([10.0, 10.0], [MINNOWBOARD_AVG_W[1], MINNOWBOARD_AVG_W[0]], MINNOWBOARD_IDLE_W, basis="net")
    assert math.isnan(q.value[0]) and math.isnan(q.stderr[0])
    assert q.value[1] == pytest.approx(10.0 / (4.234 - 2.5663))


def test_standard_errors_propagate_by_hand():
    gross = perf_per_watt(100.0, 5.0, perf_se=5.0, power_se=0.1)
    assert gross.stderr == pytest.approx(math.sqrt((5.0 / 5.0) ** 2 + (100.0 * 0.1 / 25.0) ** 2))
    net = perf_per_watt(100.0, 5.0, 2.0, basis="net", perf_se=5.0, power_se=0.1, idle_se=0.2)
    se_w2 = 0.1**2 + 0.2**2
    assert net.stderr == pytest.approx(math.sqrt((5.0 / 3.0) ** 2 + 100.0**2 * se_w2 / 3.0**4))
    # idle_se does not enter the gross basis.
    assert perf_per_watt(100.0, 5.0, 2.0, perf_se=5.0, power_se=0.1, idle_se=0.2).stderr == pytest.approx(
        gross.stderr)


def test_arrays_broadcast():
    q = perf_per_watt(np.array([10.0, 20.0, 30.0]), 10.0)
    assert q.value.tolist() == pytest.approx([1.0, 2.0, 3.0])
    assert q.stderr.tolist() == [0.0, 0.0, 0.0]


def test_energy_per_work_is_the_inverse():
    assert energy_per_work(1e6, 5.0) == pytest.approx(5e-6)  # J/B at 1 MB/s and 5 W
    assert energy_per_work(1e6, 5.0, 2.0, basis="net") == pytest.approx(3e-6)
    assert math.isnan(energy_per_work(0.0, 5.0))


def test_idle_fraction_from_thesis_watts():
    assert idle_fraction(2.5663, 5.7889875) == pytest.approx(0.44331, rel=1e-4)
    with pytest.raises(ShoalError, match="idle <= busy"):
        idle_fraction(6.0, 5.0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(basis="both"), "unknown perf/W basis"),
    (dict(basis="net"), "needs the idle power"),
])
def test_bad_basis_is_one_clear_error(kwargs, message):
    with pytest.raises(ShoalError, match=message):
        perf_per_watt(1.0, 2.0, **kwargs)


def test_negative_power_rejected():
    with pytest.raises(ShoalError, match="power_W has negative values"):
        perf_per_watt(1.0, -2.0)


def _table():
    return pd.DataFrame({
        "benchmark": ["allreduce"] * 3 + ["bcast"] * 3,
        "size_B": [1024] * 6,
        "nodes": [1, 2, 4, 1, 2, 4],
        "bandwidth_Bps": [1e6, 1.8e6, 3.0e6, 2e6, 2.5e6, 2.6e6],
        "power_W": [5.0, 10.0, 20.0, 4.0, 8.0, 11.0],
    })


def test_table_gets_both_bases_per_row():
    out = add_perf_per_watt(_table(), "bandwidth_Bps", idle_W=2.5, nodes_col="nodes")
    assert list(out.columns[-3:]) == ["bandwidth_Bps_per_W_gross", "net_power_W", "bandwidth_Bps_per_W_net"]
    row = out.iloc[2]  # allreduce on 4 nodes: 20 W total, 4 x 2.5 W idle
    assert row["bandwidth_Bps_per_W_gross"] == pytest.approx(3.0e6 / 20.0)
    assert row["net_power_W"] == pytest.approx(10.0)
    assert row["bandwidth_Bps_per_W_net"] == pytest.approx(3.0e6 / 10.0)
    # bcast on 4 nodes: 11 W against 10 W idle.
    assert out.iloc[5]["bandwidth_Bps_per_W_net"] == pytest.approx(2.6e6 / 1.0)
    assert len(out) == 6 and "bandwidth_Bps_per_W_gross" not in _table().columns


def test_table_idle_column_and_errors():
    table = _table().assign(idle_W=[2.0, 4.0, 8.0, 2.0, 4.0, 8.0])
    out = add_perf_per_watt(table, "bandwidth_Bps", idle_col="idle_W")
    assert out["net_power_W"].tolist() == pytest.approx([3.0, 6.0, 12.0, 2.0, 4.0, 3.0])
    with pytest.raises(ShoalError, match="no column 'throughput'"):
        add_perf_per_watt(table, "throughput")
    with pytest.raises(ShoalError, match="either as a column"):
        add_perf_per_watt(table, "bandwidth_Bps", idle_col="idle_W", idle_W=2.0)
    gross_only = add_perf_per_watt(table, "bandwidth_Bps")
    assert "bandwidth_Bps_per_W_net" not in gross_only.columns
