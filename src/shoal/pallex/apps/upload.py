"""Stage: upload every received frame with HTTP PUT (scenario IC&U_x's s_upl).

    python -m shoal.pallex.apps.upload --url URL [--from cap]

Each frame goes to URL/<n>; the result lists each frame's SHA-256 and the
server's status. Any status other than 2xx fails the stage.
"""

from __future__ import annotations

import argparse
import hashlib
import urllib.request

from shoal.pallex.protocol import StageIO


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m shoal.pallex.apps.upload")
    p.add_argument("--url", required=True)
    p.add_argument("--from", dest="src", default="cap")
    p.add_argument("--timeout", type=float, default=30.0)
    args = p.parse_args(argv)
    with StageIO() as io:
        uploads = []
        for n, data in enumerate(io.receive()[args.src]):
            request = urllib.request.Request(f"{args.url.rstrip('/')}/{n}", data=data, method="PUT",
                                             headers={"Content-Type": "application/octet-stream"})
            io.network_bytes += len(data)
            with urllib.request.urlopen(request, timeout=args.timeout) as response:
                uploads.append({"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                                "status": response.status})
        io.result({"uploads": uploads})


if __name__ == "__main__":
    main()
