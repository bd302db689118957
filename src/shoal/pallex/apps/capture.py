"""Stage: capture COUNT frames, one per PERIOD seconds, and send each to every output.

    python -m shoal.pallex.apps.capture [--count N] [--period S] [--seed K]

Stands in for the camera of seed 004 (§VI-B: one ~2.5 MB picture per second):
the frame is deterministic (see image.py), the period is the camera's. A
stage without outputs (scenario IC) reports the frames' SHA-256 as its result.
"""

from __future__ import annotations

import argparse
import hashlib
import time

from shoal.pallex import storage
from shoal.pallex.protocol import StageIO


def capture(count: int, period_s: float, seed: int, io: StageIO | None = None):
    """Yield (frame, digit), the n-th no earlier than n x period after the start.

    Making the frame (and importing numpy to make it) stands in for the
    camera and its library: that CPU time, and what the import loaded, are
    reported as stand-in, not as the stage's.
    """
    t0 = time.monotonic()
    cpu0 = time.process_time()
    before = storage.loaded() if io is not None else {}
    from shoal.pallex.apps import image  # numpy: part of the stand-in camera, imported here to count it
    if io is not None:
        grown = {k: v - before.get(k, 0) for k, v in storage.loaded().items() if v > before.get(k, 0)}
        io.stand_in_only = {k for k in grown if k not in before}
        io.stand_in_loaded = {k: v for k, v in grown.items() if k in before}
        io.stand_in_cpu_s += time.process_time() - cpu0
    for n in range(count):
        cpu0 = time.process_time()
        data, digit = image.frame(seed + n)
        if io is not None:
            io.stand_in_cpu_s += time.process_time() - cpu0
        wait = t0 + (n + 1) * period_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # the camera's exposure and readout
        yield data, digit


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m shoal.pallex.apps.capture")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--period", type=float, default=1.0, help="seconds per picture (default 1)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    with StageIO() as io:
        frames = []
        for data, digit in capture(args.count, args.period, args.seed, io):
            for dst in io.output_paths:
                io.send(dst, data)
            frames.append({"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "digit": digit})
        io.result({"frames": frames})


if __name__ == "__main__":
    main()
