/* shoal-waittest SUBCOMMAND [--name value ...]
 *
 *   semantics  MPI corner cases (statuses, null/persistent requests, errors)
 *   threads    MPI_THREAD_MULTIPLE: two threads receive concurrently
 *   fortran    the Fortran entry points, called with Fortran conventions
 *   result     a fixed computation with p2p and collectives; prints a checksum
 *   settings   the MPI_T control variables named, as rank 0 sees them
 *   alltoall   MPI_Alltoall's blocks land where they belong (a wildcard receive pending)
 *   traffic    sends and collectives of known sizes between known ranks (who talks to whom)
 *   burst, gaps, pingpong, idle, full, burstdsm, lock
 *              timing scenarios of 003's experiments (JSON lines on rank 0)
 * Output lines from rank 0 are JSON objects; failures exit non-zero. */
#define _GNU_SOURCE
#include "waittest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

double wt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double wt_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

void wt_sleep(double seconds)
{
    double end = wt_now() + seconds;
    /* Sleep most of it, spin the last 150 us so gaps are what was asked. */
    double rest = seconds - 150e-6;
    if (rest > 0) {
        struct timespec req = {(time_t)rest, (long)((rest - (time_t)rest) * 1e9)};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
    }
    while (wt_now() < end)
        ;
}

double wt_arg(int argc, char **argv, const char *name, double def)
{
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return atof(argv[i + 1]);
    return def;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: shoal-waittest SUBCOMMAND [--name value ...]\n");
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "semantics"))
        return wt_semantics(argc, argv);
    if (!strcmp(cmd, "threads"))
        return wt_threads(argc, argv);
    if (!strcmp(cmd, "fortran"))
        return wt_fortran(argc, argv);
    if (!strcmp(cmd, "result"))
        return wt_result(argc, argv);
    if (!strcmp(cmd, "settings"))
        return wt_settings(argc, argv);
    if (!strcmp(cmd, "alltoall"))
        return wt_alltoall(argc, argv);
    if (!strcmp(cmd, "traffic"))
        return wt_traffic(argc, argv);
    return wt_patterns(cmd, argc, argv);
}
