/* The one timing harness every test runs under.
 *
 * A point is: setup (all ranks agree whether it can run), calibration of
 * the inner count on rank 0, untimed warm-up repetitions, then measured
 * repetitions until rank 0 decides to stop. Each repetition is: optional
 * cache flush and --check fill (untimed), MPI_Barrier (untimed), the
 * kernel's `inner` iterations between two CLOCK_MONOTONIC readings, the
 * test's completion step and --check verification (untimed). Its sample is
 * the repetition time divided by the operations it performed.
 */
#include "bench.h"
#include "shoal_clock.h"
#include "shoal_median_ci.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { GO_ON = 0, STOP_CI, STOP_BUDGET, STOP_MAX_REPS };
static const char *const stop_names[] = {"", "ci", "budget", "max_reps"};

/* ---- buffers ---- */

int sb_fits_int(sb_ctx *c, size_t count, const char *what)
{
    if (count <= (size_t)INT_MAX)
        return 0;
    snprintf(c->reason, sizeof c->reason, "%s of %zu items is above one MPI call's limit of %d", what,
             count, INT_MAX);
    return 1;
}

int sb_alloc(sb_ctx *c, size_t slen, size_t rlen)
{
    /* Page-aligned, as OSU and IMB align theirs: the copy speed of large
     * messages depends on the buffers' alignment, and results must not
     * depend on where malloc happened to put them. */
    long page = sysconf(_SC_PAGESIZE);
    size_t align = page > 0 ? (size_t)page : 4096;
    void *sp = NULL, *rp = NULL;
    if (posix_memalign(&sp, align, slen ? slen : 1) != 0)
        sp = NULL;
    if (posix_memalign(&rp, align, rlen ? rlen : 1) != 0)
        rp = NULL;
    c->sbuf = sp;
    c->rbuf = rp;
    if (!c->sbuf || !c->rbuf) {
        snprintf(c->reason, sizeof c->reason, "cannot allocate %zu B of buffers on rank %d", slen + rlen,
                 c->rank);
        return 1;
    }
    /* Write every page now, with non-zero bytes: first-use page faults fall
     * in setup, not in a sample, and no page stays mapped to the kernel's
     * shared zero page (malloc + memset 0 may become calloc, which writes
     * nothing; sending from untouched pages then reads one cached 4 KiB page
     * over and over and flatters large messages). */
    memset(c->sbuf, 0xa5, slen ? slen : 1);
    memset(c->rbuf, 0x5a, rlen ? rlen : 1);
    c->slen = slen;
    c->rlen = rlen;
    return 0;
}

static void release(const sb_test *t, sb_ctx *c)
{
    if (t->teardown)
        t->teardown(c);
    free(c->sbuf);
    free(c->rbuf);
    free(c->counts);
    c->sbuf = c->rbuf = NULL;
    c->counts = NULL;
}

/* ---- cache flush (--flush) ---- */

static unsigned char *flush_buf;
static size_t flush_len;
static volatile unsigned char flush_sink;

int sb_flush_init(size_t bytes)
{
    if (!bytes)
        return 0;
    flush_buf = malloc(bytes);
    flush_len = flush_buf ? bytes : 0;
    return flush_buf ? 0 : -1;
}

/* Writing a buffer larger than the caches evicts the benchmark's data;
 * it happens outside the timer, so nothing has to be subtracted. */
static void flush_caches(unsigned long rep)
{
    if (!flush_len)
        return;
    memset(flush_buf, (int)(rep & 0xff), flush_len);
    flush_sink = flush_buf[flush_len / 2];
}

/* ---- one repetition ---- */

static void default_prepare(sb_ctx *c)
{
    sb_fill_bytes(c->sbuf, c->slen, c->rank, c->rep, 0);
    memset(c->rbuf, 0, c->rlen);
}

/* Run one repetition; return this rank's time for the whole loop and add
 * any --check errors to *errors. */
static double run_rep(const sb_test *t, sb_ctx *c, const sb_options *o, long inner, long *errors)
{
    flush_caches(c->rep);
    if (c->check) {
        (t->prepare ? t->prepare : default_prepare)(c);
        if (c->rank == o->corrupt_rank && c->slen)
            c->sbuf[c->slen / 2] ^= 0x5a;
    }
    MPI_Barrier(c->comm);
    double t0 = shoal_now_s();
    t->kernel(c, inner);
    double t1 = shoal_now_s();
    if (t->complete)
        t->complete(c);
    if (c->check)
        *errors += t->verify(c);
    c->rep++;
    return t1 - t0;
}

/* The repetition's time as the test defines it, valid on rank 0. */
static double rep_time_at_root(const sb_test *t, sb_ctx *c, double local)
{
    double out = local;
    if (t->timing == SB_TIME_MAX)
        MPI_Reduce(&local, &out, 1, MPI_DOUBLE, MPI_MAX, 0, c->comm);
    return out;
}

static long clamp_inner(double k)
{
    if (!(k >= 1.0))
        return 1;
    return k > (double)SB_MAX_INNER ? SB_MAX_INNER : (long)llround(k);
}

/* Grow the inner count on rank 0 until one repetition takes about
 * --rep-time, then broadcast it, so every rank loops the same number of
 * times. Each trial count is timed CALIBRATION_TRIALS times and the fastest
 * kept: one repetition that lost the CPU to another process must not
 * shrink the count (a preempted first trial at 1 iteration would otherwise
 * leave the barrier's exit skew inside every sample). A trial that ends
 * past the point's budget is the last: one call of 32 MiB on a 100 Mbit/s
 * link is seconds, and two more trials of it would measure nothing new.
 * *same_shape is how many trials ran at the count returned: repetitions
 * exactly like the measured ones, which the warm-up need not repeat;
 * *untimed counts every trial. */
#define CALIBRATION_TRIALS 3

static long calibrate(const sb_test *t, sb_ctx *c, const sb_options *o, double t_point, long *errors,
                      long *untimed, int *same_shape)
{
    long k = 1;
    for (;;) {
        double dt = INFINITY;
        int trials = 0, over_budget = 0;
        while (trials < CALIBRATION_TRIALS && !over_budget) {
            double d = rep_time_at_root(t, c, run_rep(t, c, o, k, errors));
            dt = d < dt ? d : dt;
            trials++;
            (*untimed)++;
            over_budget = c->rank == 0 && shoal_now_s() - t_point > o->budget;
            MPI_Bcast(&over_budget, 1, MPI_INT, 0, c->comm);
        }
        long msg[2] = {k, 0}; /* next inner count, done */
        if (c->rank == 0) {
            if (dt >= 0.5 * o->rep_time || k >= SB_MAX_INNER || over_budget) {
                msg[0] = clamp_inner(dt > 0 ? (double)k * o->rep_time / dt : (double)SB_MAX_INNER);
                msg[1] = 1;
            } else {
                /* At most 10x per step: timer noise on a tiny loop must not overshoot wildly. */
                double growth = dt > 0 ? o->rep_time / dt : 10.0;
                growth = growth > 10.0 ? 10.0 : growth < 2.0 ? 2.0 : growth;
                msg[0] = clamp_inner((double)k * growth);
            }
        }
        MPI_Bcast(msg, 2, MPI_LONG, 0, c->comm);
        if (msg[1]) {
            *same_shape = msg[0] == k ? trials : 0;
            return msg[0];
        }
        k = msg[0];
    }
}

/* A process's first tens of milliseconds of communication run slow (fresh
 * pages and queues, cold caches, a virtual CPU waking up): measured with
 * 8 ms repetitions of an 8-byte PingPong, the first three to five ran at
 * about twice the latency of the rest. Traffic before the first point lets
 * that point measure what the others do. Rank 0's clock decides; every
 * round is one allreduce, so all ranks stop together. */
void sb_settle(double seconds, MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    double start = shoal_now_s();
    for (int stop = 0; !stop;) {
        int mine = rank == 0 && shoal_now_s() - start >= seconds;
        MPI_Allreduce(&mine, &stop, 1, MPI_INT, MPI_MAX, comm);
    }
}

/* ---- the point ---- */

typedef struct {
    double *x; /* samples in time order, seconds per operation */
    size_t n, cap;
    double *scratch;
} samples;

static int samples_push(samples *s, double v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        double *x = realloc(s->x, cap * sizeof *x);
        double *scratch = realloc(s->scratch, cap * sizeof *scratch);
        if (x)
            s->x = x;
        if (scratch)
            s->scratch = scratch;
        if (!x || !scratch)
            return -1;
        s->cap = cap;
    }
    s->x[s->n++] = v;
    return 0;
}

static void emit_point(const sb_test *t, const sb_ctx *c, const sb_options *o, long inner, long untimed,
                       const samples *s, int stop, double t_start, double t_end, long errors,
                       const double *rank_mean)
{
    double median = NAN;
    double ci = shoal_median_ci_rel(s->x, s->n, s->scratch, &median);
    int converged = ci >= 0 && ci <= o->ci && (long)s->n >= o->min_reps;

    printf("{\"type\":\"point\",\"test\":");
    sb_json_string(t->name);
    printf(",\"size_B\":%zu,\"ranks\":%d,\"inner\":%ld,\"ops_per_rep\":%ld,\"bytes_per_op\":%.0f", c->size,
           c->nprocs, inner, inner * t->ops_per_iter, t->bytes(c));
    printf(",\"metric\":\"%s\"", sb_metric_name(t->metric));
    printf(",\"untimed_reps\":%ld", untimed);
    printf(",\"reps\":%zu,\"converged\":%s,\"stop\":\"%s\",\"ci_rel\":", s->n, converged ? "true" : "false",
           stop_names[stop]);
    sb_json_double(ci >= 0 ? ci : NAN, 9);
    printf(",\"median_s\":");
    sb_json_double(median, 9);
    printf(",\"t_start_mono_s\":");
    sb_json_double(t_start, 17);
    printf(",\"t_end_mono_s\":");
    sb_json_double(t_end, 17);
    printf(",\"check\":\"%s\",\"check_errors\":%ld,\"samples_s\":[",
           !c->check ? "off" : errors ? "failed" : "ok", errors);
    for (size_t i = 0; i < s->n; i++) {
        if (i)
            putchar(',');
        sb_json_double(s->x[i], 9);
    }
    printf("],\"rank_mean_s\":[");
    for (int r = 0; r < c->nprocs; r++) {
        if (r)
            putchar(',');
        sb_json_double(rank_mean[r], 9);
    }
    printf("]}\n");
    fflush(stdout);
}

void sb_run_point(const sb_options *o, const sb_point *p, MPI_Comm comm)
{
    const sb_test *t = p->test;
    sb_ctx c;
    memset(&c, 0, sizeof c);
    c.comm = comm;
    MPI_Comm_rank(comm, &c.rank);
    MPI_Comm_size(comm, &c.nprocs);
    c.size = p->size;
    c.check = o->check;

    if (c.nprocs < t->min_ranks) {
        if (c.rank == 0) {
            char reason[128];
            snprintf(reason, sizeof reason, "%s needs at least %d ranks, this run has %d", t->name,
                     t->min_ranks, c.nprocs);
            sb_emit_skip(t->name, c.size, reason);
        }
        return;
    }

    double t_point = shoal_now_s(); /* the budget counts from here */
    /* Every rank must agree before any communication: a rank that cannot
     * allocate its buffers makes the whole point a skip, never a hang. */
    int failed = t->setup(&c) != 0, any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, comm);
    if (any_failed) {
        if (c.rank == 0)
            sb_emit_skip(t->name, c.size,
                         failed ? c.reason : "another rank could not allocate its buffers for this size");
        release(t, &c);
        return;
    }

    long errors = 0;
    int warm = 0; /* calibration repetitions already run at the measured inner count */
    long untimed = 0; /* repetitions run before the measured ones */
    long inner = o->inner ? o->inner : calibrate(t, &c, o, t_point, &errors, &untimed, &warm);
    for (long w = warm; w < o->warmup; w++, untimed++)
        run_rep(t, &c, o, inner, &errors);
    /* The reported window holds the measured repetitions only, so energy
     * over [t_start, t_end] divides by reps * ops_per_rep operations. */
    double t_start = shoal_now_s();

    double ops = (double)inner * t->ops_per_iter;
    double own_sum = 0.0; /* this rank's own time per op, summed over measured reps */
    long own_n = 0;
    samples s = {0};
    size_t next_eval = (size_t)(o->min_reps > SHOAL_CI_MIN_SAMPLES ? o->min_reps : SHOAL_CI_MIN_SAMPLES);
    int stop = GO_ON;
    while (stop == GO_ON) {
        double local = run_rep(t, &c, o, inner, &errors);
        own_sum += local / ops;
        own_n++;
        double dt = rep_time_at_root(t, &c, local);
        long decision = GO_ON;
        if (c.rank == 0) {
            if (samples_push(&s, dt / ops) != 0) {
                decision = STOP_MAX_REPS; /* out of memory for samples: keep what we have */
            } else if (s.n >= next_eval) {
                /* Sorting only when n has grown ~10% keeps the rule's cost negligible. */
                double ci = shoal_median_ci_rel(s.x, s.n, s.scratch, NULL);
                if (ci >= 0 && ci <= o->ci)
                    decision = STOP_CI;
                size_t grown = (size_t)ceil((double)s.n * 1.1);
                next_eval = grown > s.n ? grown : s.n + 1;
            }
            if (decision == GO_ON && (long)s.n >= o->max_reps)
                decision = STOP_MAX_REPS;
            if (decision == GO_ON && shoal_now_s() - t_point > o->budget)
                decision = STOP_BUDGET;
        }
        MPI_Bcast(&decision, 1, MPI_LONG, 0, comm);
        stop = (int)decision;
    }
    double t_end = shoal_now_s();

    double own_mean = own_sum / (double)own_n;
    double *rank_mean = c.rank == 0 ? malloc((size_t)c.nprocs * sizeof *rank_mean) : NULL;
    if (c.rank == 0 && !rank_mean) {
        fprintf(stderr, "shoal-bench: out of memory gathering per-rank means\n");
        MPI_Abort(comm, 1);
    }
    MPI_Gather(&own_mean, 1, MPI_DOUBLE, rank_mean, 1, MPI_DOUBLE, 0, comm);
    long total_errors = 0;
    MPI_Reduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM, 0, comm);
    if (c.rank == 0)
        emit_point(t, &c, o, inner, untimed, &s, stop, t_start, t_end, total_errors, rank_mean);

    free(rank_mean);
    free(s.x);
    free(s.scratch);
    release(t, &c);
}
