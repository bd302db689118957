/* libshoalwait: internal interface shared by its source files.
 *
 * config.c    reads and validates SHOAL_WAIT* once, before MPI_Init
 * policy.c    the wait loop and the sleep policies (one per mode)
 * telemetry.c per-function counters (atomics) and the JSON file at finalize
 * init.c      MPI_Init/Init_thread/Finalize: identity check, timer slack
 * recv_cache.c persistent receive requests reused per call site
 * alltoall.c  MPI_Alltoall in the blocking call's shape (Bruck's, pairwise) where the
 *             MPI's nonblocking form posts every block at once
 * rhythm.c    the fit that predicts a call site's next arrival
 * traffic.c   bytes and messages sent to each rank (who talks to whom)
 * wake.c      sleeps that end at a socket event (the epoll set of TCP sockets)
 * wrap_p2p.c, wrap_coll.c, wrap_fortran.c   the interposed MPI entry points
 */
#ifndef SHOALWAIT_H
#define SHOALWAIT_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

/* Everything declared here is internal: hidden symbols are called directly,
 * not through the PLT (the wait path is a handful of calls per message).
 * The MPI_* and mpi_* entry points keep the default visibility of mpi.h. */
#pragma GCC visibility push(hidden)

enum sw_mode { SW_BUSY, SW_YIELD, SW_SLEEP, SW_LINEAR, SW_BACKOFF, SW_AUTO, SW_EVENT };

/* How a rewritten MPI_Alltoall runs (SHOAL_WAIT_ALLTOALL): in the shape of the MPI's
 * blocking call (auto), always pairwise, always Bruck's, or always the MPI's nonblocking
 * form. */
enum sw_alltoall { SW_A2A_AUTO, SW_A2A_PAIRWISE, SW_A2A_BRUCK, SW_A2A_MPI };

/* Call classes that can be switched on and off (SHOAL_WAIT_CLASSES). */
enum sw_class { SW_P2P = 1, SW_SEND = 2, SW_COLL = 4 };

/* Every wrapped function, for telemetry. Keep in step with sw_fn_names. */
enum sw_fn {
    F_RECV, F_MRECV, F_PROBE, F_MPROBE, F_WAIT, F_WAITALL, F_WAITANY, F_WAITSOME,
    F_SEND, F_SSEND, F_SENDRECV, F_SENDRECV_REPLACE,
    F_BARRIER, F_BCAST, F_REDUCE, F_ALLREDUCE, F_GATHER, F_GATHERV, F_SCATTER,
    F_SCATTERV, F_ALLGATHER, F_ALLGATHERV, F_ALLTOALL, F_ALLTOALLV,
    F_REDUCE_SCATTER, F_REDUCE_SCATTER_BLOCK,
    F_COUNT
};
_Static_assert(F_COUNT <= 32, "sw_config.active has a bit per function");
extern const char *const sw_fn_names[F_COUNT];
extern const int sw_fn_class[F_COUNT];

/* Read-only after sw_configure() (called once, before MPI_Init returns). */
struct sw_config {
    enum sw_mode mode;
    char mode_text[128];
    int classes;            /* bitmask of enum sw_class */
    int64_t sleep_ns;       /* sleep:US */
    int64_t dmin_ns, dmax_ns, dstep_ns;   /* linear */
    int64_t spin_ns;        /* backoff/auto: spin before the first sleep */
    int64_t cap_ns;         /* backoff/auto: longest single sleep */
    double target;          /* auto: added wake-up delay / wait duration */
    int64_t slack_ns;       /* timer slack asked for each waiting thread */
    int64_t send_eager_B;   /* blocking sends smaller than this pass through */
    int64_t floor_ns;       /* the shortest sleep the device really sleeps (0: unknown) */
    int wake_on_socket;     /* sleeps end early at a TCP socket event (SHOAL_WAIT_WAKE) */
    enum sw_alltoall alltoall;
    /* An emulated device runs this many times slower than real time (SHOAL_WAIT_DILATION):
     * every duration above was given in device time and is held here in host time, and so
     * are the policy's own (below); the kernel's timer slack is stretched alike. */
    double dilation;
    int64_t long_ns;        /* a wait this long carries its site's rhythm */
    int64_t min_margin_ns;  /* the narrowest window around a predicted arrival */
    int64_t min_cap_ns;     /* the shortest cap a rhythm sets */
    int64_t first_sleep_ns; /* the first exponential sleep where no floor is known */
    char telemetry_dir[4096];
    /* Derived once from the above, read on every call: */
    uint32_t active;        /* bit fn set: calls of enum sw_fn fn are rewritten */
    uint32_t wrapped;       /* bit fn set: rewritten or timed (else straight to PMPI) */
    int timed;              /* telemetry on: calls are timed */
};
extern struct sw_config sw_cfg;

/* Parse the environment; on a bad value print one line and exit(2). */
void sw_configure(void);
/* One line on stderr from the first rank only (others stay quiet). */
void sw_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int sw_env_rank(void);
/* sw_say, then exit(code): for configurations the library must refuse. */
void sw_fatal(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

static inline int sw_active(int fn)
{
    return (sw_cfg.active >> fn) & 1;
}

/* The wait loop: call test(ctx, &done) until done, sleeping by the policy.
 * site identifies the caller (return address) for the learned policies.
 * Returns the first non-success code of test(), else MPI_SUCCESS. */
typedef int (*sw_test_fn)(void *ctx, int *done);
int sw_wait(int fn, const void *site, sw_test_fn test, void *ctx);
/* sw_wait() on one request (PMPI_Test), the common case, made lean. */
int sw_wait_request(int fn, const void *site, MPI_Request *req, MPI_Status *status);

/* The last SW_HISTORY values of one quantity of a call site, and the fit
 * that predicts the next one (rhythm.c). */
#define SW_HISTORY 8
struct sw_series {
    int64_t v[SW_HISTORY];
    int n, head;            /* values held; where the next one goes */
};
struct sw_fit {
    int64_t next;           /* the next value, extrapolated */
    int64_t margin;         /* how far off it may be, from the spread of the fit */
    int64_t median;         /* the typical value */
};
void sw_series_push(struct sw_series *s, int64_t x);
/* 0 while the series is too short to predict anything. */
int sw_series_fit(const struct sw_series *s, struct sw_fit *f);

/* What became of a call's prediction of its arrival. */
enum sw_outcome { SW_UNPREDICTED, SW_HIT, SW_EARLY, SW_LATE };

/* Telemetry of one finished call. */
struct sw_call {
    int64_t wait_ns;        /* from entry to completion noticed */
    int64_t sleep_ns;       /* wall time spent inside clock_nanosleep */
    int64_t oversleep_ns;   /* sleep time beyond what was asked */
    int64_t sleeps, yields, tests;
    int64_t notice_ns;      /* completion noticed minus last failed test; -1: first test */
    const void *site;       /* the call site (return address) */
    enum sw_outcome outcome;
    int64_t miss_ns;        /* early/late: at least this far outside the predicted window */
    int64_t rhythm_ns;      /* the site's typical interval (0: none learned) */
    int64_t cap_ns;         /* the longest backoff sleep this call allowed (0: it never paused) */
};
void sw_record(int fn, const struct sw_call *call);

/* A call that is not rewritten: straight to PMPI, timed only for telemetry. */
#define SW_PASS(fn, call)                                                        \
    do {                                                                         \
        if (!sw_cfg.timed)                                                       \
            return call;                                                         \
        int64_t t0_ = sw_now_ns();                                               \
        int rc_ = call;                                                          \
        struct sw_call c_ = {.wait_ns = sw_now_ns() - t0_, .tests = 1, .notice_ns = -1}; \
        sw_record(fn, &c_);                                                      \
        return rc_;                                                              \
    } while (0)
/* At a C entry point: a call neither rewritten nor timed goes straight to
 * PMPI as a tail call, before any frame of the library's own is set up. */
#define SW_DIRECT(fn, call)                                                      \
    do {                                                                         \
        if (!((sw_cfg.wrapped >> (fn)) & 1))                                     \
            return call;                                                         \
    } while (0)
void sw_telemetry_write(int rank, int size);
void sw_slack_thread(void);   /* per-thread timer slack, once per thread */
extern int sw_slack_errno;    /* errno of a refused PR_SET_TIMERSLACK, 0 if fine */
extern int64_t sw_slack_got_ns;

int64_t sw_now_ns(void);

/* traffic.c, all no-ops unless telemetry is on. After MPI_Init: */
void sw_traffic_start(void);
/* A point-to-point send of count items to dest of comm. */
void sw_traffic_send(MPI_Comm comm, int dest, int count, MPI_Datatype type);
/* A collective's logical messages from this rank: to rank `to` of comm, to every
 * other rank, or counts[i] items to each other rank i. */
void sw_traffic_to_one(MPI_Comm comm, int to, int count, MPI_Datatype type);
void sw_traffic_to_all(MPI_Comm comm, int count, MPI_Datatype type);
void sw_traffic_to_each(MPI_Comm comm, const int counts[], MPI_Datatype type);
/* The "traffic" member of the telemetry file (starts with a comma). */
void sw_traffic_write(FILE *f);

/* wake.c: after MPI_Init, find the process's TCP sockets (if wake_on_socket). */
void sw_wake_start(void);
/* Sleep d ns, or until a socket event; 1 when an event ended it. */
int sw_sleep(int64_t d);
extern int64_t sw_wakes;   /* sleeps ended by a socket event, all threads */
extern int64_t sw_alltoall_pairwise_calls, sw_alltoall_bruck_calls; /* alltoall.c */
extern int64_t sw_alltoall_comms_made;
extern int sw_alltoall_world_in_init;

#pragma GCC visibility pop

#endif
