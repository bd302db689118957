"""Time dilation: run an emulation D times slower when the host cannot give the devices their CPU.

With factor D every device gets 1/D of its CPU budget, every link 1/D of
its rate and D times its latency and jitter; every time measured is divided
by D (and every rate multiplied by D) before it is recorded, and timeouts
are multiplied by D. Seen from the dilated programs' results, the devices
then run at their profiles' speed on a host that has D times the CPUs
(Gupta et al., NSDI 2006; DieCast, NSDI 2008).

What does not scale: kernel timers (TCP's 200 ms minimum RTO and delayed
ACKs look D times shorter), sleeps inside measured programs, and the host's
per-packet work (veth, softirq, the link forwarder), which sits outside
every device's quota and so shrinks by D in dilated time.
"""

from __future__ import annotations

import math
from dataclasses import replace

from shoal.profiles import LinkType
from shoal.errors import ShoalError

# CPUs kept for the kernel, the MPI launcher, the power sampler and the link
# forwarder: Mininet-HiFi kept >= 35 % of its CPU idle for fidelity, but a
# fixed reserve of half a CPU keeps small clusters at D = 1 on two cores.
RESERVE_CPUS = 0.5
# Below 2 CPUs (a container held to `docker --cpus 1` or 0.5, a slice with CPUQuota=) half a
# CPU would leave little or nothing (all of a 0.5-CPU container): the reserve is then the
# share of the capacity that half a CPU is of two, a quarter. On two CPUs the devices get 1.5
# and the helpers 0.5, one part to three; what the helpers do (the forwarder's per-packet
# work, the launcher's traffic, a rank's wake-ups) follows the emulated links and devices,
# which the larger D a smaller capacity needs slows alike. Not all of it slows, though (the
# launcher's start, shoal's own loop, the samplers): a 0.5-CPU container that kept a quarter
# of its capacity (0.125) was throttled in a fifth of its periods and every repetition ran
# short of CPU. So the reserve never falls below a quarter CPU (RESERVE_FLOOR), or half the
# capacity when that is smaller: 0.5 CPU keeps 0.25 and gives the devices 0.25 (4
# MinnowBoards at D = 6 when host cores are reference cores). Above 2 CPUs the half CPU
# stays: what does not slow with D does not grow either.
RESERVE_SHARE = 0.25
RESERVE_FLOOR = 0.25
MAX_DILATION = 64.0


def reserve(capacity: float) -> float:
    """The CPUs kept for the host on a host (or in a group) that can use ``capacity`` CPUs."""
    return min(RESERVE_CPUS, max(RESERVE_SHARE * capacity, min(RESERVE_FLOOR, capacity / 2)))


def needed(budgets: list[float], host_cpus: float, reserve_cpus: float | None = None) -> float:
    """The dilation at which the budgets plus the reserve just fit the host (may be < 1);
    ``host_cpus``: the CPUs this command can use (``cpulimit.capacity``), a fraction too."""
    kept = reserve(host_cpus) if reserve_cpus is None else reserve_cpus
    room = host_cpus - kept
    if room <= 0:
        raise ShoalError(f"a host of {host_cpus:g} CPUs leaves nothing after the "
                         f"{kept:g}-CPU reserve for the kernel and the launcher")
    return sum(budgets) / room


def choose(budgets: list[float], host_cpus: float, reserve_cpus: float | None = None) -> float:
    """The smallest whole D >= 1 at which the devices' budgets fit the host."""
    return float(max(1, math.ceil(needed(budgets, host_cpus, reserve_cpus) - 1e-9)))


def check(value: float | str) -> float:
    """Validate a dilation asked for (--dilation); ShoalError says what is wrong and what to do."""
    try:
        d = float(value)
    except (TypeError, ValueError):
        raise ShoalError(f"give a number such as 2, got {value!r}") from None
    if not math.isfinite(d) or d < 1:
        raise ShoalError(f"a dilation slows the emulation down, so it must be a number of at "
                         f"least 1 (1 = real time), got {value}")
    if d > MAX_DILATION:
        raise ShoalError(f"must be at most {MAX_DILATION:g} (every minute of emulation would "
                         f"take {d:g} minutes), got {value}")
    return d


def check_cores(per_core: dict[str, float], d: float, smallest: float, fits_at: float | None = None,
                asked: bool = False) -> None:
    """Refuse a dilation at which a device core's budget (``per_core``: CPUs at D = 1, per
    device) falls below ``smallest``, the least budget a core can be held to; ``fits_at``:
    the D the host needs to fit the devices."""
    for name, fraction in sorted(per_core.items(), key=lambda item: item[1]):
        if fraction / d >= smallest:
            return
        largest = math.floor(fraction / smallest)
        if asked and largest >= max(1.0, fits_at or 1.0):
            raise ShoalError(f"at dilation {d:g} each core of {name} would get {fraction / d:.5f} "
                             f"CPU, below the {smallest:g} CPU a core can be held to (1 ms per "
                             f"second); use a dilation of at most {largest}")
        raise ShoalError(f"{name}'s cores ({fraction:.4f} CPU each at real time) need a dilation "
                         f"of at most {largest} to be held to their budget, but this host needs "
                         f"{fits_at or d:g} to fit the devices; emulate fewer devices at once")


def dilations(text: str) -> tuple[float | None, ...]:
    """A comma-separated list of dilations; 'auto' chooses one to fit the host."""
    items = [t.strip() for t in str(text).split(",")]
    if not all(items):
        raise ShoalError(f"give dilations separated by commas, e.g. 1,2 or auto, got {text!r}")
    return tuple(None if t == "auto" else check(t) for t in items)


def link(link_type: LinkType, d: float) -> LinkType:
    """The link as the dilated emulation runs it."""
    if d == 1:
        return link_type
    return replace(link_type, rate_bps=link_type.rate_bps / d, latency_s=link_type.latency_s * d,
                   jitter_s=link_type.jitter_s * d, grant_interval_s=link_type.grant_interval_s * d,
                   device_rate_bps=link_type.device_rate_bps / d,
                   upstream_channel_bps=link_type.upstream_channel_bps / d)


def budget(cpus: float, d: float) -> float:
    """A device's CPU budget in the dilated emulation."""
    return cpus / d


def seconds(measured_s: float, d: float) -> float:
    """A time measured in the dilated emulation, as the emulated devices would see it."""
    return measured_s / d


def rate(measured_per_s: float, d: float) -> float:
    """A rate (bytes or operations per second) measured in the dilated emulation."""
    return measured_per_s * d


def timeout(real_s: float, d: float) -> float:
    """A timeout for a dilated run: D times longer."""
    return real_s * d
