"""An HTTP server on loopback that stands for the cloud: it keeps the SHA-256 of every PUT.

``sinks_for`` starts one where a scenario's upload URL names this machine's
loopback and nothing listens there, so the shipped scenarios run as they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


class _Handler(BaseHTTPRequestHandler):
    def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        self.server.received.append({"path": self.path, "bytes": len(body),  # type: ignore[attr-defined]
                                     "sha256": hashlib.sha256(body).hexdigest()})
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Cloud:
    """``with Cloud() as cloud: cloud.url ... cloud.received``"""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, path: str = "/images") -> None:
        server = _Server6 if ":" in host else ThreadingHTTPServer
        self.server = server((host, port), _Handler)
        self.server.received = []  # type: ignore[attr-defined]
        self.path = path
        self.thread = threading.Thread(target=self.server.serve_forever, name="pallex-cloud", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}{self.path}"

    @property
    def received(self) -> list[dict]:
        return self.server.received  # type: ignore[attr-defined]

    def __enter__(self) -> "Cloud":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def _loopback_address(url: str) -> tuple[str, int, str] | None:
    """(address, port, path) of an http URL whose host is only ever this machine's loopback."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return None
    try:
        port = parts.port or 80
        found = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (ValueError, OSError):
        return None
    addresses = [info[4][0] for info in found]
    if not addresses or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        return None
    return addresses[0], port, parts.path or "/"


def _nothing_listens(address: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(2.0)
        try:
            probe.connect((address, port))
        except ConnectionRefusedError:
            return True
        except OSError:
            return False
    return False


def sinks_for(params: dict[str, str], stack: contextlib.ExitStack) -> list[Cloud]:
    """A running sink for every http URL among ``params`` that is on this machine's loopback
    with nothing listening (closed with ``stack``). A URL elsewhere, or a port this user
    cannot bind (below 1024 without root), is left alone: its stage meets what is there."""
    started: dict[tuple[str, int], Cloud] = {}
    for value in params.values():
        where = _loopback_address(value)
        if where is None or where[:2] in started or not _nothing_listens(*where[:2]):
            continue
        try:
            cloud = Cloud(where[0], where[1], where[2])
        except OSError:
            continue
        started[where[:2]] = stack.enter_context(cloud)
    return list(started.values())
