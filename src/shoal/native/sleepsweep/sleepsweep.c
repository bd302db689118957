/* shoal-sleepsweep: seed 003's Experiment C.
 *
 * Requests every duration 0, step, 2*step, ... max (ns) from
 * clock_nanosleep(CLOCK_MONOTONIC, relative), `repeats` passes over the whole
 * range (a pass per repeat, so a change of load mid-run touches every
 * duration alike), and reads CLOCK_MONOTONIC around each call, as the seed
 * measured it (the clock reads are part of what a waiter pays). Each pass
 * takes the durations coarse to fine (bit-reversed order: 0, max/2, max/4,
 * 3max/4, ...), so --budget-ms T, which stops the sweep once T ms have gone
 * by, leaves durations spread over the whole range even mid-pass: a place
 * that sleeps far longer than asked (a loaded device at a small CPU quota)
 * still ends, with fewer measures. With --spinners N, N threads
 * spin on an empty loop for the whole sweep (the seed's "busy" mode, one per
 * core). --slack N sets PR_SET_TIMERSLACK to N ns first (0: the kernel's
 * default is kept).
 *
 * With --spin-ms T it only spins its --spinners threads for T ms and exits: the load
 * beside another program (cyclictest) in the same place.
 *
 * Output: one JSON line of facts (timer slack in force, clock resolution,
 * spinners, the sleeping thread's CPU seconds), then one line "requested_ns measured_ns"
 * per measure.
 */
#define _GNU_SOURCE   /* RUSAGE_THREAD */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

static atomic_int stop_spinning;

static void *spin(void *unused)
{
    (void)unused;
    while (!atomic_load_explicit(&stop_spinning, memory_order_relaxed))
        ;
    return NULL;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Index i of n in coarse-to-fine order: i's bits reversed over the next power of two,
 * skipping what falls past n. order[] gets all n indices. */
static void coarse_to_fine(long long n, long long *order)
{
    int bits = 0;
    while ((1LL << bits) < n)
        bits++;
    long long k = 0;
    for (long long i = 0; i < (1LL << bits); i++) {
        long long r = 0;
        for (int b = 0; b < bits; b++)
            if (i >> b & 1)
                r |= 1LL << (bits - 1 - b);
        if (r < n)
            order[k++] = r;
    }
}

/* This thread's CPU seconds so far (-1: unknown). */
static double thread_cpu_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return -1;
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double resolution_s(void)
{
    struct timespec ts;
    return clock_getres(CLOCK_MONOTONIC, &ts) == 0 ? (double)ts.tv_sec + ts.tv_nsec * 1e-9 : 0.0;
}

static long long option(int argc, char **argv, const char *name, long long fallback)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) {
            char *end;
            errno = 0;
            long long v = strtoll(argv[i + 1], &end, 10);
            if (errno || *end || v < 0) {
                fprintf(stderr, "shoal-sleepsweep: %s wants a whole number >= 0, not '%s'\n",
                        name, argv[i + 1]);
                exit(2);
            }
            return v;
        }
    return fallback;
}

int main(int argc, char **argv)
{
    long long max_ns = option(argc, argv, "--max", 1000000);
    long long step_ns = option(argc, argv, "--step", 500);
    long long repeats = option(argc, argv, "--repeats", 10);
    long long spinners = option(argc, argv, "--spinners", 0);
    long long slack_ns = option(argc, argv, "--slack", 0);
    long long spin_ms = option(argc, argv, "--spin-ms", 0);
    long long budget_ms = option(argc, argv, "--budget-ms", 0);
    if (step_ns == 0 || repeats == 0 || spinners > 1024) {
        fprintf(stderr, "shoal-sleepsweep: --step and --repeats must be >= 1, --spinners <= 1024\n");
        return 2;
    }
    if (slack_ns > 0 && prctl(PR_SET_TIMERSLACK, (unsigned long)slack_ns, 0, 0, 0) != 0) {
        fprintf(stderr, "shoal-sleepsweep: PR_SET_TIMERSLACK %lld: %s\n", slack_ns, strerror(errno));
        return 1;
    }
    pthread_t threads[1024];
    for (long long i = 0; i < spinners; i++)
        if (pthread_create(&threads[i], NULL, spin, NULL) != 0) {
            fprintf(stderr, "shoal-sleepsweep: could not start spinning thread %lld\n", i);
            return 1;
        }
    if (spinners) {   /* let the spinners take their cores before the first measure */
        struct timespec settle = {0, 20000000};
        nanosleep(&settle, NULL);
    }
    if (spin_ms) {
        struct timespec hold = {(time_t)(spin_ms / 1000), (long)(spin_ms % 1000) * 1000000L};
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &hold, &hold) == EINTR)
            ;
        atomic_store(&stop_spinning, 1);
        for (long long i = 0; i < spinners; i++)
            pthread_join(threads[i], NULL);
        return 0;
    }
    /* The first sleeps of a process page in code and stacks: a few untimed ones first. */
    for (int i = 0; i < 3; i++) {
        struct timespec zero = {0, 0};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &zero, NULL);
    }
    long long steps = max_ns / step_ns + 1;
    long long *measured = malloc(sizeof *measured * (size_t)(steps * repeats));
    long long *asked = malloc(sizeof *asked * (size_t)(steps * repeats));
    long long *order = malloc(sizeof *order * (size_t)steps);
    if (!measured || !asked || !order) {
        fprintf(stderr, "shoal-sleepsweep: out of memory for %lld measures\n", steps * repeats);
        return 1;
    }
    coarse_to_fine(steps, order);
    double cpu_before_s = thread_cpu_s();
    long long start = now_ns(), done = 0;
    for (long long i = 0; i < steps * repeats; i++) {
        if (i > 0 && budget_ms && now_ns() - start > budget_ms * 1000000LL)
            break;
        long long req = order[i % steps] * step_ns;
        struct timespec ts = {(time_t)(req / 1000000000LL), (long)(req % 1000000000LL)};
        long long t0 = now_ns();
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == EINTR)
            ;
        measured[i] = now_ns() - t0;
        asked[i] = req;
        done++;
    }
    /* The sleeper's own CPU (not the spinners'): what its sleeps cost it in system calls,
     * timer programming and wake-ups, the price of every wake-up a waiting rank pays. */
    double cpu_after_s = thread_cpu_s();
    double cpu_s = cpu_before_s >= 0 && cpu_after_s >= 0 ? cpu_after_s - cpu_before_s : -1;
    atomic_store(&stop_spinning, 1);
    for (long long i = 0; i < spinners; i++)
        pthread_join(threads[i], NULL);
    printf("{\"timer_slack_ns\": %d, \"clock_resolution_s\": %.12g, \"spinners\": %lld, "
           "\"measures\": %lld, \"planned\": %lld, \"cpu_s\": %.6f}\n",
           prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), resolution_s(), spinners, done, steps * repeats,
           cpu_s);
    for (long long i = 0; i < done; i++)
        printf("%lld %lld\n", asked[i], measured[i]);
    free(measured);
    free(asked);
    free(order);
    return 0;
}
