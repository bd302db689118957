"""Stage: receive every input, wait or compute for given times, send given bytes.

    python -m shoal.pallex.apps.synthetic [--sleep S] [--cpu S] [--send N]

For the schedule benchmark and tests: --sleep waits (like a camera), --cpu
spins, --send N sends N seeded bytes to every output. --fail exits 3 after
the work; --hang sleeps forever (the deadline must end it).
"""

from __future__ import annotations

import argparse
import os
import random
import time

from shoal.pallex.protocol import StageIO


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m shoal.pallex.apps.synthetic")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--cpu", type=float, default=0.0)
    p.add_argument("--send", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--fail", action="store_true")
    p.add_argument("--hang", action="store_true")
    args = p.parse_args(argv)
    with StageIO() as io:
        io.receive()
        t_ready = time.time()
        if args.sleep:
            time.sleep(args.sleep)
        end = time.process_time() + args.cpu
        while time.process_time() < end:
            pass
        if args.hang:
            while True:
                time.sleep(3600)
        if args.fail:
            os._exit(3)
        payload = random.Random(args.seed).randbytes(args.send)  # stdlib only: a stage that starts fast
        for dst in io.output_paths:
            io.send(dst, payload)
        io.result({"t_ready": t_ready, "sent_bytes": len(payload)})


if __name__ == "__main__":
    main()
