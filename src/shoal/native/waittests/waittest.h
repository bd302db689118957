/* shoal-waittest: one program, one subcommand per scenario. */
#ifndef WAITTEST_H
#define WAITTEST_H
#include <mpi.h>
#include <stdint.h>

double wt_now(void);                  /* CLOCK_MONOTONIC seconds (same clock on every local rank) */
double wt_cpu(void);                  /* this process's user+system CPU seconds */
void wt_sleep(double seconds);        /* sleep, ending with a short spin for accuracy */
double wt_arg(int argc, char **argv, const char *name, double def);

int wt_semantics(int argc, char **argv);
int wt_threads(int argc, char **argv);
int wt_fortran(int argc, char **argv);
int wt_result(int argc, char **argv);
int wt_settings(int argc, char **argv);
int wt_alltoall(int argc, char **argv);
int wt_traffic(int argc, char **argv);
int wt_patterns(const char *which, int argc, char **argv);
#endif
