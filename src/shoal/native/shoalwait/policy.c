/* The wait loop and its sleep policies.
 *
 * Every blocking call becomes: test; if not done, pause; test again. The
 * pause is what the mode decides:
 *   yield    sched_yield() (what Open MPI's yield_when_idle does)
 *   sleep    a fixed clock_nanosleep
 *   linear   dmin, dmin+dstep, ... up to dmax, restarting at dmin on every
 *            call (the receiver of 003's Figure 3)
 *   backoff  spin for spin_ns, then sleep.
 *            Each call site (return address) remembers its last waits and
 *            arrival intervals: when they were long, the rank sleeps
 *            (in pieces of at most cap_ns) until shortly before the expected
 *            completion (earlier by how late the kernel's wake-ups have
 *            been, at a high quantile, or by the margin this site learned
 *            from its own late wake-ups), and tests from there; past
 *            that (or with no history) sleeps double, each at most 1/8 of
 *            the time already waited and at most cap_ns. The relative bound
 *            keeps the added delay proportional to the wait; the cap keeps
 *            idle ranks cheap.
 *   auto     backoff whose cap is tuned per call site after every wait so
 *            the delay noticed after completion stays under target x wait
 *            (backoff's margin learns against a fixed 1/16 of the wait).
 * All policy state is per thread (TLS): no locks on the wait path.
 */
#define _GNU_SOURCE
#include "shoalwait.h"

#include <sched.h>
#include <time.h>

int64_t sw_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#define SITES 64          /* direct-mapped per-thread table of call sites */
#define HISTORY 3         /* completed waits remembered per site */
#define AUTO_MIN_CAP_NS 50000  /* auto never caps sleeps below this */
#define BACKOFF_LATE 0.0625    /* backoff: a wake-up later than this x the wait is late */
#define TIGHT_NS 20000    /* an arrival bound this close anchors the period */
#define POLL_NS 1         /* the shortest sleep: wakes after the kernel's latency */
/* What pause_ns() returns besides a sleep length: */
#define PAUSE_TEST 0      /* test again at once */
#define PAUSE_YIELD (-1)  /* sched_yield() */
#define PAUSE_ZERO (-2)   /* clock_nanosleep(0): sleep:0, "sleeping zero is not zero" (003) */

struct site {
    const void *key;
    int64_t recent[HISTORY];   /* durations of the last waits, ns */
    int n;                     /* how many of recent[] are filled */
    int64_t interval[HISTORY]; /* between the last arrivals' lower bounds, ns */
    int ni;
    int64_t last_lb;           /* last arrival known to within TIGHT_NS (abs ns), 0: none */
    int since;                 /* arrivals after last_lb (not known as closely) */
    int64_t cap_ns;            /* auto: this site's current cap */
    int64_t guard_ns;          /* learned wake-up margin before an expected arrival */
    int spins;                 /* the next wait starts with a spin (see spins()) */
};

struct thread_state {
    struct site sites[SITES];
    int64_t oversleep_ns;      /* running estimate of how late sleeps end */
    int64_t oversleep_hi;      /* the same, a high quantile: a peak that decays */
    int slack_set;
};

/* initial-exec: the library is preloaded, so its TLS is static and every
 * access is a plain offset instead of a __tls_get_addr call on the fast path. */
static __thread struct thread_state ts __attribute__((tls_model("initial-exec")));

static int spins(const struct site *s);

static struct site *site_for(const void *key)
{
    uintptr_t h = (uintptr_t)key;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ULL;
    struct site *s = &ts.sites[(h >> 58) & (SITES - 1)];
    if (s->key != key) {
        s->key = key;
        s->n = 0;
        s->ni = 0;
        s->last_lb = 0;
        s->since = 0;
        s->cap_ns = sw_cfg.cap_ns;
        s->guard_ns = 0;
        s->spins = spins(s);
    }
    return s;
}

static int64_t shortest(const int64_t *v, int n)
{
    int64_t m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < m)
            m = v[i];
    return m;
}

static void push(int64_t *v, int *n, int64_t x)
{
    for (int i = HISTORY - 1; i > 0; i--)
        v[i] = v[i - 1];
    v[0] = x;
    if (*n < HISTORY)
        (*n)++;
}

/* When the next completion is expected (absolute ns), 0 if unknown.
 * Two guesses, the earlier wins (waking early costs CPU, late costs time):
 *   start + the shortest recent wait (request/response: waits repeat);
 *   last arrival + the shortest recent interval (periodic streams). The
 *   arrival is anchored at its lower bound, the last failed test before it,
 *   so one late wake-up does not push the next guesses late. */
static int64_t expected_at(const struct site *s, int64_t start)
{
    int64_t by_wait = s->n ? start + shortest(s->recent, s->n) : 0;
    int64_t by_period = s->ni && s->last_lb && s->since <= 4
                            ? s->last_lb + (s->since + 1) * shortest(s->interval, s->ni) : 0;
    if (by_wait && by_period)
        return by_wait < by_period ? by_wait : by_period;
    return by_wait ? by_wait : by_period;
}

/* lb: the last failed test before completion (abs ns), 0 if not clocked;
 * predicted: the wait slept towards an expected arrival. */
static void remember(struct site *s, int64_t wait_ns, int64_t notice_ns, int64_t sleeps,
                     int64_t lb, int predicted)
{
    push(s->recent, &s->n, wait_ns);
    /* An arrival anchors the period only when the last failed test came
     * shortly before it: after a long sleep the bound is loose, and an
     * interval measured from it would come out too short. Between two tight
     * anchors a few loose arrivals may lie: the interval is shared out. */
    if (!lb) {   /* not clocked: a short wait, no period to anchor */
        s->last_lb = 0;
        s->since = 0;
    } else if (s->since < (1 << 20))
        s->since++;
    int64_t tight_ns = wait_ns / 16 > TIGHT_NS ? wait_ns / 16 : TIGHT_NS;
    if (lb && notice_ns >= 0 && notice_ns <= tight_ns) {
        if (s->last_lb && lb > s->last_lb && s->since <= 4)
            push(s->interval, &s->ni, (lb - s->last_lb) / s->since);
        s->last_lb = lb;
        s->since = 0;
    }
    /* Only waits that slept say anything about the cap and the margin. */
    if (sleeps > 0 && notice_ns >= 0 && (sw_cfg.mode == SW_AUTO || sw_cfg.mode == SW_BACKOFF)) {
        double allowed = (sw_cfg.mode == SW_AUTO ? sw_cfg.target : BACKOFF_LATE) * (double)wait_ns;
        if (sw_cfg.mode == SW_AUTO) {
            if ((double)notice_ns > allowed && s->cap_ns > AUTO_MIN_CAP_NS)
                s->cap_ns /= 2;
            else if ((double)notice_ns < allowed / 2 && s->cap_ns < sw_cfg.cap_ns)
                s->cap_ns *= 2;
            if (s->cap_ns > sw_cfg.cap_ns)
                s->cap_ns = sw_cfg.cap_ns;
        }
        /* Where arrivals are predicted the cap is not what makes a wake-up
         * late: the margin before the expected arrival is. Late: double it
         * (up to half the wait); on time: let it shrink slowly. */
        if (predicted) {
            if ((double)notice_ns > allowed) {
                int64_t g = 2 * s->guard_ns + 20000;
                s->guard_ns = g < wait_ns / 2 ? g : wait_ns / 2;
            } else if ((double)notice_ns < allowed / 2) {
                s->guard_ns -= s->guard_ns / 16;
            }
        }
    }
    s->spins = spins(s);
}

/* remember() of a wait that ended within its pure tests, without the
 * stores when the history already says so (a steady stream of short waits). */
static inline void remember_short(struct site *s)
{
    if (s->n == HISTORY && !(s->recent[0] | s->recent[1] | s->recent[2] | s->last_lb))
        return;
    remember(s, 0, -1, 0, 0, 0);
}

/* Tests made before the clock is first read. A clock read costs about as
 * much as a test (~40 ns in a VM) and the fast path is what ping-pong
 * latency sees: a wait that completes within these tests (a few µs) reads
 * no clock at all unless telemetry is on. Where waits are long, or the mode
 * pauses from the first failed test, one test comes before the clock. */
#define PURE_TESTS 64

/* Spin only where waits are short or unknown: a long expected wait is
 * better slept through than spun away. */
static int spins(const struct site *s)
{
    if (sw_cfg.mode != SW_BACKOFF && sw_cfg.mode != SW_AUTO)
        return 0;   /* the fixed policies pause from the first failed test */
    int64_t w = s->n ? shortest(s->recent, s->n) : 0;
    return w == 0 || w <= 4 * sw_cfg.spin_ns;
}

struct plan {
    struct site *site;
    int64_t expect;   /* expected wait from history (from the clock start), 0 if unknown */
    int64_t spin;     /* spin budget for this call */
    int64_t next;     /* next exponential sleep */
    int64_t linear;   /* next linear sleep */
};

static void plan_start(struct plan *p, struct site *site)
{
    p->site = site;
    p->expect = 0;   /* set by plan_clock() once the clock is read */
    p->spin = site->spins ? sw_cfg.spin_ns : 0;
    p->next = 1000;
    p->linear = sw_cfg.dmin_ns;
}

static void plan_clock(struct plan *p, int64_t start)
{
    int64_t at = expected_at(p->site, start);
    p->expect = at > start ? at - start : (at ? 1 : 0);
}

/* How long to pause after a failed test, `elapsed` ns into the wait:
 * a sleep length (ns) or one of the PAUSE_* above. */
static int64_t pause_ns(struct plan *p, int64_t elapsed)
{
    switch (sw_cfg.mode) {
    case SW_YIELD:
        return PAUSE_YIELD;
    case SW_SLEEP:
        return sw_cfg.sleep_ns ? sw_cfg.sleep_ns : PAUSE_ZERO;
    case SW_LINEAR: {
        int64_t d = p->linear;
        p->linear = d + sw_cfg.dstep_ns > sw_cfg.dmax_ns ? sw_cfg.dmax_ns : d + sw_cfg.dstep_ns;
        return d;
    }
    default:
        break;
    }
    /* Spin with plain tests. (Yielding here was tried: when a yield costs
     * more than the spin, ping-pong partners settle into yielding on every
     * message, 30x slower.) */
    if (elapsed < p->spin)
        return 0;
    int64_t cap = sw_cfg.mode == SW_AUTO ? p->site->cap_ns : sw_cfg.cap_ns;
    double rel = sw_cfg.mode == SW_AUTO ? sw_cfg.target : 0.125;
    if (p->expect > 0) {
        /* Wake early enough that the sleep's own lateness and a little
         * jitter in the pattern still land before the expected completion. */
        int64_t guard = ts.oversleep_hi < p->expect / 4 ? ts.oversleep_hi : p->expect / 4;
        if (p->site->guard_ns > guard)
            guard = p->site->guard_ns;   /* learned from this site's late wake-ups */
        int64_t wake = p->expect - p->expect / 32 - guard - 20000;
        if (elapsed < wake) {
            /* In pieces of at most the cap: a pattern that changes (a
             * message far earlier than the history says) is noticed
             * within one cap, not at the old expected time. */
            int64_t d = wake - elapsed - ts.oversleep_ns;
            if (d > cap)
                d = cap;
            return d > POLL_NS ? d : POLL_NS;
        }
        /* Around the expected time: test, neither sleep nor yield. A wake-up
         * from sleep can take hundreds of µs on a busy or virtual machine;
         * the guard above is slept through, this window is not. A yield
         * here hands the CPU to whatever else is runnable on it (the
         * sender itself, when the kernel placed both ranks on one CPU) for
         * up to a time slice. */
        if (elapsed < p->expect + p->expect / 4 + 100000)
            return 0;
    }
    int64_t d = p->next;
    if (d < cap)
        p->next = d * 2;   /* stops at the cap: never overflows */
    int64_t bound = (int64_t)(rel * (double)elapsed);
    if (d > bound)
        d = bound;
    if (d > cap)
        d = cap;
    return d > POLL_NS ? d : POLL_NS;
}

/* The wait after `tested` failed tests: clock, pauses, learning, telemetry. */
static __attribute__((noinline)) int wait_slow(int fn, struct site *site, sw_test_fn test,
                                               void *ctx, int pure, int tested)
{
    if (!ts.slack_set) {
        ts.slack_set = 1;
        sw_slack_thread();
    }
    const int timed = sw_cfg.timed;
    struct sw_call call = {.notice_ns = -1, .tests = tested};
    struct plan plan;
    plan_start(&plan, site);
    int64_t start = timed ? sw_now_ns() : -1, last_fail = -1, now = start;
    int done = 0, rc = MPI_SUCCESS, clocked = 0;
    for (;;) {
        if (call.tests >= pure) {   /* the last test failed: pause */
            now = sw_now_ns();
            if (start < 0)
                start = now;   /* the pure spin before this is not counted */
            if (!clocked) {
                plan_clock(&plan, start);
                clocked = 1;
            }
            last_fail = now;
            int64_t d = pause_ns(&plan, now - start);
            if (d == PAUSE_YIELD) {
                sched_yield();
                call.yields++;
            } else if (d != PAUSE_TEST) {
                if (d == PAUSE_ZERO)
                    d = 0;
                struct timespec req = {d / 1000000000LL, d % 1000000000LL};
                clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
                int64_t after = sw_now_ns(), slept = after - now, over = slept - d;
                call.sleeps++;
                call.sleep_ns += slept;
                call.oversleep_ns += over > 0 ? over : 0;
                /* Exponential average (1/8) of the kernel's wake-up lateness. */
                ts.oversleep_ns += ((over > 0 ? over : 0) - ts.oversleep_ns) / 8;
                /* Wake-ups late by more than this are rare (a peak that
                 * decays by 1/32 per sleep): the guard before an expected
                 * arrival, so that the rank is awake for it. */
                ts.oversleep_hi = over > ts.oversleep_hi
                                      ? over : ts.oversleep_hi - (ts.oversleep_hi - over) / 32;
            }
        }
        rc = test(ctx, &done);
        call.tests++;
        if (rc != MPI_SUCCESS || done)
            break;
    }
    if (start >= 0) {
        now = sw_now_ns();
        call.wait_ns = now - start;
        /* Without a failed test after the clock started, the start bounds
         * the last failed test from below. */
        if (call.tests > 1)
            call.notice_ns = now - (last_fail >= 0 ? last_fail : start);
    }   /* else: done within the pure spin; a short wait, recorded as 0 */
    if (rc == MPI_SUCCESS)
        remember(site, call.wait_ns, call.notice_ns, call.sleeps,
                 last_fail >= 0 ? last_fail : 0, plan.expect > 1);
    if (timed)
        sw_record(fn, &call);
    return rc;
}

struct one { MPI_Request *req; MPI_Status *status; };
static int test_one(void *c, int *done)
{
    struct one *x = c;
    return PMPI_Test(x->req, done, x->status);
}

/* The fast path first: a wait that completes within its pure tests (a
 * ping-pong partner, a message already there) costs the tests, a table
 * lookup and a compare; everything else is wait_slow(). Inlined into both
 * callers so that a known test function becomes a direct call. */
static inline __attribute__((always_inline)) int wait_fast(int fn, const void *key,
                                                           sw_test_fn test, void *ctx)
{
    struct site *site = site_for(key);
    int pure = site->spins ? PURE_TESTS : 1;
    if (sw_cfg.timed)
        return wait_slow(fn, site, test, ctx, pure, 0);
    for (int tested = 0; tested < pure;) {
        int done = 0, rc = test(ctx, &done);
        tested++;
        if (__builtin_expect(rc != MPI_SUCCESS || done, 0)) {
            if (rc == MPI_SUCCESS)
                remember_short(site);
            return rc;
        }
    }
    return wait_slow(fn, site, test, ctx, pure, pure);
}

int sw_wait(int fn, const void *key, sw_test_fn test, void *ctx)
{
    return wait_fast(fn, key, test, ctx);
}

/* sw_wait() on one request, MPI_Test called directly: the wait of every
 * Recv, Wait, Send and collective goes through here. */
int sw_wait_request(int fn, const void *key, MPI_Request *req, MPI_Status *status)
{
    struct one x = {req, status};
    return wait_fast(fn, key, test_one, &x);
}
