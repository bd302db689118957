/* The wait loop and its sleep policies.
 *
 * Every blocking call becomes: test (twice: PAUSE_AFTER); if not done, pause;
 * test again. The pause is what the mode decides:
 *   yield    sched_yield() (what Open MPI's yield_when_idle does)
 *   sleep    a fixed clock_nanosleep (sleep:0 included)
 *   linear   dmin, dmin+dstep, ... up to dmax, restarting at dmin on every
 *            call (the receiver of 003's Figure 3)
 *   backoff  spin while waits are short; then, where the call site's
 *            arrivals keep a rhythm, sleep (in stretches of at most
 *            cap_ns) to shortly before the predicted arrival and test from there through a
 *            window as wide as the rhythm's own spread; with no usable
 *            rhythm, or past the window (a miss), sleeps double from 1 us,
 *            each at most 1/8 of the time waited and at most a cap tied
 *            to the rhythm (1/32 of the site's typical interval, at most
 *            cap_ns). Where the device's sleep floor is known
 *            (SHOAL_WAIT_FLOOR_NS, from shoal wait calibrate) the spin lasts
 *            until 1/8 of the time waited covers it, and sleeps start at it.
 *   auto     backoff whose cap is also tuned per call site after every wait
 *            so the delay noticed after completion stays under target x wait.
 *   event    sleeps of cap_ns, each ended at once by a TCP socket event
 *            (wake.c): no spin, no prediction, no short sleeps (but one of at
 *            most SETTLE_NS after a wake-up that completed nothing), so a waiting
 *            rank costs almost no CPU. An emulated device's CPU quota needs
 *            that: a rank that polls spends the quota and stalls until the
 *            next period. Messages without a socket (shared memory) are
 *            noticed within the cap.
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
#define SHORT_RUN 0xFFu   /* the last 8 waits, one bit each: 1 = short */
#define LOOSE_DIV 8       /* an arrival known to within 1/8 of its wait is learned from */
#define RHYTHM_CAP_DIV 32      /* the backoff cap: 1/32 of the site's typical interval */
#define MISS_CAP_DIV 128       /* past a missed window: 1/128 of the interval */
#define MAX_PERIODS 16    /* a rhythm not seen for this many periods is stale */
/* Durations the policy takes as device time are in sw_cfg (config.c): they stretch with
 * an emulated device's dilation. These are host time: how late the host's kernel wakes. */
#define LATE_RING 32      /* recent lateness of long sleeps, per thread */
#define LONG_SLEEP_NS 100000   /* sleeps at least this long feed the lateness ring */
#define GUARD_DEFAULT_NS 100000   /* the guard before any lateness was measured */
#define POLL_NS 1         /* the shortest sleep: wakes after the kernel's latency */
#define POLL_WINDOW_DIV 128   /* a window is tested through (a core for its length) only when it is
                                 under 1/128 of the interval: the rest of a 1-2 % CPU budget pays
                                 for the wake-up and the receive themselves */
#define PAUSE_AFTER 2   /* failed tests before each pause: an Open MPI test that finds nothing
                           reads its transports, and only the next one matches what that read
                           brought (with one, every message that arrived during a sleep cost
                           a second sleep) */
#define WAKE_TESTS 15   /* tests after a socket wake-up before the next pause: Open MPI
                           reads its TCP sockets in one opal_progress call of eight */
#define SETTLE_NS 12000000   /* ... and only if 10 ms passed since it last read them
                                (its event tick): so after a wake-up whose tests found
                                nothing, the next sleep lasts at most this, then tests
                                again. The wake-up consumed the socket's edge: a longer
                                sleep would not end when the library is ready to read. */
/* What pause_ns() returns besides a sleep length: */
#define PAUSE_TEST 0      /* test again at once */
#define PAUSE_YIELD (-1)  /* sched_yield() */
#define PAUSE_ZERO (-2)   /* clock_nanosleep(0): sleep:0, "sleeping zero is not zero" (003) */

struct site {
    const void *key;           /* the fast path reads these three only */
    int spins;                 /* the next wait starts with a spin */
    unsigned shorts;           /* bit i: the i-th last wait was short; all ones: nothing to store */
    struct sw_series intervals;   /* between the arrivals that ended long waits, ns */
    struct sw_series waits;       /* durations of long waits, ns (request/response) */
    int64_t anchor_ns;         /* last arrival known closely (abs ns, middle of its bounds), 0: none */
    int64_t anchor_u;          /* half the width of its bounds */
    int since;                 /* long waits ended since, by arrivals known too loosely */
    int64_t last_u;            /* half the width of the last long wait's arrival bounds */
    int64_t longest;           /* the longest recent wait, decaying by 1/8 a wait */
    int distrust;              /* the last prediction missed: the next wait backs off */
    int64_t cap_ns;            /* auto: this site's tuned cap */
};

struct thread_state {
    struct site sites[SITES];
    int64_t late[LATE_RING];   /* how late recent long sleeps ended, ns */
    int nlate, late_head;
    int slack_set;
};

/* initial-exec: the library is preloaded, so its TLS is static and every
 * access is a plain offset instead of a __tls_get_addr call on the fast path. */
static __thread struct thread_state ts __attribute__((tls_model("initial-exec")));

static inline int learns(void)
{
    return sw_cfg.mode == SW_BACKOFF || sw_cfg.mode == SW_AUTO;
}

/* A call site's entry: one of two slots its address hashes to (two call
 * sites that share one slot, a probe and the receive after it, say, would
 * otherwise wipe each other's history on every call). */
static __attribute__((noinline)) struct site *site_other(const void *key, uint64_t h)
{
    struct site *a = &ts.sites[(h >> 58) & (SITES - 1)], *b = &ts.sites[(h >> 52) & (SITES - 1)];
    if (b->key == key)
        return b;
    struct site *s = !a->key ? a : b;   /* a free first slot, else the second one */
    *s = (struct site){.key = key, .cap_ns = sw_cfg.cap_ns, .shorts = SHORT_RUN,
                       /* the fixed policies pause from the first failed test */
                       .spins = learns()};
    return s;
}

static inline struct site *site_for(const void *key)
{
    uint64_t h = (uintptr_t)key;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ULL;
    struct site *s = &ts.sites[(h >> 58) & (SITES - 1)];
    return s->key == key ? s : site_other(key, h);
}

/* This thread's guard against the kernel's late wake-ups: about the 90th
 * percentile of how late its recent long sleeps ended (a wake-up later than
 * that is rare, and noticed late by only what exceeds the guard). */
static int64_t guard_ns(void)
{
    int n = ts.nlate;
    if (!n)
        return GUARD_DEFAULT_NS;
    int64_t v[LATE_RING];
    for (int i = 0; i < n; i++) {
        int64_t x = ts.late[i];
        int j = i - 1;
        for (; j >= 0 && v[j] > x; j--)
            v[j + 1] = v[j];
        v[j + 1] = x;
    }
    return v[n - 1 - n / 10];
}

/* A wait that ended within its pure tests: short, no rhythm to learn. No
 * store at all once the last eight were short (a steady stream of them). */
static inline void remember_short(struct site *s)
{
    if ((s->shorts & SHORT_RUN) == SHORT_RUN)
        return;
    s->shorts = s->shorts << 1 | 1;
    s->spins = 1;
}

/* A wait that was clocked: [lb, ub] bounds its arrival (the last failed
 * test, and the test that found it complete). */
static void remember(struct site *s, int64_t start, int64_t wait_ns, int64_t lb, int64_t ub)
{
    if (!learns())
        return;
    int is_short = wait_ns <= 4 * sw_cfg.spin_ns;
    s->shorts = s->shorts << 1 | (unsigned)is_short;
    /* Spin only where waits are short or unknown: a long expected wait is
     * better slept through than spun away. */
    s->spins = (s->shorts & SHORT_RUN) != 0;
    if (wait_ns < sw_cfg.long_ns || lb <= 0)
        return;   /* the rhythm is that of the waits that end a pause */
    int64_t u = (ub - lb) / 2, at = lb + u;
    s->last_u = u;
    if (u > wait_ns / LOOSE_DIV) {   /* known too loosely (found at the end of a long sleep) */
        if (s->anchor_ns && ++s->since > MAX_PERIODS)
            s->anchor_ns = 0;   /* too long unanchored: start over */
        return;
    }
    sw_series_push(&s->waits, at - start);
    /* Bursts: the waits between the messages of one burst, short next to
     * the pauses, are not the period; the pauses are (003's Experiment A). */
    int64_t longest = s->longest - s->longest / 8;   /* a peak that decays */
    s->longest = wait_ns > longest ? wait_ns : longest;
    if (wait_ns < s->longest / 8)
        return;
    if (s->anchor_ns && at > s->anchor_ns) {   /* shared out over the loose arrivals between */
        int64_t iv = (at - s->anchor_ns) / (s->since + 1);
        struct sw_fit f;
        /* After a long silence the rhythm resumes: no interval spans it. */
        if (!sw_series_fit(&s->intervals, &f) || iv <= MAX_PERIODS * f.median)
            sw_series_push(&s->intervals, iv);
    }
    s->anchor_ns = at;
    s->anchor_u = u;
    s->since = 0;
}

/* Tests made before the clock is first read. A clock read costs about as
 * much as a test (~40 ns in a VM) and the fast path is what ping-pong
 * latency sees: a wait that completes within these tests (a few µs) reads
 * no clock at all unless telemetry is on. Where waits are long, or the mode
 * pauses from the first failed tests, PAUSE_AFTER tests come before the clock. */
#define PURE_TESTS 64

struct plan {
    struct site *site;
    int64_t spin;     /* spin budget for this call */
    int64_t next;     /* next exponential sleep */
    int64_t linear;   /* next linear sleep */
    int64_t from;     /* abs ns the exponential sleeps' relative bound counts from */
    int64_t cap;      /* longest exponential sleep: tied to the rhythm */
    int64_t tight_cap, tight_at;   /* the cap from tight_at on (0: never), see tighten_cap */
    int64_t rhythm;   /* the site's typical interval, 0 if none */
    int predicted;    /* sleeping towards a predicted arrival */
    int missed;       /* past the predicted window */
    int poll;         /* inside the window: test without sleeping */
    int64_t at, margin, wake;   /* predicted arrival, half window, end of the stretch (abs ns) */
};

static void plan_start(struct plan *p, struct site *site)
{
    /* The first exponential sleep: 1 us, or the device's floor where one is known
     * (anything shorter lasts the floor anyway). */
    *p = (struct plan){.site = site, .spin = site->spins ? sw_cfg.spin_ns : 0,
                       .next = sw_cfg.floor_ns > sw_cfg.first_sleep_ns ? sw_cfg.floor_ns : sw_cfg.first_sleep_ns,
                       .linear = sw_cfg.dmin_ns, .cap = sw_cfg.cap_ns};
}

/* From `at` on (abs ns), the cap drops to 1/MISS_CAP_DIV of the interval:
 * past a missed window at once, and on the wait after a miss from 7/8 of
 * the interval on, when the next arrival is due. A late message is then
 * noticed within 1 % of the gap (the p99 target is 2 %), at the cost of a
 * few more wake-ups on the rare waits that miss. */
static void tighten_cap(struct plan *p, int64_t at)
{
    if (p->rhythm <= 0)
        return;
    int64_t cap = p->rhythm / MISS_CAP_DIV;
    cap = cap < sw_cfg.min_cap_ns ? sw_cfg.min_cap_ns : cap;
    p->tight_cap = cap < p->cap ? cap : p->cap;
    p->tight_at = at;
}

/* Once the clock is read: the cap, and the prediction if the site has a
 * usable one. Two guesses of the arrival, the one with the narrower window
 * wins: the last anchored arrival + the next interval (periodic streams),
 * and start + the next wait (request/response: waits repeat). A guess is
 * usable when its window is narrow next to the interval (Poisson arrivals,
 * say, have none: the cap decides there). */
static void plan_clock(struct plan *p, int64_t start)
{
    p->from = start;
    if (!learns())
        return;
    struct site *s = p->site;
    struct sw_fit fi, fw;
    int fit_i = sw_series_fit(&s->intervals, &fi), fit_w = sw_series_fit(&s->waits, &fw);
    /* The cap follows the typical interval between the arrivals that end
     * pauses (a burst's inner waits would make it short, and a pause cost
     * a thousand wake-ups), else the typical wait. */
    p->rhythm = fit_i ? fi.median : fit_w ? fw.median : 0;
    int by_period = fit_i && s->anchor_ns && fi.next > 0, by_wait = fit_w && fw.next > 0;
    if (p->rhythm > 0) {
        int64_t cap = p->rhythm / RHYTHM_CAP_DIV;
        cap = cap < sw_cfg.min_cap_ns ? sw_cfg.min_cap_ns : cap;
        p->cap = cap < p->cap ? cap : p->cap;
    }
    if (sw_cfg.mode == SW_AUTO && s->cap_ns < p->cap)
        p->cap = s->cap_ns;
    if (s->distrust) {
        /* The last prediction missed: this wait backs off, and near the
         * next arrival as tightly as past a window. */
        tighten_cap(p, start + p->rhythm - p->rhythm / 8);
        return;
    }
    int64_t at = 0, margin = 0, period = 0;
    if (by_period) {
        int64_t m = (fi.margin > sw_cfg.min_margin_ns ? fi.margin : sw_cfg.min_margin_ns) + s->anchor_u;
        int64_t k = s->since + 1, behind = start - m - s->anchor_ns;
        if (behind > k * fi.next)   /* arrivals taken at once, unseen: the next one still to come */
            k = (behind + fi.next - 1) / fi.next;
        if (k <= MAX_PERIODS && m <= fi.next / 8) {
            at = s->anchor_ns + k * fi.next;
            margin = m;
            period = fi.next;
        }
    }
    if (by_wait) {
        /* A wait that starts when the last arrival was noticed starts as
         * late as that was noticed: that uncertainty widens the window. */
        int64_t m = (fw.margin > sw_cfg.min_margin_ns ? fw.margin : sw_cfg.min_margin_ns) + s->last_u;
        if (m <= fw.next / 8 && (!at || m < margin)) {
            at = start + fw.next;
            margin = m;
            period = fw.next;
        }
    }
    if (!at)
        return;
    int64_t guard = guard_ns();
    p->predicted = 1;
    p->at = at;
    p->margin = margin;
    p->wake = at - margin - guard;
    /* Testing through the window costs a core for its length: worth it
     * where that is a small part of the interval, else short sleeps. */
    p->poll = margin + guard <= period / POLL_WINDOW_DIV;
}

/* How long to pause after a failed test at `now`: a sleep length (ns) or
 * one of the PAUSE_* above. */
static int64_t pause_ns(struct plan *p, int64_t now, int64_t start)
{
    switch (sw_cfg.mode) {
    case SW_YIELD:
        return PAUSE_YIELD;
    case SW_SLEEP:
        return sw_cfg.sleep_ns ? sw_cfg.sleep_ns : PAUSE_ZERO;
    case SW_EVENT:
        return sw_cfg.cap_ns;
    case SW_LINEAR: {
        int64_t d = p->linear;
        p->linear = d + sw_cfg.dstep_ns > sw_cfg.dmax_ns ? sw_cfg.dmax_ns : d + sw_cfg.dstep_ns;
        return d ? d : PAUSE_ZERO;   /* 003's d_min = 0 still calls clock_nanosleep */
    }
    default:
        break;
    }
    /* Spin with plain tests. (Yielding here was tried: when a yield costs
     * more than the spin, ping-pong partners settle into yielding on every
     * message, 30x slower.) */
    if (now - start < p->spin)
        return PAUSE_TEST;
    if (p->predicted && !p->missed) {
        if (now < p->wake) {
            /* Sleep towards the window in stretches of at most the cap: a rhythm
             * learned from long waits must not sleep through a message that comes
             * early. Ranks that slept through each other's messages taught each
             * other ever longer waits: 9 s stretches, a job that stalled. */
            int64_t d = p->wake - now;
            return d < sw_cfg.cap_ns ? d : sw_cfg.cap_ns;
        }
        int64_t end = p->at + p->margin;
        if (now <= end) {
            /* In the window: test, neither sleep nor yield (a yield hands
             * the core to whatever else is runnable for up to a time
             * slice), or where the window is long, sleep in 1/16ths of it. */
            if (p->poll)
                return PAUSE_TEST;
            int64_t d = (end - p->wake) / 16;
            d = d > p->cap ? p->cap : d;
            return d > POLL_NS ? d : POLL_NS;
        }
        /* Past the window: the prediction missed; back off from here. */
        p->missed = 1;
        p->next = sw_cfg.first_sleep_ns;
        p->from = p->at;
        tighten_cap(p, now);
    }
    int64_t cap = p->tight_at && now >= p->tight_at ? p->tight_cap : p->cap;
    int64_t d = p->next;
    if (d < cap)
        p->next = d * 2;   /* stops at the cap: never overflows */
    double rel = sw_cfg.mode == SW_AUTO ? sw_cfg.target : 0.125;
    int64_t bound = (int64_t)(rel * (double)(now - p->from));
    if (d > bound)
        d = bound;
    if (d > cap)
        d = cap;
    return d > POLL_NS ? d : POLL_NS;
}

/* After the wait: did the arrival, somewhere in [lb, ub], fall in the
 * predicted window? Misses make the next wait back off; auto tunes its cap. */
static void judge(struct plan *p, struct sw_call *call, int64_t lb, int64_t ub)
{
    struct site *s = p->site;
    if (p->from) {   /* clocked: the plan was made */
        call->rhythm_ns = p->rhythm;
        call->cap_ns = p->cap;
    }
    if (p->predicted) {
        /* Found at the first test after the stretch, it came before the
         * window; or the wake-up came later than the guard allowed, and
         * when it came is unknown: a miss either way, and the arrival too
         * loosely known to anchor the rhythm (the next wait backs off and
         * finds it anew). */
        int64_t lo = p->at - p->margin, hi = p->at + p->margin;
        if (ub < lo || lb < p->wake) {
            call->outcome = SW_EARLY;
            call->miss_ns = lo - ub > 0 ? lo - ub : 0;
        } else if (lb > hi) {
            call->outcome = SW_LATE;
            call->miss_ns = lb - hi;
        } else {
            call->outcome = SW_HIT;
        }
        s->distrust = call->outcome != SW_HIT;
    } else if (call->wait_ns >= sw_cfg.long_ns) {
        s->distrust = 0;   /* one long wait backed off: predict again */
    }
    if (sw_cfg.mode == SW_AUTO && !p->predicted && call->sleeps > 0 && call->notice_ns >= 0) {
        double allowed = sw_cfg.target * (double)call->wait_ns;
        if ((double)call->notice_ns > allowed && s->cap_ns > sw_cfg.min_cap_ns)
            s->cap_ns /= 2;
        else if ((double)call->notice_ns < allowed / 2 && s->cap_ns < sw_cfg.cap_ns)
            s->cap_ns *= 2;
        if (s->cap_ns > sw_cfg.cap_ns)
            s->cap_ns = sw_cfg.cap_ns;
    }
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
    struct sw_call call = {.notice_ns = -1, .tests = tested, .site = site->key};
    struct plan plan;
    plan_start(&plan, site);
    int64_t start = timed ? sw_now_ns() : -1, last_fail = -1, now = start;
    int done = 0, rc = MPI_SUCCESS, clocked = 0, burst = 0, settle = 0;
    for (;;) {
        if (burst > 0) {
            burst--;   /* woken by a socket: test on at once */
        } else if (call.tests >= pure) {   /* the last test failed: pause */
            now = sw_now_ns();
            if (start < 0)
                start = now;   /* the pure spin before this is not counted */
            if (!clocked) {
                plan_clock(&plan, start);
                clocked = 1;
            }
            last_fail = now;
            int64_t d = pause_ns(&plan, now, start);
            if (d == PAUSE_YIELD) {
                sched_yield();
                call.yields++;
            } else if (d != PAUSE_TEST) {
                if (d == PAUSE_ZERO)
                    d = 0;
                int capped = settle && d > SETTLE_NS;
                if (capped)
                    d = SETTLE_NS;
                int woken = sw_sleep(d);
                burst = woken || capped ? WAKE_TESTS : PAUSE_AFTER - 1;
                settle = woken;
                int64_t after = sw_now_ns(), slept = after - now, over = slept - d;
                over = over > 0 && !woken ? over : 0;
                call.sleeps++;
                call.sleep_ns += slept;
                call.oversleep_ns += over;
                if (d >= LONG_SLEEP_NS && !woken) {   /* only full sleeps say how late the kernel wakes */
                    ts.late[ts.late_head] = over;
                    ts.late_head = (ts.late_head + 1) % LATE_RING;
                    ts.nlate += ts.nlate < LATE_RING;
                }
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
    if (rc == MPI_SUCCESS) {
        judge(&plan, &call, last_fail, now);
        remember(site, start, call.wait_ns, last_fail, now);
    }
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
    int pure = site->spins ? PURE_TESTS : PAUSE_AFTER;
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
