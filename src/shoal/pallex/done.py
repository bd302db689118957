"""The completion service: counts the sinks' reports, or says the deadline passed.

    python -m shoal.pallex.done --app icc --expect 2 [--record FILE]
    python -m shoal.pallex.done --app icc --deadline [--record FILE]

With ``--expect`` it takes the done socket from systemd (fd 3), accepts one
report line per sink and exits 0 when all arrived and all were ok (the unit's
``SuccessAction=`` then ends the cycle), 1 otherwise. One JSON line goes to
stdout (the journal) and, with ``--record``, is appended to FILE.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from shoal.pallex.protocol import listen_fds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shoal.pallex.done")
    p.add_argument("--app", required=True)
    p.add_argument("--expect", type=int, default=None)
    p.add_argument("--deadline", action="store_true")
    p.add_argument("--record", default=None)
    args = p.parse_args(argv)
    # monotonic_s: the board's clock since boot (systemd's timestamps are on it), for the testbed
    record: dict = {"app": args.app, "t": time.time(), "monotonic_s": time.monotonic()}
    code = 0
    if args.deadline:
        record.update(event="deadline")
        code = 0
    else:
        socks = list(listen_fds().values())
        if len(socks) != 1:
            print("pallex done: expected one passed socket (run under systemd's done.socket)", file=sys.stderr)
            return 2
        reports = []
        while len(reports) < (args.expect or 0):
            conn, _ = socks[0].accept()
            with conn, conn.makefile("r") as fh:
                for line in fh:
                    if line.strip():
                        reports.append(json.loads(line))
        ok = all(r.get("ok") for r in reports)
        record.update(event="done" if ok else "failed", reports=reports)
        code = 0 if ok else 1
    line = json.dumps(record, sort_keys=True)
    print(line, flush=True)
    if args.record:
        with open(args.record, "a") as fh:
            fh.write(line + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
