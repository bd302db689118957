"""One connection from the virtual board to a port on this machine's loopback.

    python -m shoal.pallex.relay PORT

QEMU's user network starts it for each TCP connection the guest opens to a ``guestfwd`` address
(``vmboard.argv``), with the guest's side of the connection on its standard input and output; it
connects to 127.0.0.1:PORT and copies both ways until each side has closed. The board's upload
stages reach the lab's cloud server this way at one fixed address, whatever port the server got.
"""

from __future__ import annotations

import os
import socket
import sys
import threading


def _to_guest(sock: socket.socket) -> None:
    while data := sock.recv(65536):
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m shoal.pallex.relay PORT", file=sys.stderr)
        return 2
    with socket.create_connection(("127.0.0.1", int(args[0])), timeout=30) as sock:
        sock.settimeout(None)
        back = threading.Thread(target=_to_guest, args=(sock,), daemon=True)
        back.start()
        while data := os.read(0, 65536):
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)   # the guest has sent everything: the server answers and closes
        back.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
