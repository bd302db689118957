"""Hosts that stop answering while a job runs on them.

A board that loses power or its link in the middle of a job leaves MPI waiting on it:
the job would end only at its timeout (the point's own, plus MPI's start-up grace, a
minute or more). While a job runs on real hosts, each host is asked over ssh every few
seconds, as the launcher reaches it; a host that misses ``MISSES`` answers in a row is
lost, and the run stops the job at once (and then ends, saying which host, with its
finished points kept: shoal.execute.lifecycle.still_ready).

Each question is one ssh login running ``true``: on a small board some tens of
milliseconds of CPU every ``INTERVAL_S`` (an estimate), under 1 % of a core.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from shoal import proc

INTERVAL_S = 5.0
# ssh's own connect timeout; the whole login may take longer on a loaded board.
CONNECT_TIMEOUT_S = 3
ANSWER_TIMEOUT_S = 10.0
MISSES = 2

#: Asks one host: None if it answered, else what went wrong.
Ask = Callable[[str], "str | None"]


def ask_over_ssh(address: str) -> str | None:
    """One ssh login to ``address`` running ``true``, as the launcher's ssh reaches it."""
    from shoal.cluster import remote

    argv = [remote.ssh_program(), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            address, "true"]
    try:
        done = proc.run(argv, timeout=ANSWER_TIMEOUT_S, show=False)
    except proc.CommandTimeout:
        return f"ssh did not answer within {ANSWER_TIMEOUT_S:.0f} s"
    except (proc.CannotStart, proc.ToolMissing) as exc:
        return f"cannot run ssh ({exc})"
    return None if done.ok else f"ssh failed ({done.tail(1) or 'no message'})"


class Watch:
    """Asks ``addresses`` every ``interval_s`` in a thread of its own (a context manager);
    ``lost()`` is None while all answer, else the first host that missed ``misses`` in a row."""

    def __init__(self, addresses: list[str], ask: Ask = ask_over_ssh, interval_s: float = INTERVAL_S,
                 misses: int = MISSES) -> None:
        self.addresses, self.ask, self.interval_s, self.misses = list(addresses), ask, interval_s, misses
        self._missed = {a: 0 for a in self.addresses}
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def lost(self) -> str | None:
        """``"ADDRESS: what the last question got"`` once a host is lost, else None."""
        return self._lost

    def __enter__(self) -> "Watch":
        if self.addresses:
            self._thread = threading.Thread(target=self._loop, name="shoal-liveness", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=ANSWER_TIMEOUT_S + 1)

    def _loop(self) -> None:
        with ThreadPoolExecutor(max_workers=min(16, len(self.addresses))) as pool:
            while not self._stop.wait(self.interval_s):
                for address, why in zip(self.addresses, pool.map(self.ask, self.addresses)):
                    self._missed[address] = self._missed[address] + 1 if why else 0
                    if why and self._missed[address] >= self.misses and self._lost is None:
                        self._lost = (f"{address}: {why}, {self._missed[address]} times in a row "
                                      f"{self.interval_s:g} s apart")
                if self._lost is not None:
                    return


class NoWatch:
    """Where nothing is asked (this machine, emulated devices, Slurm's own hosts)."""

    def lost(self) -> str | None:
        return None

    def __enter__(self) -> "NoWatch":
        return self

    def __exit__(self, *exc) -> None:
        return None
