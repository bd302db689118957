"""`shoal power -- COMMAND` as a library call: run one command, measure its energy, keep the run.

The run directory holds the samples as they arrive (``power.csv``) and, in its
manifest, the command, the sources and what each measured; an interrupted or
failed command keeps what was measured.
"""

from __future__ import annotations

import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from shoal.errors import ShoalError

# Seconds between appends of the samples to the run while the command runs.
FLUSH_S = 2.0


class CommandNotRunnable(ShoalError):
    exit_code = 127


@dataclass
class PowerRequest:
    """What to run and how to measure it."""

    command: list[str]
    source: str = "auto"
    rate_hz: float | None = None
    idle_s: float = 0.0
    out: Path | None = None


def run(request: PowerRequest, argv: list[str],
        on_note: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure the command from start to exit; its summary (exit code, duration, energy per
    source). ``on_note`` hears what the sources say about themselves as they open."""
    from shoal import hostfacts, proc
    from shoal.power import COLUMNS, open_session
    from shoal.runs.store import Run

    command = request.command
    if proc.find(command[0]) is None:
        raise CommandNotRunnable(f"cannot run {command[0]!r}: not found or not executable; "
                                 "check the command name and PATH")
    tell = on_note or (lambda note: None)
    session = open_session(request.source, request.rate_hz)
    record = Run.create("power", argv, request.out, measured_command=command,
                        power_source=request.source, rate_hz=request.rate_hz,
                        host=hostfacts.collect(), wall_minus_mono_s=session.wall_minus_mono,
                        power_channels=[asdict(ch) for ch in session.channels],
                        power_notes=session.notes)
    for note in session.notes:
        tell(note)
    status, code = "complete", None
    t0 = t1 = time.monotonic()
    try:
        known = len(session.notes)
        session.start()
        for note in session.notes[known:]:
            tell(note)
        if request.idle_s > 0:
            session.measure_idle(request.idle_s)
        t0 = time.monotonic()
        try:
            process = proc.start(command)
        except proc.CannotStart as exc:
            raise CommandNotRunnable(f"cannot run {command[0]!r}: {exc.reason}; "
                                     "check the command name and PATH") from None
        try:
            while True:
                try:
                    code = process.wait(timeout=FLUSH_S)
                    if code is not None:
                        break
                    record.append("power", session.new_samples(), columns=COLUMNS)
                except proc.Terminated:
                    raise
                except KeyboardInterrupt:
                    # Ctrl-C was meant for the command as much as for shoal: pass it on
                    # and measure until the command ends.
                    status = "interrupted"
                    process.send_signal(signal.SIGINT)
        finally:
            process.stop()
        t1 = time.monotonic()
    except BaseException as exc:
        session.stop()
        record.append("power", session.new_samples(), columns=COLUMNS)  # keep what was measured
        record.finish("interrupted" if isinstance(exc, KeyboardInterrupt) else "failed")
        raise
    session.stop()
    record.append("power", session.new_samples(), columns=COLUMNS)
    duration = t1 - t0
    results = session.energy_between(t0, t1, wait=False) if duration > 0 else []
    faults = session.faults()
    exit_code = code if code >= 0 else 128 - code
    record.finish(status, exit_code=exit_code, duration_s=duration, t_start_mono_s=t0,
                  t_end_mono_s=t1, energy=results, idle_W=session.idle_W, power_faults=faults)
    return {"command": command, "exit_code": exit_code, "duration_s": duration,
            "run": str(record.path), "notes": session.notes, "faults": faults, "sources": results}
