/* Checkers run by the tests and benchmarks.
 *
 *   stress --seeds N [--first S] [--ops K]
 *       rank 0 serves (two servers with 4+ ranks); per seed every client runs
 *       K random operations (read, write, wait for newer, lock + write,
 *       random sleeps) on chunks of 32 B, 4 KiB and 96 KiB (above the inline
 *       limit). A chunk's contents encode (version, writer, sequence); each
 *       grant is checked against its version, and at the end the logs are
 *       replayed against a sequential model: per chunk the versions written
 *       are 1..n without gaps or repeats, and the final contents are the
 *       last write's; every write hold (grant to release, one clock on one
 *       host) overlaps no other hold of the same chunk.
 *       Prints {"seeds": N, "violations": V, ...}.
 *   errors
 *       the defined error codes: double acquire, release of a chunk not
 *       held, a mismatched collective allocation, a chunk larger than MPI
 *       can send, an opposite-order acquisition on one home (EDEADLK), a
 *       client call on a server. Prints {"checks": {...}}.
 *   deadlock
 *       two clients take chunks homed on two servers in opposite order; no
 *       home sees a cycle, so the watchdog must report and stop the job. */
#define _GNU_SOURCE
#include "apps.h"

#include <stdlib.h>
#include <string.h>

typedef struct { uint64_t version, writer, seq; } stamp_t;
typedef struct { int32_t chunk, writer, write, pad; uint64_t version, seq; double t0, t1; } logent_t;

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static uint8_t fill_byte(uint64_t version, uint64_t writer, size_t i)
{
    return (uint8_t)(version * 31 + writer * 7 + i);
}

static int stamp_ok(const void *p, size_t bytes, uint64_t version)
{
    stamp_t st;
    memcpy(&st, p, sizeof st);
    if (version == 0) {               /* never written: all zeros */
        for (size_t i = 0; i < bytes; i++)
            if (((const uint8_t *)p)[i])
                return 0;
        return 1;
    }
    if (st.version != version)
        return 0;
    for (size_t i = sizeof st; i < bytes; i += 997)
        if (((const uint8_t *)p)[i] != fill_byte(st.version, st.writer, i))
            return 0;
    return 1;
}

static void stamp_write(void *p, size_t bytes, uint64_t version, uint64_t writer, uint64_t seq)
{
    stamp_t st = {version, writer, seq};
    memcpy(p, &st, sizeof st);
    for (size_t i = sizeof st; i < bytes; i += 997)
        ((uint8_t *)p)[i] = fill_byte(version, writer, i);
}

#define NCH 6
static const size_t chunk_bytes[NCH] = {32, 32, 4096, 4096, 98304, 98304};

static long one_seed(uint64_t seed, int ops, int nservers, long *acquires)
{
    long bad = 0;
    sdsm_t *s;
    check(sdsm_init(MPI_COMM_WORLD, nservers, &s), "sdsm_init");
    sdsm_region_t reg[NCH];
    for (int k = 0; k < NCH; k++)
        check(sdsm_alloc(s, 1, chunk_bytes[k], SDSM_PLACE_ON(k % nservers), &reg[k]), "alloc");
    sdsm_chunk_t lock;
    check(sdsm_lock_create(s, &lock), "lock");
    logent_t *log = malloc(sizeof *log * (ops + 1));
    logent_t *reads = malloc(sizeof *reads * (ops + 1));
    int nreads = 0;
    int nlog = 0;
    if (sdsm_is_server(s)) {
        check(sdsm_serve(s), "serve");
    } else {
        int me = sdsm_client_index(s);
        uint64_t x = seed * 0x9E3779B97F4A7C15ULL + (uint64_t)me * 0xBF58476D1CE4E5B9ULL + 1;
        uint64_t known[NCH] = {0};
        for (int i = 0; i < ops; i++) {
            int k = (int)(rng_next(&x) % NCH), what = (int)(rng_next(&x) % 10);
            sdsm_chunk_t c = sdsm_chunk(reg[k], 0);
            uint64_t v;
            if (what < 4) {                       /* read */
                const void *p;
                check(sdsm_acquire_read(s, c, &p, &v), "read");
                double a = now_s();
                bad += !stamp_ok(p, chunk_bytes[k], v) || v < known[k];
                known[k] = v;
                if (rng_next(&x) % 8 == 0)
                    sleep_s(1e-6 * (double)(rng_next(&x) % 200));
                reads[nreads++] = (logent_t){k, me, 0, 0, v, (uint64_t)i, a, now_s()};
                check(sdsm_release(s, c, SDSM_CLEAN), "release");
            } else if (what < 8) {                /* write, maybe under the lock */
                int locked = what == 7;
                if (locked)
                    check(sdsm_lock(s, lock), "lock");
                void *p;
                check(sdsm_acquire_write(s, c, &p, &v), "write");
                double a = now_s();
                bad += !stamp_ok(p, chunk_bytes[k], v) || v < known[k];
                stamp_write(p, chunk_bytes[k], v + 1, (uint64_t)me, (uint64_t)i);
                if (rng_next(&x) % 8 == 0)
                    sleep_s(1e-6 * (double)(rng_next(&x) % 200));
                log[nlog++] = (logent_t){k, me, 1, 0, v + 1, (uint64_t)i, a, now_s()};
                check(sdsm_release(s, c, SDSM_DIRTY), "release");
                known[k] = v + 1;
                if (locked)
                    check(sdsm_unlock(s, lock), "unlock");
            } else if (known[k]) {
                /* wait for a version we know exists: answered at once, never parked
                 * forever (a newer one may never come); parking is checked by
                 * the explorer and the applications */
                check(sdsm_wait_newer(s, c, known[k] - 1, &v), "wait_newer");
                bad += v < known[k];
            }
        }
        (*acquires) += ops;
        /* gather the write logs to the first client and replay them */
        MPI_Comm cc = sdsm_client_comm(s);
        int nc = sdsm_nclients(s), *counts = NULL, *displs = NULL, total = 0;
        log = realloc(log, sizeof *log * (nlog + nreads + 1));
        memcpy(log + nlog, reads, sizeof *reads * nreads);
        int bytes = (nlog + nreads) * (int)sizeof *log;
        if (me == 0) {
            counts = malloc(sizeof(int) * nc);
            displs = malloc(sizeof(int) * nc);
        }
        MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, cc);
        logent_t *all = NULL;
        if (me == 0) {
            for (int r = 0; r < nc; r++) {
                displs[r] = total;
                total += counts[r];
            }
            all = malloc(total + 1);
        }
        MPI_Gatherv(log, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, cc);
        check(sdsm_barrier(s), "barrier");
        if (me == 0) {
            int n = total / (int)sizeof *log;
            /* holds of one chunk: a write overlaps no other hold */
            for (int i = 0; i < n; i++)
                for (int j = i + 1; j < n; j++)
                    if (all[i].chunk == all[j].chunk && (all[i].write || all[j].write) &&
                        all[i].writer != all[j].writer &&
                        all[i].t0 < all[j].t1 && all[j].t0 < all[i].t1)
                        bad++;
            for (int k = 0; k < NCH; k++) {
                /* versions 1..m each written exactly once */
                uint64_t m = 0;
                for (int j = 0; j < n; j++)
                    if (all[j].write && all[j].chunk == k && all[j].version > m)
                        m = all[j].version;
                uint8_t *seen = calloc(m + 1, 1);
                int last_writer = -1;
                uint64_t last_seq = 0;
                for (int j = 0; j < n; j++)
                    if (all[j].write && all[j].chunk == k) {
                        bad += seen[all[j].version]++ != 0;
                        if (all[j].version == m) {
                            last_writer = all[j].writer;
                            last_seq = all[j].seq;
                        }
                    }
                for (uint64_t v = 1; v <= m; v++)
                    bad += !seen[v];
                free(seen);
                const void *p;
                uint64_t v;
                check(sdsm_acquire_read(s, sdsm_chunk(reg[k], 0), &p, &v), "final read");
                bad += v != m || !stamp_ok(p, chunk_bytes[k], v);
                if (m) {
                    stamp_t st;
                    memcpy(&st, p, sizeof st);
                    bad += st.writer != (uint64_t)last_writer || st.seq != last_seq;
                }
                check(sdsm_release(s, sdsm_chunk(reg[k], 0), SDSM_CLEAN), "final release");
            }
            free(all);
            free(counts);
            free(displs);
        }
    }
    free(log);
    free(reads);
    check(sdsm_finalize(&s), "sdsm_finalize");
    long total_bad = 0;
    MPI_Allreduce(&bad, &total_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total_bad;
}

int run_stress(int seeds, long first, int ops)
{
    int nservers = world_size >= 4 ? 2 : 1;
    if (world_size < 2)
        die("stress needs a server and a client (2+ ranks)");
    long violations = 0, failed_seeds = 0, acquires = 0;
    long first_bad = -1;
    double t0 = now_s();
    for (int i = 0; i < seeds; i++) {
        long b = one_seed((uint64_t)(first + i), ops, nservers, &acquires);
        violations += b;
        if (b) {
            failed_seeds++;
            if (first_bad < 0)
                first_bad = first + i;
        }
    }
    long all_ops = 0;
    MPI_Reduce(&acquires, &all_ops, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("{\"seeds\": %d, \"first_seed\": %ld, \"ops_per_client\": %d, \"servers\": %d, "
               "\"clients\": %d, \"operations\": %ld, \"violations\": %ld, \"failed_seeds\": %ld, "
               "\"first_failed_seed\": %ld, \"wall_s\": %.6f}\n",
               seeds, first, ops, nservers, world_size - nservers, all_ops, violations,
               failed_seeds, first_bad, now_s() - t0);
    return violations ? 1 : 0;
}

static const char *code_name(int e)
{
    static const char *n[] = {"OK", "EINVAL", "EROLE", "EHELD", "ENOTHELD", "EDEADLK",
                              "EMISMATCH", "EPROTO", "ENOMEM", "EMPI", "ESHUTDOWN"};
    return e >= 0 && e < SDSM_NERRORS ? n[e] : "?";
}

int run_errors(void)
{
    if (world_size != 3)
        die("errors runs on 3 ranks (a server and two clients)");
    sdsm_t *s;
    check(sdsm_init(MPI_COMM_WORLD, 1, &s), "sdsm_init");
    int role_server = sdsm_is_server(s), me = sdsm_client_index(s);
    sdsm_region_t r, bad;
    /* a mismatched allocation fails on every rank and allocates nothing */
    int mismatch = sdsm_alloc(s, role_server || me == 0 ? 2 : 1, 8, SDSM_PLACE_CYCLIC, &bad);
    int too_big = sdsm_alloc(s, 1, (size_t)3 << 30, SDSM_PLACE_CYCLIC, &bad);
    check(sdsm_alloc(s, 2, 8, SDSM_PLACE_CYCLIC, &r), "alloc");
    sdsm_chunk_t a = sdsm_chunk(r, 0), b = sdsm_chunk(r, 1);
    int twice = -1, unheld = -1, role = -1, deadlk = -1, got = -1;
    if (role_server) {
        const void *p;
        role = sdsm_acquire_read(s, a, &p, NULL);
        check(sdsm_serve(s), "serve");
    } else {
        role = sdsm_serve(s);
        unheld = sdsm_release(s, a, SDSM_DIRTY);
        sdsm_chunk_t mine = me == 0 ? a : b, other = me == 0 ? b : a;
        void *p;
        check(sdsm_acquire_write(s, mine, &p, NULL), "acquire own");
        twice = sdsm_acquire_write(s, mine, &p, NULL);
        check(sdsm_barrier(s), "barrier");
        if (me == 1)
            sleep_s(0.2);   /* usually client 0 queues first; either order is checked */
        /* both homed on the one server: whoever closes the cycle gets EDEADLK */
        deadlk = sdsm_acquire_write(s, other, &p, NULL);
        if (deadlk == SDSM_OK) {
            check(sdsm_release(s, other, SDSM_DIRTY), "release other");
            got = 1;
        }
        check(sdsm_release(s, mine, SDSM_DIRTY), "release own");
    }
    int codes[6] = {mismatch, too_big, twice, unheld, role, deadlk}, all[18];
    MPI_Gather(codes, 6, MPI_INT, all, 6, MPI_INT, 0, MPI_COMM_WORLD);
    check(sdsm_finalize(&s), "sdsm_finalize");
    if (world_rank == 0) {
        printf("{\"server_acquire\": \"%s\", \"mismatch\": [\"%s\", \"%s\", \"%s\"], "
               "\"too_big\": [\"%s\", \"%s\", \"%s\"], \"client_serve\": [\"%s\", \"%s\"], "
               "\"double_acquire\": [\"%s\", \"%s\"], \"unheld_release\": [\"%s\", \"%s\"], "
               "\"opposite_order\": [\"%s\", \"%s\"]}\n",
               code_name(all[4]), code_name(all[0]), code_name(all[6]), code_name(all[12]),
               code_name(all[1]), code_name(all[7]), code_name(all[13]), code_name(all[10]),
               code_name(all[16]), code_name(all[8]), code_name(all[14]), code_name(all[9]),
               code_name(all[15]), code_name(all[11]), code_name(all[17]));
    }
    (void)got;
    return 0;
}

int run_deadlock(void)
{
    if (world_size != 4)
        die("deadlock runs on 4 ranks (two servers and two clients)");
    sdsm_t *s;
    check(sdsm_init(MPI_COMM_WORLD, 2, &s), "sdsm_init");
    sdsm_region_t r;
    check(sdsm_alloc(s, 2, 8, SDSM_PLACE_CYCLIC, &r), "alloc");   /* chunk i on server i */
    if (sdsm_is_server(s)) {
        check(sdsm_serve(s), "serve");
    } else {
        int me = sdsm_client_index(s);
        void *p;
        check(sdsm_acquire_write(s, sdsm_chunk(r, me), &p, NULL), "acquire own");
        check(sdsm_barrier(s), "barrier");
        /* a cycle across two homes: neither home can see it */
        check(sdsm_acquire_write(s, sdsm_chunk(r, 1 - me), &p, NULL), "acquire other");
        die("the cross-home deadlock was granted");
    }
    check(sdsm_finalize(&s), "sdsm_finalize");
    return 0;
}
