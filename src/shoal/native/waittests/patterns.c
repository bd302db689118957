/* Timing scenarios of 003's experiments. Rank 0 (or the receiving rank)
 * prints one JSON line per scenario; CPU comes from the kernel's accounting
 * of the process (getrusage / CLOCK_PROCESS_CPUTIME_ID).
 *
 *   burst     A: rank 0 sends --cycles bursts of --burst messages, pausing
 *             --pause s; rank 1 receives with Probe+Recv (003 Figure 1a) and
 *             samples its own CPU load every --sample s
 *   gaps      D: gaps grow x--factor from --start to --max (or are all
 *             --fixed, or drift from --fixed by x--drift per message, or are
 *             drawn from an exponential distribution of mean --poisson with
 *             --seed: Poisson arrivals; --last G makes the last gap G, an
 *             arrival that breaks the rhythm; --nanosleep 1: the sender sleeps
 *             each gap with clock_nanosleep as 003's did, not with a final
 *             spin); rank 1 reports each message's
 *             reaction time (receive return minus send time, one clock on
 *             one host), when its receive returned (recv_s, from the first
 *             receive's start), the process CPU time the receive took
 *             (recv_cpu_s) and how often the receiving thread went to sleep
 *             in it (recv_sleeps: voluntary context switches)
 *   pingpong  back-to-back --size byte round trips; half round trip time
 *   idle      rank 1 blocks in MPI_Recv for --seconds with nothing arriving
 *   full, burstdsm, lock
 *             003's S-DSM patterns: rank 0 serves writes/locks (Probe+Recv
 *             on MPI_ANY_SOURCE), the other ranks are clients */
#define _GNU_SOURCE
#include "waittest.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int rank, size;

/* ---- CPU load sampler (a thread that only reads the process CPU clock) ---- */
struct sampler {
    double period, start;
    int n, cap, stop;
    double *t, *load;
    pthread_t thread;
};

static double proc_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *sample_loop(void *arg)
{
    struct sampler *s = arg;
    double last_wall = wt_now(), last_cpu = proc_cpu();
    while (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED) && s->n < s->cap) {
        struct timespec req = {(time_t)s->period, (long)((s->period - (time_t)s->period) * 1e9)};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
        double wall = wt_now(), cpu = proc_cpu();
        s->t[s->n] = wall - s->start;
        s->load[s->n] = (cpu - last_cpu) / (wall - last_wall);
        s->n++;
        last_wall = wall;
        last_cpu = cpu;
    }
    return NULL;
}

static void sampler_start(struct sampler *s, double period, double start)
{
    memset(s, 0, sizeof *s);
    s->period = period;
    s->start = start;
    s->cap = 100000;
    s->t = malloc(sizeof(double) * s->cap);
    s->load = malloc(sizeof(double) * s->cap);
    pthread_create(&s->thread, NULL, sample_loop, s);
}

static void sampler_stop(struct sampler *s)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
    pthread_join(s->thread, NULL);
}

static void print_series(const char *name, const double *a, int n)
{
    printf(", \"%s\": [", name);
    for (int i = 0; i < n; i++)
        printf("%s%.9g", i ? ", " : "", a[i]);
    printf("]");
}

/* ---- A: bursts and pauses --------------------------------------------- */
enum { TAG_DATA = 1, TAG_STOP = 2 };

static void burst(int argc, char **argv)
{
    int cycles = (int)wt_arg(argc, argv, "--cycles", 5), per = (int)wt_arg(argc, argv, "--burst", 10);
    double pause = wt_arg(argc, argv, "--pause", 1.0), period = wt_arg(argc, argv, "--sample", 0.05);
    int bytes = (int)wt_arg(argc, argv, "--size", 1024);
    char *buf = calloc(1, bytes > 0 ? bytes : 1);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = wt_now();
    if (rank == 0) {
        for (int c = 0; c < cycles; c++) {
            for (int i = 0; i < per; i++)
                MPI_Send(buf, bytes, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
            wt_sleep(pause);
        }
        MPI_Send(buf, 0, MPI_BYTE, 1, TAG_STOP, MPI_COMM_WORLD);
    } else if (rank == 1) {
        struct sampler s;
        double cpu0 = wt_cpu();
        sampler_start(&s, period, t0);
        int received = 0;
        for (;;) {
            MPI_Status st;
            int n;
            MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &n);
            MPI_Recv(buf, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
            if (st.MPI_TAG == TAG_STOP)
                break;
            received++;
        }
        double wall = wt_now() - t0, cpu = wt_cpu() - cpu0;
        sampler_stop(&s);
        printf("{\"scenario\": \"burst\", \"rank\": 1, \"received\": %d, \"wall_s\": %.6f, "
               "\"cpu_s\": %.6f", received, wall, cpu);
        print_series("t_s", s.t, s.n);
        print_series("load", s.load, s.n);
        printf("}\n");
    }
    free(buf);
}

/* ---- D: growing (or fixed) gaps ----------------------------------------- */
static void gaps(int argc, char **argv)
{
    double start = wt_arg(argc, argv, "--start", 1e-9), factor = wt_arg(argc, argv, "--factor", 1.05);
    double max = wt_arg(argc, argv, "--max", 0.13), fixed = wt_arg(argc, argv, "--fixed", 0);
    double drift = wt_arg(argc, argv, "--drift", 1), mean = wt_arg(argc, argv, "--poisson", 0);
    uint64_t seed = (uint64_t)wt_arg(argc, argv, "--seed", 1);
    double last = wt_arg(argc, argv, "--last", -1);   /* the last gap, breaking the rhythm */
    int count = (int)wt_arg(argc, argv, "--count", 0);
    int bytes = (int)wt_arg(argc, argv, "--size", 1024);
    /* --nanosleep 1: the sender sleeps each gap with one clock_nanosleep, as seed 003's
     * did (its timer slack then sets a floor under small gaps), not wt_sleep's spin */
    int plain = wt_arg(argc, argv, "--nanosleep", 0) != 0;
    if (bytes < (int)sizeof(double))
        bytes = sizeof(double);
    if (count <= 0)
        count = fixed > 0 || mean > 0 ? 100 : (int)ceil(log(max / start) / log(factor)) + 1;
    double *gap = malloc(sizeof(double) * count), *lat = malloc(sizeof(double) * count);
    double g = start, d = fixed;
    seed = seed ? seed : 1;
    for (int i = 0; i < count; i++, g *= factor, d *= drift) {
        if (mean > 0) {
            /* xorshift64*: the same gaps for a seed on every host and MPI */
            seed ^= seed >> 12, seed ^= seed << 25, seed ^= seed >> 27;
            double u = (double)((seed * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
            gap[i] = -mean * log(1 - u);
        } else {
            gap[i] = fixed > 0 ? d : g;
        }
    }
    if (last >= 0)
        gap[count - 1] = last;
    char *buf = calloc(1, bytes);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < count; i++) {
            if (plain) {
                struct timespec req = {(time_t)gap[i], (long)((gap[i] - (time_t)gap[i]) * 1e9)};
                clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
            } else if (gap[i] >= 1e-7) {
                wt_sleep(gap[i]);
            }
            double t = wt_now();
            memcpy(buf, &t, sizeof t);
            MPI_Send(buf, bytes, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
        }
    } else if (rank == 1) {
        /* Per message also when the receive returned (Fig. 5's inter-delivery times) and
         * the process CPU it used (where the adaptive receive starts sleeping). */
        double *back = malloc(sizeof(double) * count), *used = malloc(sizeof(double) * count);
        double *slept = malloc(sizeof(double) * count);
        double cpu0 = wt_cpu(), t0 = wt_now();
        for (int i = 0; i < count; i++) {
            double c = proc_cpu();
            struct rusage r0, r1;
            getrusage(RUSAGE_THREAD, &r0);
            MPI_Recv(buf, bytes, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double now = wt_now(), sent;
            used[i] = proc_cpu() - c;
            getrusage(RUSAGE_THREAD, &r1);
            /* the thread went to sleep (a yield or a preemption is involuntary) */
            slept[i] = (double)(r1.ru_nvcsw - r0.ru_nvcsw);
            memcpy(&sent, buf, sizeof sent);
            lat[i] = now - sent;
            back[i] = now - t0;
        }
        double wall = wt_now() - t0, cpu = wt_cpu() - cpu0;
        printf("{\"scenario\": \"gaps\", \"rank\": 1, \"count\": %d, \"wall_s\": %.6f, "
               "\"cpu_s\": %.6f", count, wall, cpu);
        print_series("gap_s", gap, count);
        print_series("reaction_s", lat, count);
        print_series("recv_s", back, count);
        print_series("recv_cpu_s", used, count);
        print_series("recv_sleeps", slept, count);
        printf("}\n");
        free(back);
        free(used);
        free(slept);
    }
    free(buf);
    free(gap);
    free(lat);
}

/* ---- ping-pong and idle ----------------------------------------------- */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Timed in --chunks pieces: on a shared machine the quietest chunk says
 * more about the wait path than the mean of all of them. */
static void pingpong(int argc, char **argv)
{
    int iters = (int)wt_arg(argc, argv, "--iters", 10000), warm = (int)wt_arg(argc, argv, "--warmup", 1000);
    int bytes = (int)wt_arg(argc, argv, "--size", 8), chunks = (int)wt_arg(argc, argv, "--chunks", 20);
    if (chunks < 1 || chunks > iters)
        chunks = 1;
    int per = iters / chunks;
    char *buf = calloc(1, bytes > 0 ? bytes : 1);
    double *chunk = malloc(sizeof(double) * chunks), t0 = 0, tc = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = -warm; i < per * chunks; i++) {
        if (i == 0)
            t0 = tc = wt_now();
        if (i > 0 && i % per == 0) {
            double now = wt_now();
            chunk[i / per - 1] = (now - tc) / per / 2;
            tc = now;
        }
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, bytes, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
        }
    }
    double end = wt_now();
    chunk[chunks - 1] = (end - tc) / per / 2;
    qsort(chunk, chunks, sizeof(double), cmp_double);
    if (rank == 0)
        printf("{\"scenario\": \"pingpong\", \"rank\": 0, \"iters\": %d, \"size_B\": %d, "
               "\"latency_s\": %.9g, \"chunk_min_s\": %.9g, \"chunk_median_s\": %.9g}\n",
               per * chunks, bytes, (end - t0) / (per * chunks) / 2, chunk[0], chunk[chunks / 2]);
    free(chunk);
    free(buf);
}

static void idle(int argc, char **argv)
{
    double seconds = wt_arg(argc, argv, "--seconds", 2.0);
    int v = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        wt_sleep(seconds);
        MPI_Send(&v, 1, MPI_INT, 1, TAG_DATA, MPI_COMM_WORLD);
    } else if (rank == 1) {
        double cpu0 = wt_cpu(), t0 = wt_now();
        MPI_Recv(&v, 1, MPI_INT, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double wall = wt_now() - t0, cpu = wt_cpu() - cpu0;
        printf("{\"scenario\": \"idle\", \"rank\": 1, \"wall_s\": %.6f, \"cpu_s\": %.6f, "
               "\"load\": %.6f}\n", wall, cpu, cpu / wall);
    }
}

/* ---- S-DSM-like server and clients (Full, Burst, Lock) ------------------ */
enum { T_WRITE = 10, T_ACK, T_LOCK, T_GRANT, T_UNLOCK, T_DONE };

static void dsm(const char *which, int argc, char **argv)
{
    int writes = (int)wt_arg(argc, argv, "--writes", 2000), cycles = (int)wt_arg(argc, argv, "--cycles", 3);
    double pause = wt_arg(argc, argv, "--pause", 0.2), hold = wt_arg(argc, argv, "--hold", 0.2);
    int shared = 0, messages = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = wt_now(), cpu0 = wt_cpu();
    if (rank == 0) {
        int done = 0, owner = -1, *queue = malloc(sizeof(int) * size), qn = 0;
        while (done < size - 1) {
            MPI_Status st;
            int v;
            MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
            messages++;
            int from = st.MPI_SOURCE;
            if (st.MPI_TAG == T_WRITE) {
                shared = v;
                MPI_Send(&shared, 1, MPI_INT, from, T_ACK, MPI_COMM_WORLD);
            } else if (st.MPI_TAG == T_LOCK) {
                if (owner < 0) {
                    owner = from;
                    MPI_Send(&shared, 1, MPI_INT, from, T_GRANT, MPI_COMM_WORLD);
                } else {
                    queue[qn++] = from;
                }
            } else if (st.MPI_TAG == T_UNLOCK) {
                shared = v;
                owner = -1;
                if (qn) {
                    owner = queue[0];
                    memmove(queue, queue + 1, sizeof(int) * --qn);
                    MPI_Send(&shared, 1, MPI_INT, owner, T_GRANT, MPI_COMM_WORLD);
                }
            } else if (st.MPI_TAG == T_DONE) {
                done++;
            }
        }
        free(queue);
    } else {
        int v = rank;
        if (!strcmp(which, "lock")) {
            for (int c = 0; c < cycles; c++) {
                MPI_Send(&v, 1, MPI_INT, 0, T_LOCK, MPI_COMM_WORLD);
                MPI_Recv(&v, 1, MPI_INT, 0, T_GRANT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                wt_sleep(hold);
                v += rank;
                MPI_Send(&v, 1, MPI_INT, 0, T_UNLOCK, MPI_COMM_WORLD);
            }
        } else {
            int rounds = !strcmp(which, "full") ? 1 : cycles;
            for (int c = 0; c < rounds; c++) {
                for (int i = 0; i < writes; i++) {
                    v = rank * 1000000 + i;
                    MPI_Send(&v, 1, MPI_INT, 0, T_WRITE, MPI_COMM_WORLD);
                    MPI_Recv(&v, 1, MPI_INT, 0, T_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                if (rounds > 1)
                    wt_sleep(pause);
            }
        }
        MPI_Send(&v, 1, MPI_INT, 0, T_DONE, MPI_COMM_WORLD);
    }
    double mine[2] = {wt_now() - t0, wt_cpu() - cpu0};
    double *all = malloc(sizeof(double) * 2 * size);
    MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"scenario\": \"%s\", \"rank\": 0, \"ranks\": %d, \"messages\": %d, "
               "\"wall_s\": %.6f, \"server_cpu_s\": %.6f, \"cpu_s\": [",
               which, size, messages, mine[0], mine[1]);
        for (int i = 0; i < size; i++)
            printf("%s%.6f", i ? ", " : "", all[2 * i + 1]);
        printf("]}\n");
    }
    free(all);
}

int wt_patterns(const char *which, int argc, char **argv)
{
    static const char *const known[] = {"burst", "gaps", "pingpong", "idle", "full", "burstdsm", "lock"};
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok |= !strcmp(which, known[i]);
    if (!ok) {
        fprintf(stderr, "shoal-waittest: unknown subcommand '%s'\n", which);
        return 2;
    }
    MPI_Init(&argc, &argv);
    /* --process-cpu 1: each rank also reports its whole process (every thread, the MPI's and
     * the library's included) from here to past MPI_Finalize, on a line of its own. */
    double proc_cpu0 = wt_cpu(), proc_t0 = wt_now();
    int process_cpu = wt_arg(argc, argv, "--process-cpu", 0) != 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "shoal-waittest %s needs at least 2 ranks\n", which);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (!strcmp(which, "burst"))
        burst(argc, argv);
    else if (!strcmp(which, "gaps"))
        gaps(argc, argv);
    else if (!strcmp(which, "pingpong"))
        pingpong(argc, argv);
    else if (!strcmp(which, "idle"))
        idle(argc, argv);
    else
        dsm(which, argc, argv);
    fflush(stdout);
    MPI_Finalize();
    if (process_cpu) {
        printf("{\"process_rank\": %d, \"process_cpu_s\": %.6f, \"process_wall_s\": %.6f}\n", rank,
               wt_cpu() - proc_cpu0, wt_now() - proc_t0);
        fflush(stdout);
    }
    return 0;
}
