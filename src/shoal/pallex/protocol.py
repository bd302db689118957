"""The stage side of Pallex: inputs as passed sockets, outputs to socket paths, one report.

Inputs arrive as listening AF_UNIX sockets from fd 3 on, named by
``LISTEN_FDNAMES`` (the sending stage), counted by ``LISTEN_FDS`` and valid
only when ``LISTEN_PID`` is this process: sd_listen_fds(3), exactly as systemd
and ``systemd-socket-activate`` pass them. Outputs go to the paths in
``PALLEX_OUTPUTS`` (``to=path,...``). A stream carries messages framed as an
8-byte big-endian length and the payload, then EOF.

Senders write from a thread, so a stage's own work ends while its receiver is
not yet running; the process exits once the last byte has been read. Every
stage prints one ``PALLEX {json}`` line (bytes and SHA-256 per edge, times);
a sink (``PALLEX_DONE`` set) also sends its result line to the done socket.
The same program runs unchanged under systemd, ``systemd-socket-activate`` and
``shoal pallex run``.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import selectors
import socket
import struct
import sys
import threading
import time

from shoal.pallex import storage

SD_LISTEN_FDS_START = 3
_HEADER = struct.Struct(">Q")
_CONNECT_TRIES_S = 5.0


class ProtocolError(RuntimeError):
    """The environment or a stream does not follow the protocol."""


def listen_fds(unset: bool = True) -> dict[str, socket.socket]:
    """The listening sockets passed to this process, by name (sd_listen_fds semantics)."""
    env = os.environ
    try:
        if int(env.get("LISTEN_PID", "0")) != os.getpid():
            return {}
        count = int(env.get("LISTEN_FDS", "0"))
    except ValueError:
        raise ProtocolError("LISTEN_PID/LISTEN_FDS are not numbers") from None
    names = env.get("LISTEN_FDNAMES", "").split(":") if env.get("LISTEN_FDNAMES") else []
    if unset:
        for key in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
            env.pop(key, None)
    out = {}
    for i in range(count):
        name = names[i] if i < len(names) and names[i] else f"fd{SD_LISTEN_FDS_START + i}"
        sock = socket.socket(fileno=SD_LISTEN_FDS_START + i)
        sock.set_inheritable(False)
        out[name] = sock
    return out


def outputs_from_env() -> dict[str, str]:
    text = os.environ.get("PALLEX_OUTPUTS", "")
    out = {}
    for item in filter(None, text.split(",")):
        dst, sep, path = item.partition("=")
        if not sep or not dst or not path:
            raise ProtocolError(f"PALLEX_OUTPUTS item {item!r} is not to=path")
        out[dst] = path
    return out


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = conn.recv(min(n - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise ProtocolError(f"stream ended inside a message ({got} of {n} bytes)")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_messages(conn: socket.socket) -> list[bytes]:
    """All framed messages of one stream, until EOF."""
    messages = []
    while True:
        head = _recv_exact(conn, _HEADER.size)
        if head is None:
            return messages
        (size,) = _HEADER.unpack(head)
        body = _recv_exact(conn, size) if size else b""
        if body is None:
            raise ProtocolError(f"stream ended before a {size}-byte message")
        messages.append(body)


class _Sender(threading.Thread):
    """One output edge: connects when the first message is ready, writes in order."""

    def __init__(self, dst: str, path: str) -> None:
        super().__init__(name=f"pallex-send-{dst}", daemon=True)
        self.dst, self.path = dst, path
        self.queue: queue.Queue[bytes | None] = queue.Queue()
        self.hash = hashlib.sha256()
        self.bytes = 0
        self.messages = 0
        self.error: str | None = None
        self.t_connect: float | None = None
        self.t_done: float | None = None

    def run(self) -> None:
        conn = None
        try:
            while True:
                item = self.queue.get()
                if conn is None:
                    conn = self._connect()
                if item is None:
                    break
                conn.sendall(_HEADER.pack(len(item)))
                conn.sendall(item)
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)  # returns at the receiver's close: all bytes were read
            self.t_done = time.time()
        except OSError as exc:
            self.error = f"sending to {self.dst} over {self.path}: {exc}"
        finally:
            if conn is not None:
                conn.close()

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + _CONNECT_TRIES_S
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.path)
                self.t_connect = time.time()
                return sock
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def put(self, payload: bytes) -> None:
        self.hash.update(payload)
        self.bytes += len(payload)
        self.messages += 1
        self.queue.put(payload)


class StageIO:
    """A stage's inputs, outputs and report; use as a context manager.

        with StageIO() as io:
            image = io.receive()["cap"][0]
            io.send("clas", features)
            io.result({"label": 3})      # a sink's result, sent to the done socket
    """

    def __init__(self) -> None:
        self.stage = os.environ.get("PALLEX_STAGE", os.path.basename(sys.argv[0]))
        self.t_start = time.time()
        self.m_start = time.monotonic()
        self.inputs = listen_fds()
        self.output_paths = outputs_from_env()
        self.senders: dict[str, _Sender] = {}
        self.received: dict[str, dict] = {}
        self.summary: dict = {}
        # CPU seconds that are not the stage's own work: standing in for hardware (the synthetic
        # camera) and measuring what the stage loaded.
        self.stand_in_cpu_s = 0.0
        # Bytes this stage moved over a network (here: loopback), so a device's link can be charged for them.
        self.network_bytes = 0
        # What the stand-in hardware loaded from storage, not the stage's own: bytes it added to
        # packages or files the stage had loaded too, and those only it brought in (left out
        # whole, with the pages its work touches later).
        self.stand_in_loaded: dict[str, int] = {}
        self.stand_in_only: set[str] = set()
        self.t_inputs: float | None = None

    def __enter__(self) -> "StageIO":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(ok=exc_type is None, error=None if exc is None else f"{exc_type.__name__}: {exc}")

    # -- inputs ------------------------------------------------------------
    def receive(self, timeout_s: float | None = None) -> dict[str, list[bytes]]:
        """Accept one connection on every input and read each to EOF, in arrival order."""
        out: dict[str, list[bytes]] = {}
        if not self.inputs:
            return out
        sel = selectors.DefaultSelector()
        for name, sock in self.inputs.items():
            sel.register(sock, selectors.EVENT_READ, name)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while len(out) < len(self.inputs):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            events = sel.select(left)
            if not events:
                missing = sorted(set(self.inputs) - set(out))
                raise ProtocolError(f"no data from {', '.join(missing)} within {timeout_s:g} s")
            for key, _ in events:
                name = key.data
                conn, _ = key.fileobj.accept()
                sel.unregister(key.fileobj)
                with conn:
                    t0 = time.time()
                    messages = read_messages(conn)
                digest = hashlib.sha256()
                for m in messages:
                    digest.update(m)
                out[name] = messages
                self.received[name] = {"bytes": sum(map(len, messages)), "messages": len(messages),
                                       "sha256": digest.hexdigest(), "t_accept": t0, "t_eof": time.time()}
        sel.close()
        self.t_inputs = time.time()
        return out

    # -- outputs -----------------------------------------------------------
    def send(self, dst: str, payload: bytes) -> None:
        """Queue one message to stage ``dst``; returns at once."""
        if dst not in self.output_paths:
            raise ProtocolError(f"stage {self.stage!r} has no data edge to {dst!r} "
                                f"(edges: {', '.join(self.output_paths) or 'none'})")
        sender = self.senders.get(dst)
        if sender is None:
            sender = self.senders[dst] = _Sender(dst, self.output_paths[dst])
            sender.start()
        sender.put(bytes(payload))

    def result(self, summary: dict) -> None:
        """What this stage produced, for the report (and the done socket of a sink)."""
        self.summary.update(summary)

    # -- the end -----------------------------------------------------------
    def _loaded(self) -> dict[str, int]:
        """What this stage loaded from storage, less what its stand-in hardware did. The
        CPU it takes to find out is measuring, not the stage's work: counted as stand-in."""
        cpu0 = time.process_time()
        own = {k: v - self.stand_in_loaded.get(k, 0) for k, v in storage.loaded().items()
               if k not in self.stand_in_only}
        self.stand_in_cpu_s += time.process_time() - cpu0
        return {k: v for k, v in own.items() if v > 0}

    def close(self, ok: bool = True, error: str | None = None) -> None:
        t_work = time.time()
        for dst in self.output_paths:
            if dst not in self.senders and ok:
                self.send(dst, b"")  # an edge with nothing to say still ends, so its receiver does not wait
        for sender in self.senders.values():
            sender.queue.put(None)
        loaded = self._loaded()
        errors = [error] if error else []
        for sender in self.senders.values():
            sender.join()
            if sender.error:
                errors.append(sender.error)
        report = {
            "stage": self.stage, "ok": ok and not errors, "error": "; ".join(errors) or None,
            "t_start": self.t_start, "t_inputs": self.t_inputs, "t_work_done": t_work, "t_end": time.time(),
            # on the clock since boot (a board's systemd stamps its units on it): when the process
            # started (before the interpreter and its imports), this object was made, and now
            "process_start_s": _process_start_s(), "m_start": self.m_start, "m_end": time.monotonic(),
            "received": self.received, "stand_in_cpu_s": self.stand_in_cpu_s,
            "network_bytes": self.network_bytes, "storage_loaded": loaded,
            "sent": {d: {"bytes": s.bytes, "messages": s.messages, "sha256": s.hash.hexdigest(),
                         "t_connect": s.t_connect, "t_read": s.t_done} for d, s in self.senders.items()},
            "result": self.summary,
        }
        print("PALLEX " + json.dumps(report, sort_keys=True), flush=True)
        done = os.environ.get("PALLEX_DONE")
        if done:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.connect(done)
                    sock.sendall((json.dumps({"stage": self.stage, "ok": report["ok"],
                                              "result": self.summary}) + "\n").encode())
            except OSError as exc:
                print(f"pallex: cannot report to {done}: {exc}", file=sys.stderr)
        if errors:
            raise SystemExit(1)


def _process_start_s() -> float | None:
    """When this process started, in seconds since boot (/proc/self/stat's starttime)."""
    try:
        fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def parse_reports(text: str) -> list[dict]:
    """The ``PALLEX {json}`` lines of a stage's output."""
    out = []
    for line in text.splitlines():
        if line.startswith("PALLEX "):
            try:
                out.append(json.loads(line[7:]))
            except ValueError:
                pass
    return out
