"""Transparent adaptive waiting: idle MPI ranks sleep instead of spinning.

libshoalwait (``shoal/native/shoalwait``) is preloaded into unmodified MPI
programs; it turns blocking waits into test loops that pause as the wait
mode says. This package validates modes, builds and applies the library to
a launch, reads its per-rank telemetry and runs the waitlab experiments.

The entry points other layers use::

    from shoal.wait import apply, parse_mode
    job = apply(job, "backoff")            # LD_PRELOAD + SHOAL_WAIT* in rank_env
"""

from shoal.wait.modes import WaitMode, parse_mode, MODES_HELP

__all__ = ["WaitMode", "parse_mode", "MODES_HELP", "apply", "library_for", "wait_env"]


def __getattr__(name: str):
    # The library's builder loads on first use, not with the modes (``shoal --help``).
    if name in ("apply", "library_for", "wait_env"):
        from shoal.wait import library

        return getattr(library, name)
    raise AttributeError(f"module 'shoal.wait' has no attribute {name!r}")
