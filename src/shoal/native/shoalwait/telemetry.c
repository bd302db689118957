/* Per-function wait telemetry: process-wide counters updated with atomics
 * (any thread may wait), written as one JSON file per rank at finalize. */
#define _GNU_SOURCE
#include "shoalwait.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

const char *const sw_fn_names[F_COUNT] = {
    "MPI_Recv", "MPI_Mrecv", "MPI_Probe", "MPI_Mprobe", "MPI_Wait", "MPI_Waitall",
    "MPI_Waitany", "MPI_Waitsome", "MPI_Send", "MPI_Ssend", "MPI_Sendrecv",
    "MPI_Sendrecv_replace", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce",
    "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv", "MPI_Allgather",
    "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block",
};
const int sw_fn_class[F_COUNT] = {
    SW_P2P, SW_P2P, SW_P2P, SW_P2P, SW_P2P, SW_P2P, SW_P2P, SW_P2P,
    SW_SEND, SW_SEND, SW_P2P, SW_P2P,
    SW_COLL, SW_COLL, SW_COLL, SW_COLL, SW_COLL, SW_COLL, SW_COLL, SW_COLL, SW_COLL,
    SW_COLL, SW_COLL, SW_COLL, SW_COLL, SW_COLL,
};

/* notice_hist[k] counts notice delays in [2^k, 2^(k+1)) ns. */
#define BUCKETS 40

struct counters {
    int64_t calls, waits, wait_ns, sleep_ns, oversleep_ns, sleeps, yields, tests;
    int64_t notice_count, notice_ns, notice_max_ns;
    int64_t notice_hist[BUCKETS];
};
static struct counters stats[F_COUNT];

#define ADD(field, v) __atomic_fetch_add(&(field), (v), __ATOMIC_RELAXED)

/* Per call site: how its predictions of arrivals fared. A fixed table
 * filled on first use (a slot is claimed with a compare-and-swap of its
 * key); sites beyond it are counted as dropped. */
#define SITE_SLOTS 256

struct site_counters {
    const void *key;
    int fn;
    int64_t calls, waits, sleeps, predicted, hits, early, late, miss_ns, miss_max_ns;
    int64_t rhythm_ns, cap_ns;   /* as last seen */
};
static struct site_counters site_stats[SITE_SLOTS];
static int64_t sites_dropped;

static void max_into(int64_t *field, int64_t v)
{
    int64_t seen = __atomic_load_n(field, __ATOMIC_RELAXED);
    while (v > seen &&
           !__atomic_compare_exchange_n(field, &seen, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static struct site_counters *site_slot(const void *key, int fn)
{
    uintptr_t h = ((uintptr_t)key ^ ((uintptr_t)key >> 17)) * 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < SITE_SLOTS; i++) {
        struct site_counters *s = &site_stats[((h >> 56) + (uintptr_t)i) & (SITE_SLOTS - 1)];
        const void *k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
        if (!k) {
            const void *none = NULL;
            if (__atomic_compare_exchange_n(&s->key, &none, key, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                __atomic_store_n(&s->fn, fn, __ATOMIC_RELAXED);
                return s;
            }
            k = none;
        }
        if (k == key)
            return s;
    }
    return NULL;
}

static void record_site(int fn, const struct sw_call *c)
{
    struct site_counters *s = site_slot(c->site, fn);
    if (!s) {
        ADD(sites_dropped, 1);
        return;
    }
    ADD(s->calls, 1);
    if (c->tests > 1)
        ADD(s->waits, 1);
    if (c->sleeps)
        ADD(s->sleeps, c->sleeps);
    if (c->outcome != SW_UNPREDICTED) {
        ADD(s->predicted, 1);
        int64_t *n = c->outcome == SW_HIT ? &s->hits : c->outcome == SW_EARLY ? &s->early : &s->late;
        ADD(*n, 1);
        if (c->outcome != SW_HIT) {
            ADD(s->miss_ns, c->miss_ns);
            max_into(&s->miss_max_ns, c->miss_ns);
        }
    }
    if (c->cap_ns > 0) {   /* a wait that paused: what it planned with */
        __atomic_store_n(&s->rhythm_ns, c->rhythm_ns, __ATOMIC_RELAXED);
        __atomic_store_n(&s->cap_ns, c->cap_ns, __ATOMIC_RELAXED);
    }
}

void sw_record(int fn, const struct sw_call *c)
{
    if (c->site)
        record_site(fn, c);
    struct counters *s = &stats[fn];
    ADD(s->calls, 1);
    ADD(s->wait_ns, c->wait_ns);
    ADD(s->tests, c->tests);
    if (c->tests > 1)
        ADD(s->waits, 1);
    if (c->sleeps) {
        ADD(s->sleeps, c->sleeps);
        ADD(s->sleep_ns, c->sleep_ns);
        ADD(s->oversleep_ns, c->oversleep_ns);
    }
    if (c->yields)
        ADD(s->yields, c->yields);
    if (c->notice_ns >= 0) {
        ADD(s->notice_count, 1);
        ADD(s->notice_ns, c->notice_ns);
        int k = 0;
        for (uint64_t v = (uint64_t)c->notice_ns; v > 1 && k < BUCKETS - 1; v >>= 1)
            k++;
        ADD(s->notice_hist[k], 1);
        max_into(&s->notice_max_ns, c->notice_ns);
    }
}

/* Calls in busy mode (or of a switched-off class) go straight to PMPI and
 * are timed and recorded only when telemetry is on (see SW_PASS). */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

extern char sw_runtime_library[];
extern const char sw_built_for[];
extern int64_t sw_init_ns;
extern struct rusage sw_init_usage;

static double seconds_since(struct timeval now, struct timeval then)
{
    return (double)(now.tv_sec - then.tv_sec) + (double)(now.tv_usec - then.tv_usec) / 1e6;
}

/* One object per call site that was called: the object file and offset
 * of the call (the same in every rank, unlike the address), the nearest
 * exported symbol if any, and how its predictions fared. */
static void write_sites(FILE *f)
{
    const char *sep = "\n";
    for (int i = 0; i < SITE_SLOTS; i++) {
        struct site_counters *s = &site_stats[i];
        if (!s->key)
            continue;
        Dl_info info = {0};
        int found = dladdr(s->key, &info);
        const char *object = found && info.dli_fname ? info.dli_fname : "";
        const char *base = strrchr(object, '/');
        fprintf(f, "%s    {\"function\": \"%s\", \"object\": ", sep, sw_fn_names[s->fn]);
        json_string(f, base ? base + 1 : object);
        fprintf(f, ", \"offset\": \"0x%lx\", \"symbol\": ",
                (unsigned long)((uintptr_t)s->key - (found ? (uintptr_t)info.dli_fbase : 0)));
        if (found && info.dli_sname)
            json_string(f, info.dli_sname);
        else
            fputs("null", f);
        fprintf(f, ", \"calls\": %lld, \"waits\": %lld, \"sleeps\": %lld, "
                   "\"predicted\": %lld, \"hits\": %lld, \"early\": %lld, \"late\": %lld, "
                   "\"miss_s\": %.9f, \"miss_max_s\": %.9f, \"rhythm_s\": %.9f, "
                   "\"cap_s\": %.9f}",
                (long long)s->calls, (long long)s->waits, (long long)s->sleeps,
                (long long)s->predicted, (long long)s->hits, (long long)s->early,
                (long long)s->late, s->miss_ns / 1e9, s->miss_max_ns / 1e9, s->rhythm_ns / 1e9,
                s->cap_ns / 1e9);
        sep = ",\n";
    }
    if (*sep == ',')
        fputs("\n  ", f);
}

void sw_telemetry_write(int rank, int size)
{
    if (!sw_cfg.telemetry_dir[0])
        return;
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/rank-%d.json", sw_cfg.telemetry_dir, rank);
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "shoalwait: rank %d cannot write telemetry to %s: %s\n", rank, path,
                strerror(errno));
        return;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f, "{\n  \"format\": \"shoalwait-telemetry/1\",\n  \"rank\": %d,\n  \"size\": %d,\n"
               "  \"pid\": %d,\n  \"mode\": ", rank, size, (int)getpid());
    json_string(f, sw_cfg.mode_text);
    fputs(",\n  \"classes\": [", f);
    const char *names[3] = {"p2p", "send", "coll"}, *comma = "";
    for (int i = 0; i < 3; i++)
        if (sw_cfg.classes & (1 << i)) {
            fprintf(f, "%s\"%s\"", comma, names[i]);
            comma = ", ";
        }
    fputs("],\n", f);
    fprintf(f, "  \"built_for\": ");
    json_string(f, sw_built_for);
    fprintf(f, ",\n  \"mpi_library\": ");
    json_string(f, sw_runtime_library);
    fprintf(f, ",\n  \"timer_slack_requested_ns\": %lld,\n  \"timer_slack_ns\": %lld,\n"
               "  \"timer_slack_error\": ",
            (long long)sw_cfg.slack_ns, (long long)sw_slack_got_ns);
    if (sw_slack_errno)
        json_string(f, strerror(sw_slack_errno));
    else
        fputs("null", f);
    fprintf(f, ",\n  \"wake\": \"%s\",\n  \"socket_wakes\": %lld",
            sw_cfg.wake_on_socket ? "socket" : "timer", (long long)sw_wakes);
    /* Every duration here is host time: the device's times the dilation. */
    fprintf(f, ",\n  \"dilation\": %.9g,\n  \"floor_ns\": %lld,\n  \"spin_ns\": %lld,\n"
               "  \"linear_ns\": [%lld, %lld, %lld]",
            sw_cfg.dilation, (long long)sw_cfg.floor_ns, (long long)sw_cfg.spin_ns, (long long)sw_cfg.dmin_ns,
            (long long)sw_cfg.dmax_ns, (long long)sw_cfg.dstep_ns);
    fprintf(f, ",\n  \"alltoall_pairwise_calls\": %lld,\n  \"alltoall_bruck_calls\": %lld",
            (long long)__atomic_load_n(&sw_alltoall_pairwise_calls, __ATOMIC_RELAXED),
            (long long)__atomic_load_n(&sw_alltoall_bruck_calls, __ATOMIC_RELAXED));
    fprintf(f, ",\n  \"alltoall_comms_made\": %lld,\n  \"alltoall_world_in_init\": %d",
            (long long)__atomic_load_n(&sw_alltoall_comms_made, __ATOMIC_RELAXED),
            sw_alltoall_world_in_init);
    fprintf(f, ",\n  \"wall_s\": %.9f,\n  \"utime_s\": %.6f,\n  \"stime_s\": %.6f,\n"
               "  \"calls\": {",
            (sw_now_ns() - sw_init_ns) / 1e9, seconds_since(ru.ru_utime, sw_init_usage.ru_utime),
            seconds_since(ru.ru_stime, sw_init_usage.ru_stime));
    const char *sep = "\n";
    for (int i = 0; i < F_COUNT; i++) {
        struct counters *s = &stats[i];
        if (!s->calls)
            continue;
        const char *cls = sw_fn_class[i] == SW_P2P ? "p2p" : sw_fn_class[i] == SW_SEND ? "send"
                                                                                   : "coll";
        fprintf(f, "%s    \"%s\": {\"class\": \"%s\", \"calls\": %lld, \"waits\": %lld, "
                   "\"tests\": %lld, \"wait_s\": %.9f, \"sleep_s\": %.9f, \"oversleep_s\": %.9f, "
                   "\"sleeps\": %lld, \"yields\": %lld, \"notice_count\": %lld, "
                   "\"notice_s\": %.9f, \"notice_max_s\": %.9f, \"notice_hist_log2ns\": [",
                sep, sw_fn_names[i], cls, (long long)s->calls, (long long)s->waits,
                (long long)s->tests, s->wait_ns / 1e9, s->sleep_ns / 1e9, s->oversleep_ns / 1e9,
                (long long)s->sleeps, (long long)s->yields, (long long)s->notice_count,
                s->notice_ns / 1e9, s->notice_max_ns / 1e9);
        for (int k = 0; k < BUCKETS; k++)
            fprintf(f, "%s%lld", k ? ", " : "", (long long)s->notice_hist[k]);
        fputs("]}", f);
        sep = ",\n";
    }
    fputs("\n  },\n  \"sites\": [", f);
    write_sites(f);
    fprintf(f, "],\n  \"sites_dropped\": %lld", (long long)sites_dropped);
    sw_traffic_write(f);
    fputs("\n}\n", f);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        fprintf(stderr, "shoalwait: rank %d cannot write telemetry to %s: %s\n", rank, path,
                strerror(errno));
}
