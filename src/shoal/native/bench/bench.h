/* shoal-bench: the types shared by the test table, the timing harness and
 * the command line.
 *
 * A test is one entry of the table (table.c): it says how to size its
 * buffers (setup), what one timed loop of `inner` operations is (kernel),
 * what must happen after the timer stops (complete), and how to verify the
 * received data (prepare + verify, only with --check). Everything else —
 * calibration, warm-up, barriers, cache flush, adaptive repetitions,
 * gathering and output — is the harness's (harness.c), written once.
 */
#ifndef SHOAL_BENCH_H
#define SHOAL_BENCH_H

#include <mpi.h>
#include <stddef.h>

typedef enum { SB_METRIC_BANDWIDTH, SB_METRIC_TIME, SB_METRIC_RATE } sb_metric;

/* Whose clock gives a repetition's time. */
typedef enum {
    SB_TIME_RANK0, /* the sender's (rank 0's) timer, as MPBench and IMB PingPong */
    SB_TIME_MAX    /* the slowest rank's timer, reduced to rank 0 outside the timed region */
} sb_timing;

/* The state of one benchmark point on one rank. */
typedef struct sb_ctx {
    MPI_Comm comm;
    int rank, nprocs;
    size_t size;          /* message size asked for, bytes */
    int check;            /* fill and verify buffers (--check) */
    unsigned long rep;    /* repetition counter, identical on every rank */
    unsigned char *sbuf;  /* send buffer and its length in bytes */
    size_t slen;
    unsigned char *rbuf;  /* receive buffer and its length in bytes */
    size_t rlen;
    int count;            /* element count passed to the MPI call */
    int *counts;          /* per-rank element counts (Reduce_scatter) */
    unsigned char ack[4]; /* MPBench's 4-byte acknowledgement */
    char reason[160];     /* why setup declined the point */
} sb_ctx;

typedef struct sb_test {
    const char *name;         /* qualified name, "<suite>.<test>" */
    const char *suite;        /* "mpbench" or "imb" */
    int min_ranks;
    sb_metric metric;
    const char *bytes_per_op; /* formula as --list shows it */
    const char *description;
    sb_timing timing;
    int ops_per_iter;         /* operations one kernel iteration counts for (2: PingPong's half round trip) */
    /* Size the buffers for c->size; return 0, or non-zero with c->reason set to skip. */
    int (*setup)(sb_ctx *c);
    void (*teardown)(sb_ctx *c);       /* NULL: the harness frees sbuf, rbuf, counts */
    double (*bytes)(const sb_ctx *c);  /* bytes per operation for this point */
    void (*kernel)(sb_ctx *c, long inner); /* the timed loop body, `inner` iterations */
    void (*complete)(sb_ctx *c);       /* untimed, after the timer stops (may be NULL) */
    void (*prepare)(sb_ctx *c);        /* --check: fill send data, poison receive buffers (NULL: bytes) */
    long (*verify)(const sb_ctx *c);   /* --check: wrong items received by this rank */
} sb_test;

extern const sb_test sb_tests[];
extern const size_t sb_ntests;
const sb_test *sb_find_test(const char *name);
const char *sb_metric_name(sb_metric m);

typedef struct sb_point {
    const sb_test *test;
    size_t size;
} sb_point;

typedef struct sb_options {
    sb_point *points;
    size_t npoints;
    double ci;        /* target relative half-width of the median's 95% CI */
    double budget;    /* seconds per point */
    long min_reps, max_reps;
    double rep_time;  /* target duration of one repetition, seconds */
    long warmup;
    double settle;    /* seconds of traffic before the first point */
    size_t flush;     /* bytes written between repetitions to evict caches; 0: off */
    int check;
    long inner;       /* forced inner count; 0: calibrate */
    int corrupt_rank; /* tests only (SHOAL_BENCH_CORRUPT): this rank flips a sent byte; -1: none */
} sb_options;

#define SB_MAX_INNER 1000000L

/* options.c */
int sb_parse_options(int argc, char **argv, sb_options *o, char *err, size_t errlen);
void sb_free_options(sb_options *o);

/* harness.c: run one point and write its record on rank 0; collective over comm. */
void sb_run_point(const sb_options *o, const sb_point *p, MPI_Comm comm);
/* Exchange messages for `seconds` (rank 0's clock) before the first point. */
void sb_settle(double seconds, MPI_Comm comm);
/* Allocate this rank's cache-flush buffer (--flush); 0 on success. */
int sb_flush_init(size_t bytes);

/* Buffer helpers for setup functions (kernels.c); 0 on success, else c->reason is set. */
int sb_alloc(sb_ctx *c, size_t slen, size_t rlen);
int sb_fits_int(sb_ctx *c, size_t count, const char *what);

/* pattern.c: check data. Pattern bytes are never 0, so a 0-poisoned buffer never passes. */
unsigned char sb_pattern_byte(int sender, unsigned long rep, size_t index);
void sb_fill_bytes(unsigned char *buf, size_t n, int sender, unsigned long rep, size_t offset);
long sb_verify_bytes(const unsigned char *buf, size_t n, int sender, unsigned long rep, size_t offset);
unsigned char sb_contrib_u8(int rank, int nprocs, unsigned long rep, size_t index);
float sb_contrib_float(int rank, unsigned long rep, size_t index);

/* json_out.c: JSON Lines on stdout. */
void sb_json_string(const char *s);
/* `digits` significant digits: 9 for measurements, 17 for timestamps. */
void sb_json_double(double x, int digits);
void sb_emit_skip(const char *test, size_t size, const char *reason);

#endif
