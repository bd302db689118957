"""A distribution's background activity, run inside an emulated device beside its ranks.

Seed 000 (§5.3-5.4, Figs. 5.10 and 5.21) explains one OS beating another on the same
board by its background processes: how many it starts (forks) and how much CPU they take.
This program is that activity, on a device core's budget (it starts through the device's
placement, so its CPU counts against the device as a daemon's would):

* CPU: busy for ``cpu`` of every period, asleep for the rest: the share of the core a
  distribution's daemons keep;
* forks: ``forks`` short-lived processes (``true``, as a timer's or a shell's helper)
  per second of device time, on a schedule that catches up after a short stall (up to a
  second's worth), so the count over a run is the profile's where the host keeps up.

Under dilation D the device's second lasts D host seconds: periods and the fork schedule
stretch by D, the share stays.

    python -m shoal.cluster.osnoise --forks 5 --cpu 0.04 [--dilation D]

Standard library only. SIGUSR1 makes it print ``forks N busy_s X wall_s Y`` so far; SIGTERM
ends it with that line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time

PERIOD_S = 0.1   # of device time: long beside a scheduler tick, short beside a benchmark point
BACKLOG_S = 1.0  # of device time: forks due longer ago than this are not made up for


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m shoal.cluster.osnoise")
    parser.add_argument("--forks", type=float, required=True, help="forks per device second")
    parser.add_argument("--cpu", type=float, required=True, help="share of one device core")
    parser.add_argument("--dilation", type=float, default=1.0)
    args = parser.parse_args(argv)
    true = shutil.which("true") or "/bin/true"
    stop, asked = [], []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    signal.signal(signal.SIGUSR1, lambda *_: asked.append(True))
    period = PERIOD_S * args.dilation
    fork_every = args.dilation / args.forks if args.forks > 0 else float("inf")
    start = time.monotonic()
    next_period, next_fork = start, start + fork_every
    forks, busy = 0, 0.0
    print("ready", flush=True)
    while not stop:
        now = time.monotonic()
        if now >= next_period:   # the daemons' share of the core, once per period
            spin_until = now + args.cpu * period
            while time.monotonic() < spin_until:
                pass
            busy += time.monotonic() - now
            next_period = max(next_period + period, now)
        # A backlog older than a second of device time (a host too busy to keep up) is
        # dropped: catching up on it would fork without end and never spin or answer.
        next_fork = max(next_fork, time.monotonic() - BACKLOG_S * args.dilation)
        while time.monotonic() >= next_fork and not stop and not asked:   # the forks due so far
            pid = os.fork()
            if pid == 0:
                try:
                    os.execv(true, [true])
                finally:
                    os._exit(127)
            os.waitpid(pid, 0)
            forks += 1
            next_fork += fork_every
        if asked:
            asked.clear()
            _say(forks, busy, start)
        rest = min(next_period, next_fork) - time.monotonic()
        if rest > 0:
            time.sleep(rest)
    _say(forks, busy, start)


def _say(forks: int, busy: float, start: float) -> None:
    try:   # whoever started it may have stopped reading
        print(f"forks {forks} busy_s {busy:.3f} wall_s {time.monotonic() - start:.3f}", flush=True)
    except OSError:
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
