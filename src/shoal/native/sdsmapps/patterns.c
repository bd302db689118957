/* Experiment E's patterns on libshoalsdsm: rank 0 serves, every other rank
 * is a client writing one shared datum (seed 003 §4).
 *   full   each client: --writes consecutive writes (default 10 000)
 *   burst  each client: --cycles x (--writes writes, sleep --pause s)
 *   lock   each client: --cycles x (lock, sleep --hold s, unlock)
 * A write is acquire_write, increment, dirty release; the datum's final
 * value is checked against the number of writes. Quiet intervals (pauses,
 * lock holds) are reported so the server's CPU in them can be computed. */
#define _GNU_SOURCE
#include "apps.h"

#include <stdlib.h>
#include <string.h>

static void quiet(report_t *r, double a, double b)
{
    if (r->nquiet < 64) {
        r->quiet_start[r->nquiet] = a;
        r->quiet_end[r->nquiet] = b;
    }
    r->nquiet++;
}

static void write_once(sdsm_t *s, sdsm_chunk_t c)
{
    void *p;
    check(sdsm_acquire_write(s, c, &p, NULL), "acquire_write");
    ((uint32_t *)p)[0]++;
    check(sdsm_release(s, c, SDSM_DIRTY), "release");
}

int run_patterns(const char *which, const opts_t *o)
{
    if (o->impl != IMPL_SDSM)
        die("%s runs on the S-DSM only (--impl sdsm)", which);
    if (world_size < 2)
        die("%s needs a server and at least one client (2+ ranks)", which);
    int full = !strcmp(which, "full"), burst = !strcmp(which, "burst");
    long writes = o->writes >= 0 ? o->writes : full ? 10000 : 1000;
    long cycles = o->cycles >= 0 ? o->cycles : 10;
    double pause = o->pause_s >= 0 ? o->pause_s : 1.0, hold = o->hold_s >= 0 ? o->hold_s : 4.0;
    if (o->bytes > 2147483647UL)
        die("--bytes %zu: a chunk larger than MPI can send in one message (2147483647 B)", o->bytes);
    sdsm_t *s;
    check(sdsm_init(MPI_COMM_WORLD, 1, &s), "sdsm_init");
    sdsm_region_t datum;
    sdsm_chunk_t lock;
    check(sdsm_alloc(s, 1, o->bytes, SDSM_PLACE_CYCLIC, &datum), "sdsm_alloc");
    check(sdsm_lock_create(s, &lock), "sdsm_lock_create");
    sdsm_chunk_t c = sdsm_chunk(datum, 0);
    report_t me;
    memset(&me, 0, sizeof me);
    MPI_Barrier(MPI_COMM_WORLD);
    timeline_start(o->sample_s);
    double t0 = now_s(), c0 = cpu_s();
    long expected = 0;
    uint32_t final = 0;
    if (sdsm_is_server(s)) {
        me.role = ROLE_SERVER;
        check(sdsm_serve(s), "sdsm_serve");
    } else {
        me.role = ROLE_CLIENT;
        if (full) {
            for (long i = 0; i < writes; i++)
                write_once(s, c);
        } else if (burst) {
            for (long k = 0; k < cycles; k++) {
                for (long i = 0; i < writes; i++)
                    write_once(s, c);
                double a = now_s();
                sleep_s(pause);
                quiet(&me, a, now_s());
            }
        } else {
            for (long k = 0; k < cycles; k++) {
                check(sdsm_lock(s, lock), "sdsm_lock");
                double a = now_s();
                sleep_s(hold);
                quiet(&me, a, now_s());
                check(sdsm_unlock(s, lock), "sdsm_unlock");
            }
        }
        check(sdsm_barrier(s), "sdsm_barrier");
        const void *p;
        check(sdsm_acquire_read(s, c, &p, NULL), "acquire_read");
        final = ((const uint32_t *)p)[0];
        check(sdsm_release(s, c, SDSM_CLEAN), "release");
        expected = (full || burst) ? (long)(world_size - 1) * writes * (burst ? cycles : 1) : 0;
        if ((long)final != expected)
            die("datum is %u after the run, expected %ld: a lost update", final, expected);
    }
    fill_report(&me, s, t0, c0);
    int fe = finalize_report(&me, &s);
    check(fe, "sdsm_finalize");
    /* the seed's counts for its own runs (seed 003 §4) beside ours */
    long seed_msgs = full ? 360000 : burst ? 180000 : 188;
    uint64_t msgs = me.msgs_sent, total = 0;
    MPI_Reduce(&msgs, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    uint32_t seen = final;
    MPI_Reduce(&seen, &final, 1, MPI_UINT32_T, MPI_MAX, 0, MPI_COMM_WORLD);
    char extra[512];
    long ops = full ? writes : burst ? writes * cycles : cycles;
    snprintf(extra, sizeof extra,
             "\"writes_per_client\": %ld, \"cycles\": %ld, \"pause_s\": %g, \"hold_s\": %g, "
             "\"clients\": %d, \"operations\": %ld, \"messages\": %llu, \"seed_messages\": %ld, "
             "\"final_value\": %u, \"bytes\": %zu",
             full || burst ? writes : 0, full ? 0 : cycles, burst ? pause : 0.0,
             !full && !burst ? hold : 0.0, world_size - 1, ops * (world_size - 1),
             (unsigned long long)total, seed_msgs, final, o->bytes);
    finish(which, o, &me, extra);
    return 0;
}
