/* Options, reports and CPU timelines shared by the S-DSM programs. */
#define _GNU_SOURCE
#include "apps.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int world_rank, world_size;

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "shoal-sdsm: rank %d: ", world_rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

void check(int e, const char *what)
{
    if (e != SDSM_OK)
        die("%s: %s", what, sdsm_strerror(e));
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts))
        ;
}

uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ULL;
    return h;
}

/* ---- timeline ---- */
static struct {
    double period;
    int n, cap, stop;
    double *t, *cpu;
    pthread_t thread;
    int running;
} tl;

static void *sampler(void *arg)
{
    while (!__atomic_load_n(&tl.stop, __ATOMIC_RELAXED) && tl.n < tl.cap) {
        tl.t[tl.n] = now_s();
        tl.cpu[tl.n] = cpu_s();
        tl.n++;
        sleep_s(tl.period);
    }
    return NULL;
}

void timeline_start(double period)
{
    if (period <= 0)
        return;
    tl.period = period;
    tl.cap = 200000;
    tl.t = malloc(sizeof(double) * tl.cap);
    tl.cpu = malloc(sizeof(double) * tl.cap);
    if (tl.t && tl.cpu && pthread_create(&tl.thread, NULL, sampler, NULL) == 0)
        tl.running = 1;
}

void timeline_stop(void)
{
    if (!tl.running)
        return;
    __atomic_store_n(&tl.stop, 1, __ATOMIC_RELAXED);
    pthread_join(tl.thread, NULL);
    tl.running = 0;
    if (tl.n < tl.cap) {       /* a last sample at the end */
        tl.t[tl.n] = now_s();
        tl.cpu[tl.n] = cpu_s();
        tl.n++;
    }
}

void check_ranks(const char *app, int impl, int mpi_min, const char *mpi_roles, int sdsm_min,
                 const char *sdsm_roles)
{
    if (impl == IMPL_SEQ && world_size != 1)
        die("%s --impl seq runs on 1 rank", app);
    if (impl == IMPL_MPI && world_size < mpi_min)
        die("%s --impl mpi needs %s (%d+ ranks)", app, mpi_roles, mpi_min);
    if (impl == IMPL_SDSM && world_size < sdsm_min)
        die("%s --impl sdsm needs %s (%d+ ranks)", app, sdsm_roles, sdsm_min);
}

void fill_report(report_t *r, sdsm_t *s, double t0, double cpu0)
{
    r->wall_s = now_s() - t0;
    r->cpu_s = cpu_s() - cpu0;
    if (gethostname(r->host, sizeof r->host - 1) != 0)
        strcpy(r->host, "?");
    const char *core = getenv("SHOAL_DEVICE_CORE");
    r->device_core = core && *core ? atoi(core) : -1;
    if (s) {
        sdsm_stats_t st;
        sdsm_stats(s, &st);
        r->lib_s = st.lib_s;
        r->wait_s = st.wait_s;
        r->msgs_sent = st.msgs_sent;
        r->bytes_sent = st.bytes_sent;
    }
}

int finalize_report(report_t *r, sdsm_t **s)
{
    sdsm_stats_t st;
    int e = sdsm_finalize_stats(s, &st);
    if (e == SDSM_OK) {
        r->msgs_sent = st.msgs_sent;
        r->bytes_sent = st.bytes_sent;
    }
    return e;
}

static const char *role_name(int role)
{
    static const char *n[] = {"server", "client", "io", "input", "output", "task", "sequential"};
    return role >= 0 && role <= ROLE_SEQ ? n[role] : "?";
}

void finish(const char *app, const opts_t *o, report_t *me, const char *extra_json)
{
    timeline_stop();
    report_t *all = world_rank == 0 ? malloc(sizeof *all * world_size) : NULL;
    MPI_Gather(me, sizeof *me, MPI_BYTE, all, sizeof *me, MPI_BYTE, 0, MPI_COMM_WORLD);
    int n = tl.n, *counts = NULL, *displs = NULL;
    if (world_rank == 0) {
        counts = malloc(sizeof(int) * world_size);
        displs = malloc(sizeof(int) * world_size);
    }
    MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double *ts = NULL, *cs = NULL;
    int total = 0;
    if (world_rank == 0) {
        for (int r = 0; r < world_size; r++) {
            displs[r] = total;
            total += counts[r];
        }
        ts = malloc(sizeof(double) * (total + 1));
        cs = malloc(sizeof(double) * (total + 1));
    }
    MPI_Gatherv(tl.t, n, MPI_DOUBLE, ts, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gatherv(tl.cpu, n, MPI_DOUBLE, cs, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (world_rank != 0)
        return;
    const char *impl = o->impl == IMPL_SDSM ? "sdsm" : o->impl == IMPL_MPI ? "mpi" : "seq";
    printf("{\"app\": \"%s\", \"impl\": \"%s\", \"ranks_total\": %d%s%s, \"ranks\": [", app, impl,
           world_size, extra_json && *extra_json ? ", " : "", extra_json ? extra_json : "");
    for (int r = 0; r < world_size; r++) {
        report_t *x = &all[r];
        char core[16] = "null";
        if (x->device_core >= 0)
            snprintf(core, sizeof core, "%d", x->device_core);
        printf("%s{\"rank\": %d, \"role\": \"%s\", \"host\": \"%s\", \"device_core\": %s, "
               "\"wall_s\": %.9f, \"cpu_s\": %.9f, "
               "\"lib_s\": %.9f, \"wait_s\": %.9f, \"compute_s\": %.9f, \"frames\": %.0f, "
               "\"msgs_sent\": %llu, \"bytes_sent\": %llu, \"hash\": \"%016llx\", \"quiet\": [",
               r ? ", " : "", r, role_name(x->role), x->host, core, x->wall_s, x->cpu_s, x->lib_s, x->wait_s,
               x->compute_s, x->frames, (unsigned long long)x->msgs_sent,
               (unsigned long long)x->bytes_sent, (unsigned long long)x->hash);
        for (uint64_t q = 0; q < x->nquiet && q < 64; q++)
            printf("%s[%.9f, %.9f]", q ? ", " : "", x->quiet_start[q], x->quiet_end[q]);
        printf("]}");
    }
    printf("], \"timeline\": [");
    for (int r = 0; r < world_size; r++) {
        printf("%s{\"rank\": %d, \"t_s\": [", r ? ", " : "", r);
        for (int i = 0; i < counts[r]; i++)
            printf("%s%.6f", i ? ", " : "", ts[displs[r] + i]);
        printf("], \"cpu_s\": [");
        for (int i = 0; i < counts[r]; i++)
            printf("%s%.6f", i ? ", " : "", cs[displs[r] + i]);
        printf("]}");
    }
    printf("]}\n");
    fflush(stdout);
}
