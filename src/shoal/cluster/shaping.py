"""Shape an emulated link with tc: a rate (tbf), and delay/loss (netem) where the kernel has it.

A device's link is shaped at both ends of its veth pair: the device's
``eth0`` egress carries its uplink, the switch port's egress its downlink.
A message between two devices therefore crosses the sender's uplink and the
receiver's downlink, as on a star-topology switch.
"""

from __future__ import annotations

from shoal import proc, verbose
from shoal.profiles import LinkType
from shoal.errors import ShoalError

MTU = 1500


def qdisc_lines(dev: str, link: LinkType, netem: bool) -> list[str]:
    """tc batch lines that shape ``dev``'s egress like ``link``."""
    rate_Bps = link.rate_bps / 8
    # Burst: one timer tick (4 ms) of traffic, never below two full GSO
    # packets, so tbf does not cut the rate through timer granularity.
    burst = max(int(rate_Bps * 0.004), 2 * 65536)
    # Queue up to 200 ms of traffic: TCP's own window keeps it short, and a
    # deep enough queue avoids drops that would pull goodput below the rate.
    limit = max(int(rate_Bps * 0.2), 4 * burst)
    tbf = f"tbf rate {int(link.rate_bps)}bit burst {burst} limit {limit}"
    if netem and (link.latency_s > 0 or link.loss > 0 or link.jitter_s > 0):
        netem_args = f"netem delay {int(round(link.latency_s * 1e6))}us"
        if link.jitter_s > 0:
            netem_args += f" {int(round(link.jitter_s * 1e6))}us"
        if link.loss > 0:
            netem_args += f" loss {link.loss * 100:.4f}%"
        # netem's own queue must hold what tbf lets through during the delay.
        netem_args += f" limit {max(1000, int(rate_Bps * (link.latency_s + 0.2) / MTU) + 1000)}"
        return [f"qdisc replace dev {dev} root handle 1: {netem_args}",
                f"qdisc replace dev {dev} parent 1: handle 2: {tbf}"]
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
