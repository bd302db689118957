"""How an emulated cluster's links get their rate, delay, jitter and loss.

Three link emulators, chosen by ``choose_emulator``:

``netem``      where the kernel has sch_netem: veth pairs into a bridge, each end
               shaped by netem (rate with per-frame line overhead, half the
               link's delay and jitter, its loss).
``forwarder``  where it has not: shoal-linkemu (``cluster/linkemu.py``), a user-space
               switch whose ports are the devices' eth0 TAP devices.
``tbf``        rates only (``SHOAL_LINK_EMULATOR=tbf``): veth pairs shaped by tbf
               with a bucket of two frames, so the rate holds from the first packet
               on; an isolated packet still crosses at veth speed and no delay is added.

With veth pairs a device's link is shaped at both ends: the device's ``eth0``
egress carries its uplink, the switch port's egress its downlink. A message
between two devices therefore crosses the sender's uplink and the
receiver's downlink, as on a star-topology switch.
"""

from __future__ import annotations

from shoal import environment, proc, verbose
from shoal.profiles import LinkType
from shoal.errors import ShoalError

MTU = 1500


EMULATORS = ("netem", "forwarder", "tbf")
# Line bytes a frame costs beyond what tc counts: FCS, preamble/SFD, inter-frame gap.
LINE_OVERHEAD_B = 24
# Two full frames: tbf's bucket must hold one whole frame plus one that
# arrives while the first drains ("burst 1514" rounds below a frame).
SMALL_BUCKET_B = 2 * (MTU + 14)


def choose_emulator(switch_netns: str) -> str:
    """netem where the kernel has it, else the forwarder; SHOAL_LINK_EMULATOR overrides."""
    asked = environment.LINK_EMULATOR.get() or ""
    if asked:
        if asked not in EMULATORS:
            raise ShoalError(f"{environment.LINK_EMULATOR.name}={asked}: use one of "
                             f"{', '.join(EMULATORS)}")
        if asked == "netem" and not netem_available(switch_netns, "lo"):
            raise ShoalError(f"{environment.LINK_EMULATOR.name}=netem but this kernel has no "
                             "sch_netem; unset it to use the link forwarder")
        return asked
    return "netem" if netem_available(switch_netns, "lo") else "forwarder"


def qdisc_lines(dev: str, link: LinkType, netem: bool) -> list[str]:
    """tc batch lines that shape ``dev``'s egress like one direction of ``link``."""
    rate_Bps = link.rate_bps / 8
    # Queue up to 200 ms of traffic: TCP's own window keeps it short, and a
    # deep enough queue avoids drops that would pull goodput below the rate.
    limit_B = max(int(rate_Bps * 0.2), 4 * 65536)
    if netem:
        # netem's rate adds each frame's own line time (what tbf cannot), and
        # each end of the veth pair carries half the device-to-device delay.
        args = (f"netem delay {round(link.latency_s / 2 * 1e6)}us"
                + (f" {round(link.jitter_s / 2 * 1e6)}us" if link.jitter_s > 0 else "")
                + (f" loss {link.loss * 100:.6f}%" if link.loss > 0 else "")
                + f" rate {int(link.rate_bps)}bit packetoverhead {LINE_OVERHEAD_B}"
                + f" limit {max(1000, limit_B // MTU)}")
        return [f"qdisc replace dev {dev} root handle 1: {args}"]
    tbf = (f"tbf rate {int(link.rate_bps)}bit burst {SMALL_BUCKET_B} limit {limit_B} "
           f"overhead {LINE_OVERHEAD_B}")
    return [f"qdisc replace dev {dev} root handle 1: {tbf}"]


def apply(netns: str, lines: list[str]) -> None:
    """Run tc lines in one namespace with one ``tc -batch`` process."""
    if not lines:
        return
    tc = proc.tool("tc", "shaped links of emulated devices")
    if verbose.enabled():
        for line in lines:  # what the batch does, one command a line, ready to paste
            verbose.show([tc, "-netns", netns, *line.split()])
    done = proc.run([tc, "-netns", netns, "-batch", "-"], input="\n".join(lines) + "\n")
    if not done.ok:
        raise ShoalError(f"tc failed in namespace {netns}: {done.tail(1) or 'no message'}; "
                         "is the sch_tbf module available? (modprobe sch_tbf)")


def netem_available(netns: str, dev: str) -> bool:
    """Try a netem qdisc on ``dev`` once; kernels without sch_netem refuse it."""
    tc = proc.tool("tc", "shaped links of emulated devices")
    if not proc.run([tc, "-netns", netns, "qdisc", "add", "dev", dev, "root", "handle", "9:", "netem",
                     "delay", "1us"]).ok:
        return False
    proc.run([tc, "-netns", netns, "qdisc", "del", "dev", dev, "root"])
    return True


def interface_counters(netns: str, dev: str) -> dict[str, int]:
    """Bytes and packets through ``dev`` (proves traffic crossed a shaped link)."""
    from pyroute2 import IPRoute

    from shoal.cluster import sysns, state

    with sysns.in_netns(str(state.NETNS_DIR / netns)):
        ipr = IPRoute()
    with ipr:
        link = ipr.link("get", ifname=dev)[0]
    stats = link.get("IFLA_STATS64")
    return {"tx_bytes": stats["tx_bytes"], "rx_bytes": stats["rx_bytes"],
            "tx_packets": stats["tx_packets"], "rx_packets": stats["rx_packets"]}
