"""What emulated devices keep doing beside their ranks: a set-top box decoding a programme.

Seed 002 (§II) keeps its cable system "fully operational" while the boxes compute: every box
goes on decoding MPEG-2. A background (``[backgrounds.NAME]`` in the profiles; ``--background
stb=mpeg2-sd`` or ``--emulate 8xstb@mpeg2-sd``) is that work on an emulated device:

* CPU: ``shoal-background decode`` (``shoal/native/background``) on the device's first core,
  the one its first rank runs on, so the two share that core's budget: every frame
  (``fps`` a second of device time) it burns the frame's work, counted in its own CPU time,
  so a core held to its quota stretches the frame rather than shortening the work;
* stream: ``shoal-background send`` in the head, at ``stream_bps`` of device time to each
  programme's multicast group (one copy down a shared plant however many boxes watch) or to
  each box (unicast: one stream each); ``qam`` delivery rides carriers of its own, so only the
  CPU work is emulated. On a shared plant the stream takes the downstream channel that the
  ranks' traffic also needs;
* upload (``delivery = "upload"``, another subscriber sending up the plant): ``shoal-background
  send`` on the device's first core, at ``stream_bps`` of device time to the head-end, where
  one receiver counts what arrived. It takes the upstream channel that the ranks' traffic
  needs too, held to the device's service flow (a rate above it fills the modem's queue).

Refused before anything starts: a background whose work takes a whole device core or more,
and streams that fill a link's downstream. The slack monitor (``cluster.slack``) says, per
point, what share of its core a background took and whether the ranks on that core were
short of the budget for it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from pathlib import Path

from shoal import environment, proc
from shoal.cluster import state
from shoal.errors import ShoalError

TARGET = "background"
# A decoder shows a frame from its buffer, not the moment it is due: MPEG-2 Main Profile at
# Main Level gives the stream a buffer of 1835008 bits (ISO/IEC 13818-2, Table 8-13,
# vbv_buffer_size), 0.49 s at 3.75 Mbit/s. A frame finished within it is on time; it also
# absorbs a device core's CPU period, up to 0.16 s at a set-top box's budget, in which a
# computing rank may use the quota before the decoder wakes.
VBV_BITS = 1835008
BUFFER_MAX_S = 1.0
# Host seconds between a decoder's wake-ups at least (it then works every frame due): each
# wake-up's timer, scheduling and system calls cost the host a few microseconds, which a box
# core of 0.006 of a host core pays at its own scale; 0.1 s stays well inside the buffer.
WAKE_S = 0.1
PORT = 5004  # MPEG transport streams over UDP/RTP usually go to this port
HEAD = "head"  # the head-end's namespace: the streams' sender, the uploads' receiver
CORE = 0     # the core a background shares: the one a device's first rank runs on


def group(index: int) -> str:
    """The multicast group of the ``index``-th programme (administratively scoped addresses)."""
    return f"239.77.0.{index + 1}"


def parse(text: str) -> dict[str, str]:
    """``--background stb=mpeg2-sd[,KIND=NAME...]``: device profile -> background name."""
    out: dict[str, str] = {}
    for item in text.split(","):
        kind, sep, name = (part.strip().lower() for part in item.partition("="))
        if not (kind and sep and name):
            raise ShoalError(f"--background {text!r}: give PROFILE=BACKGROUND,... (e.g. stb=mpeg2-sd)")
        out[kind] = name
    return out


def with_background(spec: str, backgrounds: dict[str, str]) -> str:
    """An emulate spec with ``@NAME`` on every term of each profile ``backgrounds`` names
    (``8xstb`` and ``{"stb": "mpeg2-sd"}`` give ``8xstb@mpeg2-sd``)."""
    from shoal import profiles
    from shoal.cluster import terms

    known = profiles.load_backgrounds()
    for kind, name in backgrounds.items():
        if name not in known:
            raise ShoalError(f"--background {kind}={name}: unknown background (known: "
                             f"{', '.join(sorted(known))}; add [backgrounds.{name}] to a profiles file)")
    return terms.with_suffix(spec, backgrounds, lambda name: name, lambda word: word in known,
                             "--background", "a background")


def check(nodes: list, where: str) -> None:
    """Refuse backgrounds that leave a device's ranks no CPU, or streams that fill a link."""
    for node in nodes:
        background = node.background
        if background is None:
            continue
        share = background.share_of(node.profile)
        if share >= 1:
            raise ShoalError(
                f"{where}: background {background.name} needs {share:.2f} of a {node.profile.name} "
                f"core ({background.frame_work_s:g} reference-core s a frame, {background.fps:g} "
                f"frames a second, on a core of speed {node.profile.speed:g}), more than the "
                "core's whole budget: choose a lighter background or a faster device")
    for link, load, what in _link_loads(nodes):
        if load >= link.rate_bps:
            raise ShoalError(f"{where}: {what} need {load / 1e6:g} Mbit/s down {link.name}, whose "
                             f"downstream carries {link.rate_bps / 1e6:g}: nothing would be left for "
                             "the ranks; fewer devices, a multicast background (one copy per "
                             "programme) or a faster link")


def _link_loads(nodes: list) -> list[tuple]:
    """(link, bit/s of streams its downstream carries, what they are) per shared medium, and
    per device on a link of its own."""
    loads = []
    shared: dict[str, list] = {}
    for node in nodes:
        background = node.background
        if background is None or not background.on_link or background.delivery == "upload":
            continue
        if node.link.shared:
            shared.setdefault(node.link.name, []).append(node)
        else:
            loads.append((node.link, background.stream_bps, f"{node.name}'s {background.name} stream"))
    for members in shared.values():
        link = members[0].link
        programmes = {n.background.name: n.background for n in members
                      if n.background.delivery == "multicast"}
        own = [n for n in members if n.background.delivery == "unicast"]
        load = sum(b.stream_bps for b in programmes.values()) + sum(n.background.stream_bps for n in own)
        parts = [f"{len(programmes)} multicast programme(s)"] if programmes else []
        if own:
            fit = max(0, math.ceil(link.rate_bps / own[0].background.stream_bps) - 1)
            parts.append(f"{len(own)} streams of their own (at most {fit} fit)")
        loads.append((link, load, " and ".join(parts)))
    return loads


def binary() -> Path:
    from shoal.mpi import build

    return build.build_host(TARGET)


def start(cluster_id: str, nodes: list, record: dict, placement: str, dilation: float,
          directory: Path, addresses: dict[str, str]) -> None:
    """Each device's decoder (or upload) on its first core, then the head-end's streams and
    the receiver of the uploads; every process is in a namespace of the cluster, so its
    teardown ends them. Recorded in ``record``."""
    program = str(binary())
    env = {environment.STATE_DIR.name: str(state.root()), environment.DEVICE_CORE.name: str(CORE)}
    programmes: dict[str, int] = {}
    streams: dict[str, list[str]] = {}
    for node in nodes:
        background = node.background
        if background is None:
            continue
        entry = record["nodes"][node.name]
        stats = directory / f"background-{node.name}.json"
        if background.decodes:
            period = dilation / background.fps  # a device second lasts D host seconds
            # Its share of the core's budget (the core's host CPU a second, already divided by D).
            work = background.share_of(node.profile) * float(entry["cpu_fraction"]) * period
            argv = [program, "decode", "--port", str(PORT), "--period-s", f"{period:.9f}",
                    "--work-s", f"{work:.9f}", "--buffer-s", f"{buffer_s(background) * dilation:.9f}",
                    "--wake-s", f"{min(WAKE_S, buffer_s(background) * dilation / 2):.9f}",
                    "--stats", str(stats)]
            described = {"period_s": period, "work_s": work}
        else:  # an upload: the device's only background process is its sender
            to = f"{record['head']['address']}:{PORT}"
            argv = [program, "send", "--to", to, "--rate-bps",
                    f"{background.stream_bps / dilation:.6g}", "--stats", str(stats)]
            described = {"upload_to": to, "rate_bps": background.stream_bps / dilation}
        if background.on_link and background.delivery == "multicast":
            index = programmes.setdefault(background.name, len(programmes))
            argv += ["--group", group(index)]
            streams.setdefault(background.name, [f"{group(index)}:{PORT}"])
        elif background.on_link and background.delivery == "unicast":
            streams.setdefault(background.name, []).append(f"{addresses[node.name]}:{PORT}")
        # Through the device's placement onto core CORE (oncore reads the core from the variable).
        pid = _start([sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", cluster_id,
                      "--run", node.name, "--", placement, environment.DEVICE_CORE.name, *argv],
                     env, f"the background of {node.name} ({background.name})")
        entry["background"] = {**background.describe(), "pid": pid, "core": CORE,
                               "share": background.share_of(node.profile), **described,
                               "stats": str(stats)}
    if any(node.background is not None and node.background.delivery == "upload" for node in nodes):
        stats = directory / "uploads-received.json"
        pid = _start([sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", cluster_id,
                      "--run", HEAD, "--", program, "decode", "--port", str(PORT), "--period-s",
                      f"{WAKE_S:.9f}", "--work-s", "0", "--stats", str(stats)],
                     env, "the head-end's receiver of the uploads")
        record["upload_receiver"] = {"pid": pid, "address": record["head"]["address"],
                                     "port": PORT, "stats": str(stats)}
    by_name = {n.background.name: n.background for n in nodes if n.background is not None}
    sent = []
    for name, destinations in streams.items():
        stats = directory / f"stream-{name}.json"
        rate = by_name[name].stream_bps / dilation
        pid = _start([sys.executable, "-m", "shoal.cluster.nsexec", "--cluster", cluster_id,
                      "--run", HEAD, "--", program, "send", "--to", ",".join(destinations),
                      "--rate-bps", f"{rate:.6g}", "--stats", str(stats)],
                     env, f"the head-end's {name} stream")
        sent.append({"background": name, "pid": pid, "destinations": destinations,
                     "rate_bps": rate, "stats": str(stats)})
    if sent:
        record["background_streams"] = sent


def buffer_s(background) -> float:
    """Device seconds a decoder may finish a frame after it is due (its stream's buffer):
    the MPEG-2 MP@ML buffer at the stream's rate, at least two frames, at most a second."""
    held = VBV_BITS / background.stream_bps if background.stream_bps > 0 else BUFFER_MAX_S
    return min(BUFFER_MAX_S, max(2 / background.fps, held))


def _start(argv: list[str], env: dict[str, str], what: str) -> int:
    return proc.start_helper(argv, env, what)


def counters(record: dict, wait_s: float = 2.0) -> dict:
    """What each background and stream has done so far (their JSON counters, asked for with
    SIGUSR1): {"devices": {node: {...}}, "streams": {name: {...}}, "uploads_received":
    {"head": {...}}}; a process that is gone or does not answer within ``wait_s`` is left out."""
    asked = []
    for name, entry in record.get("nodes", {}).items():
        if entry.get("background"):
            asked.append(("devices", name, entry["background"]))
    for stream in record.get("background_streams", []):
        asked.append(("streams", stream["background"], stream))
    if record.get("upload_receiver"):
        asked.append(("uploads_received", HEAD, record["upload_receiver"]))
    before = {}
    for _, _, entry in asked:
        path = Path(entry["stats"])
        before[path] = path.stat().st_mtime_ns if path.exists() else 0
        try:
            os.kill(int(entry["pid"]), signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            pass
    out: dict = {"devices": {}, "streams": {}, "uploads_received": {}}
    deadline = time.monotonic() + wait_s
    for kind, name, entry in asked:
        path = Path(entry["stats"])
        while time.monotonic() < deadline:
            if path.exists() and path.stat().st_mtime_ns != before[path]:
                break
            time.sleep(0.02)
        try:
            out[kind][name] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out
