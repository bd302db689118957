"""Default devices, servers and uplinks for the offload decision, each number with its source.

Every profile carries ``sources``: field name -> where the number comes
from. Seed papers are named by their file in the project's reading list
(000: the MinnowBoard MAX / NUC thesis; 002: the set-top-box cluster on
DOCSIS). Numbers marked "assumption" or "order of magnitude" are there so
the decision can run before anything is measured; replace them with
measurements (``dataclasses.replace``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean

# Thesis 000, Table 5.6 (MinnowBoard MAX, one board, eight MPI benchmarks) and
# Table 5.7 (NUC D54250WYK): the MAX row per benchmark and the idle figure.
MINNOWBOARD_IDLE_W = 2.5663
MINNOWBOARD_MAX_W = (5.6139, 5.875, 5.934, 5.823, 5.749, 5.853, 5.761, 5.703)
MINNOWBOARD_AVG_W = (4.234, 2.231, 2.876, 4.9871, 4.7865, 4.8721, 4.1235, 4.8563)
NUC_IDLE_W = 4.4801
NUC_MAX_W = (20.3010, 20.1011, 20.4240, 20.8761, 19.9573, 20.8436, 20.3242, 20.3452)
NUC_AVG_W = (18.0742, 19.2853, 18.6589, 18.2385, 18.8423, 19.4739, 18.8664, 19.6473)

_BUSY_NOTE = ("mean of the MAX row over the eight MPI benchmarks; the averages mix load with waiting "
              "(the MinnowBoard's Reduce average, 2.231 W, is below its idle figure), so the MAX row is the "
              "fully-busy draw")


@dataclass(frozen=True)
class DeviceProfile:
    """One edge device: idle and fully-busy power, and its processing cost per byte."""

    name: str
    idle_W: float
    busy_W: float
    s_per_B: float  # seconds one device needs per byte of the stream
    sources: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class ServerProfile:
    """A datacenter server: power, processing cost per byte, and the facility overhead (PUE)."""

    name: str
    idle_W: float
    busy_W: float
    s_per_B: float
    pue: float  # facility power / IT power: cooling and distribution on top of the server
    sources: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class UplinkProfile:
    """The path from the devices to the datacenter.

    ``device_J_per_bit`` is what sending costs the device beyond its idle
    draw, per bit; ``device_active_W`` is radio power drawn while a
    transfer is under way (charged for the fraction of time the link is
    busy); ``network_J_per_bit`` is the energy of the access and core
    network per bit carried (not paid by the device, still paid).
    ``rtt_s`` is the round trip: data up, result back.
    """

    name: str
    bandwidth_Bps: float
    rtt_s: float
    device_J_per_bit: float
    device_active_W: float
    network_J_per_bit: float
    sources: dict = field(default_factory=dict, compare=False)


# Aslan, Mayers, Koomey, France, "Electricity Intensity of Internet Data Transmission",
# J. Industrial Ecology 22(4), 2018: 0.06 kWh/GB in 2015, halving about every two years.
# Extrapolated to 2023: 0.06 / 2**4 kWh/GB = 13.5 kJ per 8e9 bit ~= 1.7e-6 J/bit.
INTERNET_J_PER_BIT = 0.06 / 2**4 * 3.6e6 / 8e9
_INTERNET_SOURCE = ("Aslan et al., J. Industrial Ecology 22(4) 2018: 0.06 kWh/GB in 2015 halving every ~2 years, "
                    "extrapolated to 2023 (~1.7e-6 J/bit); an average (attributional) figure, the marginal "
                    "energy of one more bit is lower")
_ETHERNET_DEVICE_SOURCE = ("order of magnitude: a Gigabit Ethernet PHY draws ~0.5-1 W whether busy or not, so the "
                           "extra cost of a bit is the CPU's send path, ~1e-9 J/bit on a small core")

MINNOWBOARD_MAX = DeviceProfile(
    name="MinnowBoard MAX (Atom E3825)",
    idle_W=MINNOWBOARD_IDLE_W,
    busy_W=fmean(MINNOWBOARD_MAX_W),
    s_per_B=1e-7,
    sources={
        "idle_W": "seed 000, Table 5.6: average power at idle 2.5663 W",
        "busy_W": f"seed 000, Table 5.6: {_BUSY_NOTE}",
        "s_per_B": "assumption: ~130 cycles per byte at the E3825's 1.33 GHz (seed 000, Table 4.1), the order of a "
                   "light per-byte analysis; measure your workload",
    },
)

NUC_D54250WYK = ServerProfile(
    name="Intel NUC D54250WYK (Core i5-4250U), the thesis' reference machine, hosted in a datacenter",
    idle_W=NUC_IDLE_W,
    busy_W=fmean(NUC_MAX_W),
    s_per_B=2.5e-8,
    pue=1.58,
    sources={
        "idle_W": "seed 000, Table 5.7: average power at idle 4.4801 W",
        "busy_W": f"seed 000, Table 5.7: {_BUSY_NOTE} (the averages are 18.1-19.6 W)",
        "s_per_B": "assumption: 4x one MinnowBoard (same 1.3 GHz base clock, seed 000 Tables 4.1/4.2; 4 threads vs "
                   "2 and larger cores); measure your workload",
        "pue": "Uptime Institute Global Data Center Survey 2023: average PUE 1.58",
    },
)

DOCSIS2 = UplinkProfile(
    name="DOCSIS 2.0 cable upstream",
    bandwidth_Bps=27e6 / 8,
    rtt_s=0.02,
    device_J_per_bit=1e-9,
    device_active_W=0.0,
    network_J_per_bit=INTERNET_J_PER_BIT,
    sources={
        "bandwidth_Bps": "seed 002: DOCSIS operates at up to 27 Mbit/s upstream",
        "rtt_s": "order of magnitude: cable access round trips are ~10-30 ms",
        "device_J_per_bit": _ETHERNET_DEVICE_SOURCE + " (device to cable modem over Ethernet)",
        "device_active_W": "the cable modem is on for other uses; not charged",
        "network_J_per_bit": _INTERNET_SOURCE,
    },
)

ETHERNET = UplinkProfile(
    name="Gigabit Ethernet to a wired Internet access",
    bandwidth_Bps=1e9 / 8,
    rtt_s=0.01,
    device_J_per_bit=1e-9,
    device_active_W=0.0,
    network_J_per_bit=INTERNET_J_PER_BIT,
    sources={
        "bandwidth_Bps": "MinnowBoard MAX Gigabit Ethernet port; the access link may be slower",
        "rtt_s": "order of magnitude: ~10 ms to a regional datacenter over fibre",
        "device_J_per_bit": _ETHERNET_DEVICE_SOURCE,
        "device_active_W": "PHY draw is part of idle; not charged",
        "network_J_per_bit": _INTERNET_SOURCE,
    },
)

WIFI = UplinkProfile(
    name="Wi-Fi (802.11n) uplink",
    bandwidth_Bps=20e6 / 8,
    rtt_s=0.03,
    device_J_per_bit=283.17e-3 / 1e6,
    device_active_W=0.13286,
    network_J_per_bit=INTERNET_J_PER_BIT,
    sources={
        "bandwidth_Bps": "order of magnitude: ~20 Mbit/s effective 802.11n uplink",
        "rtt_s": "order of magnitude: ~30 ms through a home access to a datacenter",
        "device_J_per_bit": "Huang et al., MobiSys 2012 (4G LTE power), Wi-Fi uplink model: 283.17 mW per Mbit/s",
        "device_active_W": "Huang et al., MobiSys 2012, Wi-Fi model base power 132.86 mW",
        "network_J_per_bit": _INTERNET_SOURCE,
    },
)

LTE = UplinkProfile(
    name="4G LTE uplink",
    bandwidth_Bps=5.64e6 / 8,
    rtt_s=0.07,
    device_J_per_bit=438.39e-3 / 1e6,
    device_active_W=1.28804,
    network_J_per_bit=INTERNET_J_PER_BIT,
    sources={
        "bandwidth_Bps": "Huang et al., MobiSys 2012: median LTE uplink ~5.6 Mbit/s",
        "rtt_s": "Huang et al., MobiSys 2012: LTE round trips ~70 ms",
        "device_J_per_bit": "Huang et al., MobiSys 2012, LTE uplink model: 438.39 mW per Mbit/s",
        "device_active_W": "Huang et al., MobiSys 2012, LTE model base power 1288.04 mW",
        "network_J_per_bit": _INTERNET_SOURCE,
    },
)

DEVICES = {"minnowboard-max": MINNOWBOARD_MAX}
SERVERS = {"nuc-d54250wyk": NUC_D54250WYK}
UPLINKS = {"docsis2": DOCSIS2, "ethernet": ETHERNET, "wifi": WIFI, "lte": LTE}
