"""Uplinks from the devices to a datacenter for the offload decision, each number with its source.

The devices and the server themselves are device profiles
(``shoal.profiles``, numbers in ``shoal/data/profiles.toml``). Numbers
marked "assumption" or "order of magnitude" are there so the decision can
run before anything is measured; replace them with measurements
(``dataclasses.replace``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


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

UPLINKS = {"docsis2": DOCSIS2, "ethernet": ETHERNET, "wifi": WIFI, "lte": LTE}
