/* Monotonic time for every native shoal program.
 *
 * CLOCK_MONOTONIC is the clock Python's time.monotonic() reads on Linux, so
 * timestamps taken here line up with samples taken by the Python side (power
 * meters, progress). Wall-clock time (CLOCK_REALTIME) can step under NTP and
 * is never used for intervals.
 */
#ifndef SHOAL_CLOCK_H
#define SHOAL_CLOCK_H

#include <time.h>

/* Seconds since an arbitrary fixed point, on CLOCK_MONOTONIC. */
static inline double shoal_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The resolution the kernel reports for CLOCK_MONOTONIC, in seconds (0 if unknown). */
static inline double shoal_clock_resolution_s(void)
{
    struct timespec ts;
    if (clock_getres(CLOCK_MONOTONIC, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
