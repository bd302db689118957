/* Shared pieces of the S-DSM programs: options, per-rank reports, CPU timelines. */
#ifndef SDSM_APPS_H
#define SDSM_APPS_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "sdsm.h"

enum { IMPL_SDSM, IMPL_MPI, IMPL_SEQ };

typedef struct {
    int impl;
    /* patterns */
    long writes, cycles;
    double pause_s, hold_s;
    size_t bytes;
    /* images */
    int size, thetas, threshold, frames, width, height;
    const char *out;
    double sample_s;
} opts_t;

/* What every rank reports at the end (gathered to rank 0). */
typedef struct {
    double wall_s, cpu_s, lib_s, wait_s, compute_s, frames;
    double quiet_start[64], quiet_end[64];   /* intervals this client sent nothing */
    uint64_t msgs_sent, bytes_sent, hash, nquiet;
    char host[64];                           /* where the rank ran (gethostname) */
    int role;                                /* ROLE_* */
    int device_core;                         /* core of its emulated device (SHOAL_DEVICE_CORE), -1 elsewhere */
} report_t;

enum { ROLE_SERVER, ROLE_CLIENT, ROLE_IO, ROLE_INPUT, ROLE_OUTPUT, ROLE_TASK, ROLE_SEQ };

extern int world_rank, world_size;

void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void check(int e, const char *what);
double now_s(void);
double cpu_s(void);
void sleep_s(double s);
uint64_t fnv1a(uint64_t h, const void *p, size_t n);
#define FNV_START 0xcbf29ce484222325ULL

/* CPU timeline of this rank: a thread samples the process CPU clock. */
void timeline_start(double period);
void timeline_stop(void);

/* Gather every rank's report and timeline to rank 0, which prints one JSON
 * line: {"app":..., extra..., "ranks":[...], "timeline":[...]} */
void finish(const char *app, const opts_t *o, report_t *me, const char *extra_json);

void fill_report(report_t *r, sdsm_t *s, double t0, double cpu0);
/* sdsm_finalize (exits on failure); the messages and bytes the rank sent, goodbyes
 * included, go into the report. */
int finalize_report(report_t *r, sdsm_t **s);
/* Refuse a world size the implementation cannot run on (one line, exit 2). */
void check_ranks(const char *app, int impl, int mpi_min, const char *mpi_roles, int sdsm_min,
                 const char *sdsm_roles);

int run_patterns(const char *which, const opts_t *o);
int run_hough(const opts_t *o);
int run_video(const opts_t *o);
int run_stress(int seeds, long first, int ops);
int run_errors(void);
int run_deadlock(void);

#endif
