"""Start and stop shoal-linkemu, the user-space switch of emulated links without netem.

The forwarder (``shoal/native/linkemu``) creates each device's ``eth0`` as
a TAP device inside the device's network namespace and runs in the cluster's
switch namespace, so killing the namespaces' processes (``state.remove``)
stops it, and its TAP devices vanish with it. Each port's uplink (device to
switch) and downlink (switch to device) get the link's rate, half its
latency and jitter, and its loss.

A cluster spread over hosts has one forwarder per host, and each reaches the others'
(``Peers``: a UDP port on the host, the other hosts' forwarders and the MACs of the
devices behind each); frames cross in UDP datagrams and the receiver delivers them at
the emulated time (linkemu.c says how).
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

from shoal import proc
from shoal.cluster import sysns
from shoal.profiles import LinkType
from shoal.errors import ShoalError

TARGET = "linkemu"
# A queue holds 200 ms of traffic (at least 256 KiB), like the tbf limit it replaces:
# TCP's own window keeps it short, and a deep queue avoids drops below the rate.
QUEUE_S = 0.2
QUEUE_MIN_B = 256 * 1024
READY_TIMEOUT_S = 10.0
MAX_CHANNELS = 16  # shared media channels the forwarder has (MAX_CHANNELS in linkemu.c)


def binary() -> Path:
    from shoal.mpi import build

    return build.build_host(TARGET)


def direction(link: LinkType | None, channel: int = 0, upstream: bool = False, sharing: int = 1) -> str:
    """One direction of a port as the forwarder reads it: rate/delay/jitter/loss/limit, and on a
    shared medium (``channel`` > 0, ``sharing`` ports on it) /grant/channel, and for an
    upstream capped below its channel /channel_bps (the rate is then the device's own, and
    the limit the bytes the device holds until the channel has carried them), then its service
    flow's /priority where one is set."""
    if link is None:  # unshaped (the head's port)
        return "0/0/0/0/0"
    limit = max(QUEUE_MIN_B, int(link.rate_bps / 8 * QUEUE_S)) * max(1, sharing)
    if channel and upstream and link.capped:
        # What the device itself holds until the channel has carried it (its modem's buffer).
        limit = int(link.device_buffer_B) or max(QUEUE_MIN_B, int(link.upstream_bps / 8 * QUEUE_S))
    delay_s = link.latency_s / 2
    grant_ns = 0
    rate_bps, capped = link.rate_bps, ""
    if channel:
        delay_s = channel_delay_s(link)
        grant_ns = round(link.grant_interval_s * 1e9) if upstream else 0
        if upstream:   # the upstream channel (slower than the downstream where fewer are bonded)
            rate_bps = link.up_channel_bps
        if upstream and link.capped:
            rate_bps, capped = link.upstream_bps, f"/{link.up_channel_bps:.6g}"
        if upstream and link.device_priority is not None:   # paced at its flow, served by priority
            rate_bps = link.upstream_bps
            capped = f"/{link.up_channel_bps:.6g}/{link.device_priority}"
    text = (f"{rate_bps:.6g}/{round(delay_s * 1e9)}/"
            f"{round(link.jitter_s / 2 * 1e9)}/{link.loss:.9g}/{limit}")
    return text + (f"/{grant_ns}/{channel}{capped}" if channel else "")


def channel_delay_s(link: LinkType) -> float:
    """Each way's delay on a shared medium: the grant wait is part of the link's latency,
    the rest is delay, half each way."""
    return max(0.0, link.latency_s - link.grant_wait_s) / 2


@dataclass(frozen=True)
class Port:
    netns_path: str
    ifname: str
    link: LinkType | None
    # Shared medium: the channels its upstream and downstream transmit on (0: its own),
    # and how many ports share them.
    up_channel: int = 0
    down_channel: int = 0
    sharing: int = 1
    # The device's MAC, learned at start (None: learned from its first frame).
    mac: str | None = None
    # A device of a shared medium split over hosts (linkemu.c): on the medium's owner, a
    # proxy (``netns_path`` unused) of the device behind the peer ``proxy`` ("ADDR:PORT"),
    # numbered ``id`` there; on the device's host, relayed (``relay``: the owner's
    # "ADDR:PORT") with no link of its own here.
    proxy: str | None = None
    relay: str | None = None
    id: int = 0

    def argument(self) -> str:
        if self.proxy:
            up = direction(self.link, self.up_channel, True, self.sharing)
            down = direction(self.link, self.down_channel, False, self.sharing)
            return f"{self.proxy},{self.id},{up},{down},{self.mac}"
        if "," in self.netns_path or "," in self.ifname:
            raise ShoalError(f"forwarder port {self.netns_path}: paths with ',' are not supported")
        up = direction(self.link, self.up_channel, True, self.sharing)
        down = direction(self.link, self.down_channel, False, self.sharing)
        return f"{self.netns_path},{self.ifname},{up},{down}" + (f",{self.mac}" if self.mac else "")


@dataclass(frozen=True)
class Peer:
    """Another host's forwarder (its underlay address and UDP port) and the MACs of the
    devices behind it."""

    address: str
    port: int
    macs: tuple[str, ...]

    def argument(self) -> str:
        return ",".join([f"{self.address}:{self.port}", *self.macs])


@dataclass(frozen=True)
class Peers:
    """This forwarder's links to other hosts: the UDP port it binds on this host, the
    cluster's key (datagrams of any other are dropped) and the other hosts' forwarders."""

    port: int
    key: str
    others: tuple[Peer, ...]
    # A shared medium split over hosts, owned here: how long after the model's time what
    # touches its channel runs (so frames relayed from other hosts are in time; 0: none).
    lookahead_ns: int = 0
    # The port's socket already bound in the host's network namespace, inherited by the
    # forwarder (an ordinary user's, which runs in a user namespace); None: it binds the port.
    fd: int | None = None

    def arguments(self) -> list[str]:
        # One frame per datagram: the devices hand over no TCP super-frames (--no-tso).
        bound = ["--udp", str(self.port)] if self.fd is None else ["--udp-fd", str(self.fd)]
        args = [*bound, "--key", self.key, "--no-tso"]
        for peer in self.others:
            args += ["--peer", peer.argument()]
        if self.lookahead_ns:
            args += ["--lookahead", str(self.lookahead_ns)]
        return args


def shared_channels(links: list[LinkType | None]) -> list[tuple[int, int, int]]:
    """Per port: (upstream channel, downstream channel, ports sharing them); every link type
    marked shared is one medium with one channel each way, the others (0, 0, 1)."""
    media: dict[str, int] = {}
    for link in links:
        if link is not None and link.shared and link.name not in media:
            media[link.name] = len(media)
    if 2 * len(media) > MAX_CHANNELS:
        raise ShoalError(f"at most {MAX_CHANNELS // 2} shared media in one emulated cluster")
    counts = {name: sum(1 for link in links if link is not None and link.name == name) for name in media}
    return [(2 * media[link.name] + 1, 2 * media[link.name] + 2, counts[link.name])
            if link is not None and link.name in media else (0, 0, 1) for link in links]


def argv(ports: list[Port], switch_netns: str | None, stats: Path | None,
         log: Path | None = None, seed: int | None = None, peers: Peers | None = None) -> list[str]:
    args = [str(binary())]
    if peers is not None:
        args += peers.arguments()
    if switch_netns:
        args += ["--switch", switch_netns]
    if stats:
        args += ["--stats", str(stats)]
    if log:
        args += ["--log", str(log)]
    if seed is not None:
        args += ["--seed", str(seed)]
    for port in ports:
        args += ["--proxy" if port.proxy else "--port", port.argument()]
    for number, port in enumerate(ports):  # a proxy counts: the forwarder numbers every port
        if port.relay:
            args += ["--relay", f"{number},{port.id},{port.relay}"]
    return args


def start(ports: list[Port], switch_netns: str | None, stats: Path | None,
          log: Path | None = None, seed: int | None = None,
          on_spawn: Callable[[dict], None] | None = None,
          peers: Peers | None = None) -> tuple[dict, IO[bytes]]:
    """Start the forwarder, wait until every TAP exists.

    Returns {pid, start} for the state record, and its control pipe (see
    set_host_latency).

    It runs in a session of its own, so a persistent cluster's forwarder
    outlives the command that brought the cluster up.
    """
    command = argv(ports, switch_netns, stats, log, seed, peers)
    inherited = (peers.fd,) if peers is not None and peers.fd is not None else ()
    process = proc.start(command, stdin=proc.PIPE, stdout=proc.PIPE, stderr=proc.PIPE, text=False,
                         pass_fds=inherited)
    entry = {"pid": process.pid, "start": sysns.process_start_time(process.pid)}
    if on_spawn is not None:
        on_spawn(entry)  # e.g. into the state record, before it creates anything
    ready, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT_S)
    line = process.stdout.readline().decode() if ready else ""
    if line.strip() != "ready":
        process.stop()
        err = process.stderr.read().decode().strip()
        if "bind UDP port" in err:
            raise ShoalError(f"{err.removeprefix('shoal-linkemu: ')}; another program (or cluster) holds "
                             "it: bring the cluster up under another --name")
        raise ShoalError(f"the link forwarder did not start: {err or 'no message'}; "
                         "is /dev/net/tun there (modprobe tun)?")
    process.stdout.close()
    process.stderr.close()
    # The state record names it from here on, and stop() or state.remove() end
    # it; its stdin stays open for set_host_latency().
    process.detach()
    return entry, process.stdin


def set_host_latency(control: IO[bytes], seconds: float,
                     by_port: dict[int, float] | None = None) -> None:
    """Tell the forwarder the host's own latency, to take off the links' delays (``by_port``:
    port index -> its own value instead); close control."""
    lines = [f"host_latency_ns {max(0, round(seconds * 1e9))}"]
    lines += [f"port_host_latency_ns {i} {max(0, round(v * 1e9))}" for i, v in (by_port or {}).items()]
    try:
        control.write(("\n".join(lines) + "\n").encode())
        control.flush()
    except BrokenPipeError:
        pass
    finally:
        try:
            control.close()
        except BrokenPipeError:
            pass


@dataclass(frozen=True)
class HostLatency:
    """The host's own one-way latency (its TCP stacks, the forwarder) beyond the links',
    for ranks that poll while they wait and for ranks that sleep until their socket wakes
    them (the kernel's wake-up on top)."""

    polling_s: float
    sleeping_s: float


PROBE_SIZE_B = 64
PROBE_DEADLINE_S = 10.0


def _recv_exact(sock, size: int, poll: bool, deadline: float) -> bool:
    got = 0
    while got < size:
        if time.monotonic() > deadline:
            return False
        try:
            chunk = sock.recv(size - got)
        except BlockingIOError:
            continue  # polling: try again at once
        if not chunk:
            return False
        got += len(chunk)
    return True


def measure_host_latency(netns_a: str, netns_b: str, address_b: str, model_s: float,
                         rounds: int = 300) -> HostLatency:
    """One-way latency of 64-byte TCP messages from a to b beyond what the links add.

    A ping-pong between a socket in each namespace, the echo in a child process
    (two threads of one interpreter would hand the GIL back and forth, which no
    MPI rank does): first with blocking receives (the rank sleeps and the kernel
    wakes it), then polling non-blocking ones. The 20th percentile of each keeps
    the host's own stack cost and leaves out moments when another process held
    the CPU.
    """
    import socket

    with sysns.in_netns(netns_b):
        server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((address_b, 0))
    server.listen(1)
    port = server.getsockname()[1]
    with sysns.in_netns(netns_a):
        client = socket.socket()
    phases = (False, True)  # sleeping, then polling
    child = os.fork()
    if child == 0:  # the echo: only socket calls, then _exit (no atexit, no threads)
        ok = True
        try:
            client.close()
            server.settimeout(PROBE_DEADLINE_S)
            conn, _ = server.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            deadline = time.monotonic() + PROBE_DEADLINE_S
            for poll in phases:
                for _ in range(rounds + 20):
                    conn.settimeout(0.0 if poll else PROBE_DEADLINE_S)  # 0: non-blocking
                    if not _recv_exact(conn, PROBE_SIZE_B, poll, deadline):
                        raise OSError("probe ended")
                    conn.settimeout(PROBE_DEADLINE_S)
                    conn.sendall(b"x" * PROBE_SIZE_B)
        except OSError:
            ok = False
        os._exit(0 if ok else 1)
    server.close()
    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        client.settimeout(PROBE_DEADLINE_S)
        client.connect((address_b, port))
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        deadline = time.monotonic() + PROBE_DEADLINE_S
        payload = b"x" * PROBE_SIZE_B
        for poll in phases:
            for i in range(rounds + 20):
                t0 = time.perf_counter()
                client.settimeout(PROBE_DEADLINE_S)
                client.sendall(payload)
                client.settimeout(0.0 if poll else PROBE_DEADLINE_S)
                if not _recv_exact(client, PROBE_SIZE_B, poll, deadline):
                    raise OSError("probe ended")
                if i >= 20:
                    times[poll].append((time.perf_counter() - t0) / 2)
    except OSError:
        return HostLatency(0.0, 0.0)
    finally:
        client.close()
        os.waitpid(child, 0)

    def beyond(samples: list[float]) -> float:
        samples.sort()
        return max(0.0, samples[len(samples) // 5] - model_s)

    return HostLatency(beyond(times[True]), beyond(times[False]))


def alive(entry: dict) -> bool:
    """Whether the forwarder a record names still runs (a zombie waiting for its parent does not)."""
    pid = entry.get("pid")
    if not pid or sysns.process_start_time(pid) != entry.get("start"):
        return False
    info = proc.stat(pid)
    return info is not None and info.alive


def stop(entry: dict, timeout_s: float = 5.0) -> None:
    """End a forwarder named by a state record entry (SIGTERM: it writes its statistics)."""
    if not alive(entry):
        return
    pid = entry["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _reap_child(pid)
        if not alive(entry):
            return
        time.sleep(0.005)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap_child(pid)


def _reap_child(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stats(entry: dict, path: Path, timeout_s: float = 2.0) -> dict:
    """Ask a running forwarder for its counters (SIGUSR1) and read them."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    os.kill(entry["pid"], signal.SIGUSR1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_mtime_ns != before:
            return json.loads(path.read_text())
        time.sleep(0.005)
    raise ShoalError(f"the link forwarder (pid {entry['pid']}) did not write {path}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc, while it runs)."""
    info = proc.stat(pid)
    if info is None:
        raise OSError(f"process {pid} is gone")
    return info.cpu_s
