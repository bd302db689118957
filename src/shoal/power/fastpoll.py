"""A small C poller for sysfs sources at high rates (period <= 10 ms).

At 1 kHz a Python thread spends 10-20 µs of interpreter work per tick on
top of the kernel's wake-up cost (caches are cold after every sleep), more
than the 1%-of-a-core budget. This poller does the tick in C: it preads the
descriptors it inherits, stamps each tick with CLOCK_MONOTONIC (the clock
of ``time.monotonic()``), and writes records in batches of ~200 ms to a
pipe that a Python thread drains at ~5 Hz.

Record: ``double t`` then one ``int64`` per descriptor, native byte order.
A failed read is ``INT64_MIN + errno`` (EINVAL when the file held no
integer), so a failure is never confused with a value. The poller ignores
SIGINT (the parent decides when to stop), stops on SIGTERM, and exits when
the pipe's reader is gone.

The source is compiled once per machine with ``$CC`` (default ``cc``) into
the shoal cache; without a compiler the sampler stays in Python and says so.
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import threading
from pathlib import Path

import numpy as np

from shoal import proc

#: Periods at or below this use the C poller when it is available.
FAST_PERIOD_S = 0.010
_ERR_BASE = np.iinfo(np.int64).min
_ERR_SPAN = 4096

C_SOURCE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested = 0;
static void on_term(int sig) { (void)sig; stop_requested = 1; }

static int64_t read_int(int fd) {
    char buf[40];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n < 0) return INT64_MIN + errno;
    buf[n] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (end == buf || errno) return INT64_MIN + EINVAL;
    while (*end == '\n' || *end == ' ') end++;
    if (*end) return INT64_MIN + EINVAL;
    return (int64_t)v;
}

static int write_all(const unsigned char *p, size_t len) {
    while (len) {
        ssize_t n = write(1, p, len);
        if (n < 0) { if (errno == EINTR) continue; return -1; }
        p += n; len -= (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;  /* usage: powerpoll PERIOD_NS BATCH [FD...] (no FD: only the schedule) */
    long long period = atoll(argv[1]);
    int batch = atoi(argv[2]), n = argc - 3;
    if (period <= 0 || batch <= 0) return 2;
    int *fds = malloc(sizeof(int) * (size_t)(n + 1));
    size_t rec = sizeof(double) + sizeof(int64_t) * (size_t)n;
    unsigned char *buf = malloc(rec * (size_t)batch);
    if (!fds || !buf) return 1;
    for (int i = 0; i < n; i++) fds[i] = atoi(argv[3 + i]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGINT, SIG_IGN);
    struct timespec next, now;
    clock_gettime(CLOCK_MONOTONIC, &next);
    int k = 0;
    while (!stop_requested) {
        next.tv_nsec += period;
        while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec++; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        if (stop_requested) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long behind = (now.tv_sec - next.tv_sec) * 1000000000LL + (now.tv_nsec - next.tv_nsec);
        if (behind > period) next = now;  /* fell behind: resume the schedule, do not burst */
        double t = (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
        unsigned char *p = buf + rec * (size_t)k;
        memcpy(p, &t, sizeof t);
        for (int i = 0; i < n; i++) {
            int64_t v = read_int(fds[i]);
            memcpy(p + sizeof t + sizeof v * (size_t)i, &v, sizeof v);
        }
        if (++k == batch) {
            if (write_all(buf, rec * (size_t)k)) return 0;  /* reader gone */
            k = 0;
        }
    }
    if (k) write_all(buf, rec * (size_t)k);
    return 0;
}
"""


class Unavailable(Exception):
    """The C poller cannot be built or run here; str() says why."""


def binary() -> Path:
    """Path of the compiled poller, building it into the cache on first use."""
    from shoal.mpi.build import cache_root

    digest = hashlib.sha256(C_SOURCE.encode()).hexdigest()[:16]
    target = cache_root() / "powerpoll" / digest / "powerpoll"
    if target.is_file():
        return target
    compiler = proc.find(os.environ.get("CC", "cc"))
    if compiler is None:
        raise Unavailable(f"no C compiler ({os.environ.get('CC', 'cc')}) to build the 1 kHz poller")
    target.parent.mkdir(parents=True, exist_ok=True)
    source = target.parent / "powerpoll.c"
    source.write_text(C_SOURCE)
    tmp = target.parent / f"powerpoll.{os.getpid()}.tmp"
    argv = [compiler, "-O2", "-o", str(tmp), str(source)]
    done = proc.run(argv)
    if done.returncode != 0:
        raise Unavailable(f"building the 1 kHz poller failed: {done.stderr.strip().splitlines()[-1:]}")
    os.replace(tmp, target)
    return target


class FastPoller:
    """Runs the C poller over the descriptors of some recorders.

    Readings land in the recorders exactly as the Python loop would put
    them (values first, then the time), and failed reads are recorded as
    faults with the errno message.
    """

    def __init__(self, recorders, period_s: float) -> None:
        self.recorders = recorders
        self.layout = []  # (recorder, first column in a record, fds)
        fds: list[int] = []
        for rec in recorders:
            rec_fds = rec.source.fast_fds()
            self.layout.append((rec, len(fds), len(rec_fds)))
            fds += rec_fds
        self.width = len(fds)
        batch = max(1, round(0.2 / period_s))  # ~5 wake-ups/s for the Python side
        argv = [str(binary()), str(int(period_s * 1e9)), str(batch), *map(str, fds)]
        try:
            self.proc = proc.start(argv, stdout=proc.PIPE, stdin=proc.DEVNULL, pass_fds=fds,
                                   text=False)
        except proc.CannotStart as exc:
            raise Unavailable(f"cannot start the 1 kHz poller: {exc.reason}") from None
        self.dtype = np.dtype([("t", "=f8"), ("v", "=i8", (self.width,))])
        self.thread = threading.Thread(target=self._drain, name="shoal-power-fastpoll", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        fd = self.proc.stdout.fileno()
        size = self.dtype.itemsize
        pending = b""
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            pending += chunk
            whole = len(pending) // size * size
            if whole:
                self._store(np.frombuffer(pending[:whole], dtype=self.dtype))
                pending = pending[whole:]

    def _store(self, records: np.ndarray) -> None:
        raw = records["v"]
        failed = raw < _ERR_BASE + _ERR_SPAN
        values = raw.astype(float)
        values[failed] = np.nan
        for rec, first, count in self.layout:
            for j in range(count):
                column = values[:, first + j]
                bad = failed[:, first + j]
                if bad.any():
                    code = int(raw[bad, first + j][0] - _ERR_BASE)
                    name = rec.source.channels[j].name
                    for _ in range(int(bad.sum())):
                        rec.source.fault(name, f"read failed: {os.strerror(code) if code != errno.EINVAL else 'not an integer'}")
                rec.values[j].frombytes(np.ascontiguousarray(column).tobytes())
            rec.times.frombytes(np.ascontiguousarray(records["t"]).tobytes())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)   # it flushes its last batch, then exits
        self.proc.wait()
        self.thread.join()
        self.proc.stdout.close()
