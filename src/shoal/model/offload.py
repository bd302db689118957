"""Process the devices' data stream locally on n devices, or ship it to a datacenter?

Both options are costed at the stream rate R (B/s) as average power (W);
energy per byte is that power divided by R. Symbols: device idle/busy
power ``Pi``/``Pb``, device cost ``s`` (s/B), Amdahl speed-up ``S(n)`` with
parallel fraction f, server cost ``s_srv`` and power ``P_srv``, PUE,
uplink bandwidth ``B``, energies per bit ``e_dev``/``e_net`` and radio
power while sending ``P_radio``.

Local, n devices::

    throughput      = S(n) / s                       (must be >= R)
    power           = n Pi + R s (Pb - Pi)

  (the Woo-Lee energy of the work, ``R s Pb (1 + (n-1) k (1-f))``, plus the
  idle draw while waiting for data, ``n Pi (1 - u)``, simplifies to this:
  with a linear power model only the dynamic power depends on the work).

Offload::

    throughput      = B                              (must be >= R)
    power           = [n Pi] + R (8 e_dev + P_radio / B + 8 e_net + s_srv P_srv PUE)

  ``[n Pi]`` counts when ``devices_on_anyway`` (IoT devices that produce
  the data stay on either way); otherwise they would sleep and only their
  radio is charged. ``P_srv`` is the server's busy power (``gross``) or
  busy minus idle (``net``, for a server that is on for others anyway).

Time: the latency of one chunk is its service time plus the M/D/1 queueing
wait ``rho * service / (2 (1 - rho))`` (Poisson arrivals of chunks,
deterministic service, utilisation ``rho``): local service
``chunk s / S(n)``; offload ``rtt + chunk / B`` (+ queueing on the uplink)
``+ chunk s_srv`` (the datacenter is taken as elastic: no wait there).

Both powers are affine in R, so the energy crossover is
``R* = (a_off - a_loc) / (b_loc - b_off)`` when positive.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from shoal.errors import ShoalError
from shoal import profiles
from shoal.model.scaling import _jsonable, amdahl_speedup
from shoal.model.uplinks import DOCSIS2, UplinkProfile
from shoal.profiles import DeviceProfile

LOCAL = "local"
OFFLOAD = "offload"
TIE = "tie"
NEITHER = "neither"
_REL_TIE = 1e-9


def speed_ratio(server: DeviceProfile, device: DeviceProfile) -> float:
    """How many times faster the server's whole CPU is than the device's (cores x per-core speed
    from the profiles: the one home of that figure)."""
    return (server.cores * server.speed) / (device.cores * device.speed)


DEVICE_S_PER_B = 1e-7
# The NUC against one MinnowBoard as profiles.toml has them (2 x 0.75 vs 2 x 0.25: 3).
SERVER_S_PER_B = DEVICE_S_PER_B / speed_ratio(profiles.builtin("nuc"), profiles.builtin("minnowboard"))


@dataclass(frozen=True)
class OffloadScenario:
    """Every input of the decision; the defaults are documented in ``sources`` and docs/model.md."""

    rate_Bps: float = 1e6
    nodes: int = 4
    parallel_fraction: float = 0.95
    device: DeviceProfile = field(default_factory=lambda: profiles.builtin("minnowboard"))
    server: DeviceProfile = field(default_factory=lambda: profiles.builtin("nuc"))
    uplink: UplinkProfile = DOCSIS2
    device_s_per_B: float = DEVICE_S_PER_B  # seconds one device needs per byte of the stream
    server_s_per_B: float = SERVER_S_PER_B
    pue: float = 1.58  # facility power / IT power: cooling and distribution on top of the server
    chunk_B: float = 2.0**20
    devices_on_anyway: bool = True
    server_basis: str = "gross"
    sources: dict = field(default_factory=lambda: {
        "rate_Bps": "assumption: 1 MB/s (8 Mbit/s), the order of one compressed HD camera stream",
        "nodes": "seed 000, section 6.1: the best perf/W was always at three or four boards (a study "
                 "uses its own answer instead)",
        "device": "profile minnowboard (shoal/data/profiles.toml: seed 000 Table 5.6)",
        "server": "profile nuc, the thesis' reference machine, hosted in a datacenter (seed 000 Table 5.7)",
        "device_s_per_B": "assumption: ~130 cycles per byte at the E3825's 1.33 GHz (seed 000, Table 4.1), the "
                          "order of a light per-byte analysis; measure your workload",
        "server_s_per_B": "the device's cost over the profiles' speed ratio of nuc to minnowboard (3: "
                          "2 x 0.75 vs 2 x 0.25 of a reference core; seed 001's '8 times slower' is the "
                          "whole board under MPI benchmarks, see profiles.toml); measure your workload",
        "pue": "Uptime Institute Global Data Center Survey 2023: average PUE 1.58",
        "parallel_fraction": "assumption: per-chunk stream processing is mostly parallel; use a fitted f "
                             "(shoal.model.fit_scaling) of your workload",
        "chunk_B": "assumption: results are needed per 1 MiB of data",
        "devices_on_anyway": "IoT devices that produce the data stay powered whichever option is chosen",
        "server_basis": "gross: the server's whole busy power is charged while it works for the stream",
    }, compare=False)

    def validate(self) -> None:
        """Raise ShoalError naming the first input that cannot be right."""
        d, s, u = self.device, self.server, self.uplink
        checks = [
            (math.isfinite(self.rate_Bps) and self.rate_Bps >= 0, f"stream rate must be finite and >= 0 B/s, "
                                                                   f"got {self.rate_Bps}"),
            (int(self.nodes) == self.nodes and self.nodes >= 1, f"node count must be a whole number >= 1, "
                                                                 f"got {self.nodes}"),
            (0 <= self.parallel_fraction <= 1, f"parallel fraction f must be in [0, 1], got {self.parallel_fraction}"),
            (0 <= d.idle_W <= d.busy_W, f"device power must satisfy 0 <= idle <= busy, got idle {d.idle_W} W, "
                                        f"busy {d.busy_W} W"),
            (0 <= s.idle_W <= s.busy_W, f"server power must satisfy 0 <= idle <= busy, got idle {s.idle_W} W, "
                                        f"busy {s.busy_W} W"),
            (0 < self.device_s_per_B < math.inf, f"device cost per byte must be > 0 s/B, "
                                                 f"got {self.device_s_per_B}"),
            (0 <= self.server_s_per_B < math.inf, f"server cost per byte must be >= 0 s/B, "
                                                  f"got {self.server_s_per_B}"),
            (self.pue >= 1, f"PUE must be >= 1, got {self.pue}"),
            (u.bandwidth_Bps > 0, f"uplink bandwidth must be > 0 B/s (inf allowed), got {u.bandwidth_Bps}"),
            (u.rtt_s >= 0 and u.device_J_per_bit >= 0 and u.device_active_W >= 0 and u.network_J_per_bit >= 0,
             "uplink round trip, energies per bit and radio power must be >= 0"),
            (0 < self.chunk_B < math.inf, f"chunk size must be > 0 B, got {self.chunk_B}"),
            (self.server_basis in ("gross", "net"), f"server basis must be 'gross' or 'net', got "
                                                    f"{self.server_basis!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ShoalError(message)

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


@dataclass(frozen=True)
class OptionCost:
    """One option at the scenario's rate. Powers are averages in W; ``energy_J_per_B`` is None at rate 0.

    For an option that cannot keep up, power and energy are what it would
    cost if it could (so the margin stays visible); its latency is inf.
    """

    option: str
    feasible: bool
    limit: str  # why it cannot keep up, "" when it can
    max_rate_Bps: float
    utilization: float
    chunk_latency_s: float  # inf when the option cannot keep up
    power_W: float
    energy_J_per_B: float | None
    breakdown_W: dict


@dataclass(frozen=True)
class OffloadVerdict:
    """The decision with its margins, crossovers and every input used.

    ``choice`` is the feasible option with the lower energy (or the only
    feasible one; "neither" when none keeps up). ``energy_winner`` compares
    energy alone, as if both could keep up. ``energy_ratio`` is the higher
    power over the lower (>= 1). ``crossover_rate_Bps`` is where the
    energies are equal for this n (None when they never cross at R > 0);
    ``cheaper_below_crossover`` names the option that wins at lower rates.
    ``n_min_local`` is the fewest devices that keep up with R (None: the
    serial part makes it impossible); ``local_wins_nodes`` is the range
    [lo, hi] of n where local is feasible and beats offloading (hi None: no
    upper limit; the whole field None: no n).
    """

    choice: str
    reason: str
    energy_winner: str
    energy_ratio: float | None
    energy_saving_W: float
    energy_saving_J_per_B: float | None
    time_winner: str
    latency_ratio: float | None
    local: OptionCost
    offload: OptionCost
    crossover_rate_Bps: float | None
    cheaper_below_crossover: str | None
    n_min_local: int | None
    local_wins_nodes: tuple | None
    inputs: dict

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


def _md1_latency(service_s: float, rho: float) -> float:
    """Service plus M/D/1 mean wait; inf at or beyond saturation."""
    if rho >= 1:
        return math.inf
    return service_s + rho * service_s / (2.0 * (1.0 - rho))


def _coefficients(sc: OffloadScenario, nodes: int) -> tuple[float, float, float, float]:
    """(a_local, b_local, a_offload, b_offload): power = a + b R for both options."""
    d = sc.device
    a_loc = nodes * d.idle_W
    b_loc = sc.device_s_per_B * (d.busy_W - d.idle_W)
    a_off = nodes * d.idle_W if sc.devices_on_anyway else 0.0
    b_off = _offload_per_byte(sc)
    return a_loc, b_loc, a_off, b_off


def _server_power_W(sc: OffloadScenario) -> float:
    s = sc.server
    return s.busy_W if sc.server_basis == "gross" else s.busy_W - s.idle_W


def _offload_per_byte(sc: OffloadScenario) -> float:
    u = sc.uplink
    radio = 8 * u.device_J_per_bit + u.device_active_W / u.bandwidth_Bps
    return radio + 8 * u.network_J_per_bit + sc.server_s_per_B * _server_power_W(sc) * sc.pue


def min_local_nodes(rate_Bps: float, s_per_B: float, parallel_fraction: float) -> int | None:
    """Fewest devices whose Amdahl throughput ``S(n) / s`` reaches the rate; None if none can."""
    if rate_Bps <= 0:
        return 1
    q = 1.0 / (rate_Bps * s_per_B)  # required 1/S(n) must be <= q
    f = parallel_fraction
    if q >= 1:
        return 1
    if q <= 1 - f:
        return None
    return max(1, math.ceil(f / (q - (1 - f)) - 1e-9))


def decide(scenario: OffloadScenario | None = None) -> OffloadVerdict:
    """Cost both options for the scenario (defaults when None) and return the verdict."""
    sc = scenario or OffloadScenario()
    sc.validate()
    d, u = sc.device, sc.uplink
    d_s_per_B, s_s_per_B = sc.device_s_per_B, sc.server_s_per_B
    R, n, f = float(sc.rate_Bps), int(sc.nodes), sc.parallel_fraction

    # Local.
    speedup = float(amdahl_speedup(n, f))
    loc_max = speedup / d_s_per_B
    loc_u = R / loc_max
    loc_ok = R <= loc_max
    loc_service = sc.chunk_B * d_s_per_B / speedup
    loc_breakdown = {"device_idle_W": n * d.idle_W, "device_dynamic_W": R * d_s_per_B * (d.busy_W - d.idle_W),
                     "radio_W": 0.0, "network_W": 0.0, "server_W": 0.0}
    loc_power = sum(loc_breakdown.values())
    local = OptionCost(
        LOCAL, loc_ok,
        "" if loc_ok else f"{n} device(s) process at most {loc_max:.4g} B/s, below the stream's {R:.4g} B/s",
        loc_max, loc_u, _md1_latency(loc_service, loc_u) if loc_ok else math.inf, loc_power,
        loc_power / R if R > 0 else None, loc_breakdown)

    # Offload.
    off_u = R / u.bandwidth_Bps
    off_ok = R <= u.bandwidth_Bps
    off_breakdown = {
        "device_idle_W": n * d.idle_W if sc.devices_on_anyway else 0.0,
        "device_dynamic_W": 0.0,
        "radio_W": R * (8 * u.device_J_per_bit + u.device_active_W / u.bandwidth_Bps),
        "network_W": R * 8 * u.network_J_per_bit,
        "server_W": R * s_s_per_B * _server_power_W(sc) * sc.pue,
    }
    off_power = sum(off_breakdown.values())
    uplink_wait = _md1_latency(sc.chunk_B / u.bandwidth_Bps, off_u) if off_ok else math.inf
    offload = OptionCost(
        OFFLOAD, off_ok,
        "" if off_ok else f"the uplink carries at most {u.bandwidth_Bps:.4g} B/s, below the stream's {R:.4g} B/s",
        u.bandwidth_Bps, off_u, u.rtt_s + uplink_wait + sc.chunk_B * s_s_per_B, off_power,
        off_power / R if R > 0 else None, off_breakdown)

    # Energy.
    low, high = sorted((loc_power, off_power))
    if high - low <= _REL_TIE * max(high, 1e-300):
        energy_winner = TIE
    else:
        energy_winner = LOCAL if loc_power < off_power else OFFLOAD
    ratio = high / low if low > 0 else (None if high > 0 else 1.0)
    saving = high - low

    # Time.
    time_winner, latency_ratio = _time(local, offload)

    # Choice.
    if loc_ok and off_ok:
        choice = energy_winner if energy_winner != TIE else (time_winner if time_winner != TIE else LOCAL)
    elif loc_ok:
        choice = LOCAL
    elif off_ok:
        choice = OFFLOAD
    else:
        choice = NEITHER

    crossover, cheaper_below = _crossover(sc, n)
    n_min = min_local_nodes(R, d_s_per_B, f)
    wins = _local_wins_nodes(sc, n_min, off_ok)
    reason = _reason(choice, energy_winner, ratio, local, offload, R)
    return OffloadVerdict(choice, reason, energy_winner, ratio, saving, saving / R if R > 0 else None,
                          time_winner, latency_ratio, local, offload, crossover, cheaper_below, n_min, wins,
                          sc.to_dict())


def _time(local: OptionCost, offload: OptionCost) -> tuple[str, float | None]:
    a, b = local.chunk_latency_s, offload.chunk_latency_s
    if math.isinf(a) and math.isinf(b):
        return NEITHER, None
    if math.isinf(a) or math.isinf(b):
        return (OFFLOAD if math.isinf(a) else LOCAL), None
    if abs(a - b) <= _REL_TIE * max(a, b):
        return TIE, 1.0
    winner = LOCAL if a < b else OFFLOAD
    fast, slow = min(a, b), max(a, b)
    return winner, (slow / fast if fast > 0 else None)


def _crossover(sc: OffloadScenario, n: int) -> tuple[float | None, str | None]:
    a_loc, b_loc, a_off, b_off = _coefficients(sc, n)
    if b_loc == b_off:
        return None, None
    r = (a_off - a_loc) / (b_loc - b_off)
    if not (r > 0 and math.isfinite(r)):
        return None, None
    return r, (LOCAL if a_loc < a_off else OFFLOAD)


def _local_wins_nodes(sc: OffloadScenario, n_min: int | None, offload_ok: bool) -> tuple | None:
    """[lo, hi] of node counts where local keeps up and costs less energy (or the uplink cannot keep up)."""
    if n_min is None:
        return None
    if not offload_ok:
        return (n_min, None)
    R, d = float(sc.rate_Bps), sc.device
    _, b_loc, _, b_off = _coefficients(sc, 1)
    margin = R * (b_off - b_loc)  # offload minus local, without the idle terms
    if sc.devices_on_anyway or d.idle_W == 0:
        # Idle draw is the same for both options (or zero): n does not change the energy comparison.
        return (n_min, None) if margin > 0 else None
    # Local wins while n Pi < margin.
    hi = math.ceil(margin / d.idle_W) - 1
    return (n_min, hi) if hi >= n_min else None


def _reason(choice: str, energy_winner: str, ratio, local: OptionCost, offload: OptionCost, R: float) -> str:
    if choice == NEITHER:
        return f"neither option keeps up: {local.limit}; {offload.limit}"
    if R == 0:
        return "no data to process: " + ("both options cost the same idle power" if energy_winner == TIE
                                         else f"{energy_winner} draws less power")
    other = offload if choice == LOCAL else local
    if not other.feasible:
        return f"{choice}: the other option cannot keep up ({other.limit})"
    chosen = local if choice == LOCAL else offload
    if energy_winner == TIE:
        return f"{choice}: same energy per byte, faster per chunk"
    return (f"{choice}: {chosen.energy_J_per_B:.3g} J/B against {other.energy_J_per_B:.3g} J/B "
            f"({ratio:.3g}x less energy)")


def decision_map(scenario: OffloadScenario, rates_Bps, nodes) -> list[dict]:
    """The verdict over a grid of rates and node counts, one flat row per point (for tables and plots)."""
    rows = []
    for n in nodes:
        for r in rates_Bps:
            v = decide(replace(scenario, rate_Bps=float(r), nodes=int(n)))
            rows.append({"rate_Bps": float(r), "nodes": int(n), "choice": v.choice,
                         "energy_winner": v.energy_winner, "time_winner": v.time_winner,
                         "local_power_W": v.local.power_W, "offload_power_W": v.offload.power_W,
                         "local_feasible": v.local.feasible, "offload_feasible": v.offload.feasible,
                         "local_J_per_B": v.local.energy_J_per_B, "offload_J_per_B": v.offload.energy_J_per_B,
                         "local_latency_s": v.local.chunk_latency_s, "offload_latency_s": v.offload.chunk_latency_s})
    return rows
