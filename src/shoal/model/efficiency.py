"""Performance per watt with the idle baseline chosen explicitly.

Two bases, never mixed silently:

* ``gross`` -- all measured power is charged to the work:
  ``perf / P_total``. Right when the devices would be switched off (or
  asleep) if they did not run the work: a dedicated cluster.
* ``net`` -- only the power above the idle baseline is charged:
  ``perf / (P_total - P_idle)``. Right when the devices are on anyway
  (IoT devices that produce the data): their idle draw is a sunk cost.

``P_idle`` is the idle power of exactly the set of devices that
``P_total`` measures (for n identical devices, ``n * idle_per_device``).
When the net power is not positive, the load's draw cannot be told apart
from idle: that point's net perf/W is NaN (never a made-up number).

Standard errors propagate to first order, errors assumed independent:
``se_q^2 = (se_perf/P)^2 + (perf * se_P / P^2)^2`` with
``se_P^2 = se_total^2 + se_idle^2`` for the net basis. A 95% interval of
a median from :func:`shoal.bench.stats.summarize` converts to a standard
error as ``(ci_high - ci_low) / (2 * 1.96)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shoal.errors import ShoalError

BASES = ("gross", "net")


def _check_basis(basis: str) -> None:
    if basis not in BASES:
        raise ShoalError(f"unknown perf/W basis {basis!r}: use 'gross' (all power) or 'net' (power above idle)")


def _array(name: str, value) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if np.any(arr[np.isfinite(arr)] < 0):
        raise ShoalError(f"{name} has negative values; powers and performances must be >= 0")
    return arr


def attributed_power_W(power_W, idle_W=None, *, basis: str = "gross") -> np.ndarray:
    """Power charged to the work: ``P_total`` (gross) or ``P_total - P_idle`` (net).

    Net values that are not positive become NaN: the load is not measurable
    above idle at that point.
    """
    _check_basis(basis)
    total = _array("power_W", power_W)
    if basis == "gross":
        return total * 1.0
    if idle_W is None:
        raise ShoalError("the 'net' perf/W basis needs the idle power of the measured devices (idle_W)")
    net = total - _array("idle_W", idle_W)
    return np.where(net > 0, net, np.nan)


@dataclass(frozen=True)
class PerfPerWatt:
    """Perf/W values (perf unit per watt = work per joule) and their standard errors."""

    basis: str
    value: np.ndarray
    stderr: np.ndarray
    power_W: np.ndarray  # the power each value was divided by


def perf_per_watt(perf, power_W, idle_W=None, *, basis: str = "gross", perf_se=None, power_se=None,
                  idle_se=None) -> PerfPerWatt:
    """Performance per watt on the chosen basis, element-wise, with first-order standard errors.

    ``perf`` must be "higher is better" (bandwidth in B/s, operations/s,
    1/time); the result is work per joule (B/J, operations/J). Missing
    standard errors count as zero.
    """
    p = _array("perf", perf)
    watts = attributed_power_W(power_W, idle_W, basis=basis)
    value = p / np.where(watts > 0, watts, np.nan)
    zero = np.zeros(np.broadcast(p, watts).shape)
    sp = zero + (0.0 if perf_se is None else _array("perf_se", perf_se))
    sw2 = zero + (0.0 if power_se is None else _array("power_se", power_se)) ** 2
    if basis == "net" and idle_se is not None:
        sw2 = sw2 + _array("idle_se", idle_se) ** 2
    # q = p / W  =>  se_q^2 = (se_p / W)^2 + (p * se_W / W^2)^2
    stderr = np.sqrt((sp / watts) ** 2 + p**2 * sw2 / watts**4)
    stderr = np.where(np.isfinite(value), stderr, np.nan)
    return PerfPerWatt(basis=basis, value=value, stderr=stderr, power_W=watts)


def energy_per_work(perf, power_W, idle_W=None, *, basis: str = "gross") -> np.ndarray:
    """Joules per unit of work (J/B for a bandwidth): the inverse of perf/W."""
    watts = attributed_power_W(power_W, idle_W, basis=basis)
    p = _array("perf", perf)
    return watts / np.where(p > 0, p, np.nan)


def idle_fraction(idle_W, busy_W) -> float:
    """Woo-Lee ``k``: the fraction of its busy power a node draws when idle."""
    idle, busy = float(idle_W), float(busy_W)
    if not (0 <= idle <= busy and busy > 0):
        raise ShoalError(f"idle power {idle} W and busy power {busy} W must satisfy 0 <= idle <= busy, busy > 0")
    return idle / busy


def add_perf_per_watt(df, perf_col: str, *, power_col: str = "power_W", idle_col: str | None = None,
                      idle_W: float | None = None, nodes_col: str | None = None):
    """A copy of a results table with perf/W columns added on both bases.

    Adds ``<perf_col>_per_W_gross`` and, when an idle baseline is known,
    ``net_power_W`` and ``<perf_col>_per_W_net``. The baseline is the
    column ``idle_col`` (idle power of the same devices ``power_col``
    measures), or ``idle_W`` per device times ``nodes_col`` (or times 1
    without a node column). Rows are kept as they are; undefined values
    are NaN.
    """
    for col in (perf_col, power_col) + ((idle_col,) if idle_col else ()) + ((nodes_col,) if nodes_col else ()):
        if col not in df.columns:
            raise ShoalError(f"results table has no column {col!r} (columns: {', '.join(map(str, df.columns))})")
    if idle_col and idle_W is not None:
        raise ShoalError("give the idle baseline either as a column (idle_col) or per device (idle_W), not both")
    out = df.copy()
    out[f"{perf_col}_per_W_gross"] = perf_per_watt(df[perf_col], df[power_col]).value
    idle = None
    if idle_col:
        idle = df[idle_col].to_numpy(dtype=float)
    elif idle_W is not None:
        idle = float(idle_W) * (df[nodes_col].to_numpy(dtype=float) if nodes_col else 1.0)
    if idle is not None:
        out["net_power_W"] = attributed_power_W(df[power_col], idle, basis="net")
        out[f"{perf_col}_per_W_net"] = perf_per_watt(df[perf_col], df[power_col], idle, basis="net").value
    return out
