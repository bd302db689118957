"""For tests that press Ctrl-C on a child: give the child SIGINT's default disposition.

A test run started as a background job (``make test &`` in a script) inherits
SIGINT ignored, as shells do for background jobs, and a Python child then never
raises KeyboardInterrupt: a test of Ctrl-C must not depend on how it was started.
"""

from __future__ import annotations

import signal


def as_foreground() -> None:
    """``preexec_fn`` for a child that a test will send SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
