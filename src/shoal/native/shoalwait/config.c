/* Reading SHOAL_WAIT* once. A malformed value stops the program at
 * MPI_Init with one line: it is never run in another mode than asked. */
#define _GNU_SOURCE
#include "shoalwait.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

struct sw_config sw_cfg = {
    .mode = SW_BUSY, .mode_text = "busy", .classes = SW_P2P | SW_SEND | SW_COLL,
    .dmin_ns = 1, .dmax_ns = 1000, .dstep_ns = 1,
    .spin_ns = 50000, .cap_ns = 10000000, .target = 0.05,
    .slack_ns = 1, .send_eager_B = 16384, .floor_ns = 0, .dilation = 1.0,
};

/* The policy's own durations in device time (policy.c), scaled like the rest. */
#define LONG_NS 1000000      /* waits at least this long carry the site's rhythm (shorter: a burst) */
#define MIN_MARGIN_NS 20000  /* the window around a prediction is never narrower */
#define MIN_CAP_NS 50000     /* the cap a rhythm sets is never below this */
#define FIRST_SLEEP_NS 1000  /* the first exponential sleep where no floor is known */

/* backoff and auto take a sleep once this share of the time waited covers
 * the floor (their exponential sleeps are bounded by 1/8 of it). */
#define FLOOR_SPIN_FACTOR 8

#define MODES_HELP "busy, yield, sleep:US, linear[:DMIN_NS,DMAX_NS,DSTEP_NS], " \
                   "backoff[:SPIN_US,CAP_US], auto[:TARGET] or event[:CAP_US]"

int sw_env_rank(void)
{
    static const char *const names[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

void sw_say(const char *fmt, ...)
{
    if (sw_env_rank() != 0)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "shoalwait: %s\n", line);
    fflush(stderr);
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sw_fatal(2, "%s", line);
}

void sw_fatal(int code, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sw_say("%s", line);
    /* Only the first rank speaks; the others leave a moment later so the
     * launcher does not kill it before its line is out. */
    if (sw_env_rank() != 0) {
        struct timespec pause = {0, 500000000};
        nanosleep(&pause, NULL);
    }
    exit(code);
}

/* A whole-string decimal number, else -1 (all our numbers are >= 0).
 * Only digits, a point and an exponent: strtod alone would also take
 * leading blanks, hexadecimal and "inf", which the Python side refuses. */
static double number(const char *s)
{
    if (!s || !*s || !strchr("0123456789.", s[0]) || strspn(s, "0123456789.eE+-") != strlen(s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || v < 0 || v != v)
        return -1;
    return v;
}

static int64_t integer(const char *s)
{
    if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 15)
        return -1;
    return strtoll(s, NULL, 10);
}

/* Split "a,b,c" in place into at most n fields; returns the count. */
static int fields(char *s, char **out, int n)
{
    int k = 0;
    for (char *tok = s;; k++) {
        if (k == n)
            return n + 1;
        out[k] = tok;
        char *comma = strchr(tok, ',');
        if (!comma)
            return k + 1;
        *comma = '\0';
        tok = comma + 1;
    }
}

static void parse_mode(const char *text)
{
    char buf[128], *args[4];
    if (strlen(text) >= sizeof buf)
        die("SHOAL_WAIT is too long; use " MODES_HELP);
    strcpy(buf, text);
    char *colon = strchr(buf, ':');
    char *params = NULL;
    if (colon) {
        *colon = '\0';
        params = colon + 1;
    }
    const char *name = buf;
    snprintf(sw_cfg.mode_text, sizeof sw_cfg.mode_text, "%s", text);

    if (!strcmp(name, "busy") || !strcmp(name, "yield")) {
        if (params)
            die("SHOAL_WAIT=%s: mode '%s' takes no parameters", text, name);
        sw_cfg.mode = name[0] == 'b' ? SW_BUSY : SW_YIELD;
    } else if (!strcmp(name, "sleep")) {
        double us = number(params);   /* 0: a clock_nanosleep of 0, 003's shortest */
        if (us < 0 || us > 1e7)
            die("SHOAL_WAIT=%s: sleep needs a time in microseconds from 0 to 1e7, "
                "e.g. sleep:100", text);
        sw_cfg.mode = SW_SLEEP;
        sw_cfg.sleep_ns = (int64_t)(us * 1000.0 + 0.5);
    } else if (!strcmp(name, "linear")) {
        sw_cfg.mode = SW_LINEAR;
        if (params) {
            int n = fields(params, args, 3);
            int64_t a = n == 3 ? integer(args[0]) : -1, b = n == 3 ? integer(args[1]) : -1,
                    c = n == 3 ? integer(args[2]) : -1;
            if (a < 0 || b < 0 || c < 0)
                die("SHOAL_WAIT=%s: linear takes three integers DMIN_NS,DMAX_NS,DSTEP_NS, "
                    "e.g. linear:1,1000,1", text);
            if (a > b || c == 0 || b > 10000000000LL)
                die("SHOAL_WAIT=%s: linear needs DMIN_NS <= DMAX_NS <= 1e10 and DSTEP_NS > 0",
                    text);
            sw_cfg.dmin_ns = a;
            sw_cfg.dmax_ns = b;
            sw_cfg.dstep_ns = c;
        }
    } else if (!strcmp(name, "backoff")) {
        sw_cfg.mode = SW_BACKOFF;
        if (params) {
            int n = fields(params, args, 2);
            double spin = n == 2 ? number(args[0]) : -1, cap = n == 2 ? number(args[1]) : -1;
            if (spin < 0 || cap <= 0 || spin > 1e6 || cap > 1e7)
                die("SHOAL_WAIT=%s: backoff takes SPIN_US,CAP_US, e.g. backoff:50,10000", text);
            sw_cfg.spin_ns = (int64_t)(spin * 1000.0);
            sw_cfg.cap_ns = (int64_t)(cap * 1000.0);
        }
    } else if (!strcmp(name, "event")) {
        sw_cfg.mode = SW_EVENT;
        sw_cfg.cap_ns = 1000000;   /* shared-memory messages noticed within 1 ms, 0.1 % CPU idle */
        if (params) {
            double cap = number(params);
            if (!(cap > 0 && cap <= 1e7))
                die("SHOAL_WAIT=%s: event takes a cap in microseconds from 1 to 1e7, "
                    "e.g. event:1000", text);
            sw_cfg.cap_ns = (int64_t)(cap * 1000.0);
        }
    } else if (!strcmp(name, "auto")) {
        sw_cfg.mode = SW_AUTO;
        if (params) {
            double t = number(params);
            if (!(t > 0 && t < 1))
                die("SHOAL_WAIT=%s: auto takes a target fraction between 0 and 1, "
                    "e.g. auto:0.05", text);
            sw_cfg.target = t;
        }
    } else {
        die("SHOAL_WAIT=%s: unknown wait mode '%s'; use " MODES_HELP, text, name);
    }
}

static void parse_classes(const char *text)
{
    char buf[128], *args[8];
    if (strlen(text) >= sizeof buf)
        die("SHOAL_WAIT_CLASSES is too long; use a comma list of p2p, send, coll");
    strcpy(buf, text);
    int n = fields(buf, args, 3), mask = 0;
    if (n > 3)
        die("SHOAL_WAIT_CLASSES=%s: use a comma list of p2p, send, coll (or none)", text);
    for (int i = 0; i < n; i++) {
        if (!strcmp(args[i], "p2p"))
            mask |= SW_P2P;
        else if (!strcmp(args[i], "send"))
            mask |= SW_SEND;
        else if (!strcmp(args[i], "coll"))
            mask |= SW_COLL;
        else if (!strcmp(args[i], "none") && n == 1)
            mask = 0;
        else
            die("SHOAL_WAIT_CLASSES=%s: unknown class '%s'; use a comma list of p2p, send, "
                "coll (or none)", text, args[i]);
    }
    sw_cfg.classes = mask;
}

static int64_t env_int(const char *name, int64_t def, int64_t lo, int64_t hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    int64_t x = integer(v);
    if (x < lo || x > hi)
        die("%s=%s: expected an integer from %lld to %lld", name, v, (long long)lo,
            (long long)hi);
    return x;
}

/* A device time in ns as host ns at the dilation. */
static int64_t dilated(int64_t ns)
{
    return (int64_t)((double)ns * sw_cfg.dilation + 0.5);
}

/* On an emulated device (SHOAL_WAIT_DILATION = D > 1) every duration is device time:
 * a sleep of d lasts d x D on the host, as the device's code around it does. The
 * kernel's timer slack too: left at the host's 50 us, each wake-up would come D times
 * as often in device time as on the device, and its cost, the same host CPU as on a
 * host core, would fill a device core's smaller share. The host's own wake-up
 * latency (the timer interrupt, the system call) stays what it is. */
static void dilate(void)
{
    const char *v = getenv("SHOAL_WAIT_DILATION");
    if (v && *v) {
        double d = number(v);
        if (!(d >= 1 && d <= 10000))
            die("SHOAL_WAIT_DILATION=%s: expected how many times slower than real time the "
                "device runs, from 1 to 10000", v);
        sw_cfg.dilation = d;
    }
    sw_cfg.long_ns = dilated(LONG_NS);
    sw_cfg.min_margin_ns = dilated(MIN_MARGIN_NS);
    sw_cfg.min_cap_ns = dilated(MIN_CAP_NS);
    sw_cfg.first_sleep_ns = dilated(FIRST_SLEEP_NS);
    if (sw_cfg.dilation == 1.0)
        return;
    sw_cfg.sleep_ns = dilated(sw_cfg.sleep_ns);
    sw_cfg.dmin_ns = dilated(sw_cfg.dmin_ns);
    sw_cfg.dmax_ns = dilated(sw_cfg.dmax_ns);
    sw_cfg.dstep_ns = dilated(sw_cfg.dstep_ns);
    sw_cfg.spin_ns = dilated(sw_cfg.spin_ns);
    sw_cfg.cap_ns = dilated(sw_cfg.cap_ns);
    sw_cfg.floor_ns = dilated(sw_cfg.floor_ns);
    if (sw_cfg.slack_ns == 0 && sw_cfg.mode != SW_BUSY) {
        /* The kernel's own slack, read before any thread of the library changed it
         * (a thread starts with its creator's). */
        long kernel = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
        sw_cfg.slack_ns = kernel > 0 ? kernel : 0;
    }
    sw_cfg.slack_ns = dilated(sw_cfg.slack_ns);
}

void sw_configure(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const char *mode = getenv("SHOAL_WAIT");
    parse_mode(mode && *mode ? mode : "backoff");
    const char *classes = getenv("SHOAL_WAIT_CLASSES");
    if (classes && *classes)
        parse_classes(classes);
    sw_cfg.slack_ns = env_int("SHOAL_WAIT_SLACK_NS", 1, 0, 1000000000LL);
    sw_cfg.send_eager_B = env_int("SHOAL_WAIT_SEND_EAGER_B", 16384, 0, 1LL << 40);
    /* The device's shortest real sleep (shoal wait calibrate): a sleep asked for
     * below it lasts it anyway, so backoff and auto spin until 1/8 of the time
     * waited covers it rather than oversleep a wait about to end. */
    sw_cfg.floor_ns = env_int("SHOAL_WAIT_FLOOR_NS", 0, 0, 1000000000LL);
    dilate();
    if ((sw_cfg.mode == SW_BACKOFF || sw_cfg.mode == SW_AUTO) &&
        sw_cfg.floor_ns * FLOOR_SPIN_FACTOR > sw_cfg.spin_ns)
        sw_cfg.spin_ns = sw_cfg.floor_ns * FLOOR_SPIN_FACTOR;
    /* The learned modes wake at socket events by default; the fixed ones
     * (003's static and linear sleeps) sleep exactly what they say. */
    sw_cfg.wake_on_socket = sw_cfg.mode == SW_BACKOFF || sw_cfg.mode == SW_AUTO ||
                            sw_cfg.mode == SW_EVENT;
    const char *wake = getenv("SHOAL_WAIT_WAKE");
    if (wake && *wake) {
        if (!strcmp(wake, "socket"))
            sw_cfg.wake_on_socket = 1;
        else if (!strcmp(wake, "timer"))
            sw_cfg.wake_on_socket = 0;
        else
            die("SHOAL_WAIT_WAKE=%s: use socket (a sleep ends at the first TCP socket event) "
                "or timer (sleeps run their length)", wake);
    }
    if (sw_cfg.mode == SW_BUSY || sw_cfg.mode == SW_YIELD)
        sw_cfg.wake_on_socket = 0;   /* they never sleep */
    const char *a2a = getenv("SHOAL_WAIT_ALLTOALL");
    if (a2a && *a2a) {
        if (!strcmp(a2a, "auto"))
            sw_cfg.alltoall = SW_A2A_AUTO;
        else if (!strcmp(a2a, "pairwise"))
            sw_cfg.alltoall = SW_A2A_PAIRWISE;
        else if (!strcmp(a2a, "bruck"))
            sw_cfg.alltoall = SW_A2A_BRUCK;
        else if (!strcmp(a2a, "mpi"))
            sw_cfg.alltoall = SW_A2A_MPI;
        else
            die("SHOAL_WAIT_ALLTOALL=%s: use auto (the shape of the MPI's blocking call), "
                "pairwise, bruck or mpi (the MPI's nonblocking form)", a2a);
    }
    const char *dir = getenv("SHOAL_WAIT_TELEMETRY");
    if (dir && *dir) {
        if (strlen(dir) >= sizeof sw_cfg.telemetry_dir - 64)
            die("SHOAL_WAIT_TELEMETRY is too long a path");
        strcpy(sw_cfg.telemetry_dir, dir);
    }
    sw_cfg.timed = sw_cfg.telemetry_dir[0] != '\0';
    for (int fn = 0; fn < F_COUNT; fn++)
        if (sw_cfg.mode != SW_BUSY && (sw_cfg.classes & sw_fn_class[fn]))
            sw_cfg.active |= 1u << fn;
    sw_cfg.wrapped = sw_cfg.timed ? ~0u : sw_cfg.active;
}
