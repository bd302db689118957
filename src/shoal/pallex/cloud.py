"""An HTTP server on loopback that stands for the cloud: it keeps the SHA-256 of every PUT."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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


class Cloud:
    """``with Cloud() as cloud: cloud.url ... cloud.received``"""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.server = ThreadingHTTPServer((host, port), _Handler)
        self.server.received = []  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, name="pallex-cloud", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/images"

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
