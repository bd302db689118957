/* libshoalsdsm transport: clients, the server loop, allocation, watchdog.
 *
 * Wire: every message starts with a wire_t header. Requests go to the
 * chunk's home on TAG_REQ, replies come back on TAG_REP; a chunk of up to
 * INLINE_B bytes travels inside that message, a larger one follows it on
 * TAG_DATA from the same peer (MPI keeps per-pair order), received straight
 * into place. No probes: the server loop is one MPI_Recv(ANY_SOURCE) into a
 * buffer sized for the largest inline message; each client wait is one
 * MPI_Recv naming its home. */
#define _GNU_SOURCE
#include "sdsm.h"
#include "home.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAG_REQ 0x5d01
#define TAG_REP 0x5d02
#define TAG_DATA 0x5d03
#define INLINE_B (64 * 1024)

typedef struct {
    uint32_t op, region, index, flags;
    uint64_t version, bytes;
    int32_t error, pad;
} wire_t;

struct region {
    uint32_t nchunks, home_base;
    size_t bytes;
    int place;
    unsigned char *data;   /* server: the homes' copies; client: the local copies */
    uint64_t *ver;         /* client: version of each local copy */
    uint8_t *held;         /* client: HOLD_* per chunk */
};

struct sdsm {
    MPI_Comm comm, clients;
    int rank, size, nservers, served, nlocks;
    uint32_t nregions;
    struct region *regions;
    unsigned char *rbuf, *sbuf;
    sdsm_stats_t st;
    /* server side */
    home_t home;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t watchdog;
    int watchdog_on, stopping;
    double watchdog_s, last_progress, serve_start;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sdsm_is_server(const sdsm_t *s) { return s->rank < s->nservers; }
int sdsm_rank(const sdsm_t *s) { return s->rank; }
int sdsm_nservers(const sdsm_t *s) { return s->nservers; }
int sdsm_nclients(const sdsm_t *s) { return s->size - s->nservers; }
int sdsm_client_index(const sdsm_t *s) { return sdsm_is_server(s) ? -1 : s->rank - s->nservers; }
MPI_Comm sdsm_client_comm(const sdsm_t *s) { return s->clients; }

int sdsm_init(MPI_Comm comm, int nservers, sdsm_t **out)
{
    *out = NULL;
    int size;
    if (MPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return SDSM_EMPI;
    if (nservers < 1 || nservers >= size)
        return SDSM_EINVAL;     /* at least one server and one client */
    sdsm_t *s = calloc(1, sizeof *s);
    if (!s)
        return SDSM_ENOMEM;
    s->nservers = nservers;
    s->size = size;
    /* our own communicator keeps user messages apart; errors come back as codes */
    if (MPI_Comm_dup(comm, &s->comm) != MPI_SUCCESS) {
        free(s);
        return SDSM_EMPI;
    }
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s->comm, &s->rank);
    if (MPI_Comm_split(s->comm, sdsm_is_server(s) ? MPI_UNDEFINED : 0, s->rank, &s->clients)
        != MPI_SUCCESS)
        return SDSM_EMPI;
    s->rbuf = malloc(sizeof(wire_t) + INLINE_B);
    s->sbuf = malloc(sizeof(wire_t) + INLINE_B);
    if (!s->rbuf || !s->sbuf)
        return SDSM_ENOMEM;
    if (sdsm_is_server(s)) {
        if (home_init(&s->home, size, size - nservers) != SDSM_OK)
            return SDSM_ENOMEM;
        pthread_mutex_init(&s->mu, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->wake, &ca);
        pthread_condattr_destroy(&ca);
        const char *w = getenv("SDSM_WATCHDOG_S");
        s->watchdog_s = w && *w ? atof(w) : 60.0;
    }
    *out = s;
    return SDSM_OK;
}

/* ---------------------------------------------------------------- placement */

static int region_of(const sdsm_t *s, sdsm_chunk_t c, struct region **r, uint32_t *i)
{
    uint32_t id = (uint32_t)(c >> 32), idx = (uint32_t)c;
    if (id >= s->nregions || idx >= s->regions[id].nchunks)
        return SDSM_EINVAL;
    *r = &s->regions[id];
    *i = idx;
    return SDSM_OK;
}

static int home_server(const sdsm_t *s, const struct region *r, uint32_t i)
{
    if (r->place & 0x100)
        return r->place & 0xff;
    if (r->place == SDSM_PLACE_BLOCK) {
        uint32_t per = (r->nchunks + s->nservers - 1) / s->nservers;
        return (int)(i / per);
    }
    return (int)(i % (uint32_t)s->nservers);
}

int sdsm_home(const sdsm_t *s, sdsm_chunk_t c)
{
    struct region *r;
    uint32_t i;
    if (region_of(s, c, &r, &i) != SDSM_OK)
        return -1;
    return home_server(s, r, i);
}

int sdsm_alloc(sdsm_t *s, uint32_t nchunks, size_t chunk_bytes, int place, sdsm_region_t *out)
{
    /* Every rank must ask for the same region: compare before anyone allocates. */
    uint64_t mine[4] = {s->nregions, nchunks, chunk_bytes, (uint64_t)(int64_t)place};
    uint64_t *all = malloc(sizeof mine * s->size);
    if (!all)
        return SDSM_ENOMEM;
    if (MPI_Allgather(mine, 4, MPI_UINT64_T, all, 4, MPI_UINT64_T, s->comm) != MPI_SUCCESS) {
        free(all);
        return SDSM_EMPI;
    }
    int same = 1;
    for (int r = 0; r < s->size; r++)
        same &= !memcmp(&all[4 * r], mine, sizeof mine);
    free(all);
    if (!same)
        return SDSM_EMISMATCH;
    int on = (place & 0x100) ? place & 0xff : -1;
    if (nchunks == 0 || chunk_bytes > INT_MAX ||
        (place != SDSM_PLACE_CYCLIC && place != SDSM_PLACE_BLOCK && (on < 0 || on >= s->nservers ||
                                                                     (place & ~0x1ff))))
        return SDSM_EINVAL;
    struct region *regs = realloc(s->regions, sizeof *regs * (s->nregions + 1));
    if (!regs)
        return SDSM_ENOMEM;
    s->regions = regs;
    struct region *r = &regs[s->nregions];
    memset(r, 0, sizeof *r);
    r->nchunks = nchunks;
    r->bytes = chunk_bytes;
    r->place = place;
    /* calloc: pages nobody touches cost nothing; version 0 is all zeros everywhere */
    if (chunk_bytes && !(r->data = calloc(nchunks, chunk_bytes)))
        return SDSM_ENOMEM;
    if (sdsm_is_server(s)) {
        uint8_t *homed = malloc(nchunks);
        if (!homed)
            return SDSM_ENOMEM;
        for (uint32_t i = 0; i < nchunks; i++)
            homed[i] = home_server(s, r, i) == s->rank;
        pthread_mutex_lock(&s->mu);
        int64_t base = home_add_chunks(&s->home, nchunks, homed);
        pthread_mutex_unlock(&s->mu);
        free(homed);
        if (base < 0)
            return (int)-base;
        r->home_base = (uint32_t)base;
    } else {
        r->ver = calloc(nchunks, sizeof *r->ver);
        r->held = calloc(nchunks, 1);
        if (!r->ver || !r->held)
            return SDSM_ENOMEM;
    }
    out->id = s->nregions++;
    out->nchunks = nchunks;
    out->chunk_bytes = chunk_bytes;
    return SDSM_OK;
}

int sdsm_lock_create(sdsm_t *s, sdsm_chunk_t *lock)
{
    sdsm_region_t r;
    int e = sdsm_alloc(s, 1, 0, SDSM_PLACE_ON(s->nlocks % s->nservers), &r);
    if (e == SDSM_OK) {
        s->nlocks++;
        *lock = sdsm_chunk(r, 0);
    }
    return e;
}

/* ---------------------------------------------------------------- messages */

static int send_msg(sdsm_t *s, int to, int tag, const wire_t *h, const void *data, size_t bytes)
{
    size_t inl = bytes <= INLINE_B ? bytes : 0;
    memcpy(s->sbuf, h, sizeof *h);
    if (inl)
        memcpy(s->sbuf + sizeof *h, data, inl);
    if (MPI_Send(s->sbuf, (int)(sizeof *h + inl), MPI_BYTE, to, tag, s->comm) != MPI_SUCCESS)
        return SDSM_EMPI;
    s->st.msgs_sent++;
    s->st.bytes_sent += sizeof *h + inl;
    if (bytes > INLINE_B) {
        if (MPI_Send(data, (int)bytes, MPI_BYTE, to, TAG_DATA, s->comm) != MPI_SUCCESS)
            return SDSM_EMPI;
        s->st.msgs_sent++;
        s->st.bytes_sent += bytes;
    }
    return SDSM_OK;
}

/* A chunk payload that follows its header (or sits inside it). */
static int recv_payload(sdsm_t *s, int from, void *dst, size_t bytes)
{
    if (bytes <= INLINE_B) {
        memcpy(dst, s->rbuf + sizeof(wire_t), bytes);
        return SDSM_OK;
    }
    double t0 = now_s();
    int rc = MPI_Recv(dst, (int)bytes, MPI_BYTE, from, TAG_DATA, s->comm, MPI_STATUS_IGNORE);
    s->st.wait_s += now_s() - t0;
    if (rc != MPI_SUCCESS)
        return SDSM_EMPI;
    s->st.msgs_recv++;
    s->st.bytes_recv += bytes;
    return SDSM_OK;
}

/* The one client wait: the reply to this client's outstanding request. */
static int client_call(sdsm_t *s, int home, const wire_t *req, const void *data, size_t bytes,
                       wire_t *rep)
{
    int e = send_msg(s, home, TAG_REQ, req, data, bytes);
    if (e != SDSM_OK)
        return e;
    MPI_Status st;
    double t0 = now_s();
    int rc = MPI_Recv(s->rbuf, (int)(sizeof(wire_t) + INLINE_B), MPI_BYTE, home, TAG_REP,
                      s->comm, &st);
    s->st.wait_s += now_s() - t0;
    if (rc != MPI_SUCCESS)
        return SDSM_EMPI;
    int got;
    MPI_Get_count(&st, MPI_BYTE, &got);
    s->st.msgs_recv++;
    s->st.bytes_recv += (uint64_t)got;
    memcpy(rep, s->rbuf, sizeof *rep);
    return SDSM_OK;
}

/* ---------------------------------------------------------------- clients */

static int client_chunk(sdsm_t *s, sdsm_chunk_t c, struct region **r, uint32_t *i)
{
    if (!s)
        return SDSM_EINVAL;
    if (sdsm_is_server(s))
        return SDSM_EROLE;
    if (s->stopping)
        return SDSM_ESHUTDOWN;
    return region_of(s, c, r, i);
}

static int acquire(sdsm_t *s, sdsm_chunk_t c, int op, void **p, uint64_t *ver)
{
    double t0 = now_s();
    struct region *r;
    uint32_t i;
    int e = client_chunk(s, c, &r, &i);
    if (e == SDSM_OK && r->held[i])
        e = SDSM_EHELD;
    if (e == SDSM_OK) {
        wire_t req = {.op = (uint32_t)op, .region = (uint32_t)(c >> 32), .index = i,
                      .version = r->ver[i]}, rep;
        e = client_call(s, home_server(s, r, i), &req, NULL, 0, &rep);
        if (e == SDSM_OK && rep.op == HOME_ERROR)
            e = rep.error;
        else if (e == SDSM_OK && rep.op != (uint32_t)(op == HOME_ACQ_W ? HOME_GRANT_W : HOME_GRANT_R))
            e = SDSM_EPROTO;
        if (e == SDSM_OK && rep.bytes) {
            e = recv_payload(s, home_server(s, r, i), r->data + (size_t)i * r->bytes, r->bytes);
            s->st.grants_with_data++;
        }
        if (e == SDSM_OK) {
            r->ver[i] = rep.version;
            r->held[i] = op == HOME_ACQ_W ? HOLD_W : HOLD_R;
            s->st.acquires++;
            if (p)
                *p = r->data + (size_t)i * r->bytes;
            if (ver)
                *ver = rep.version;
        }
    }
    s->st.lib_s += now_s() - t0;
    return e;
}

int sdsm_acquire_read(sdsm_t *s, sdsm_chunk_t c, const void **p, uint64_t *ver)
{
    return acquire(s, c, HOME_ACQ_R, (void **)p, ver);
}

int sdsm_acquire_write(sdsm_t *s, sdsm_chunk_t c, void **p, uint64_t *ver)
{
    return acquire(s, c, HOME_ACQ_W, p, ver);
}

int sdsm_release(sdsm_t *s, sdsm_chunk_t c, int flags)
{
    double t0 = now_s();
    struct region *r;
    uint32_t i;
    int e = client_chunk(s, c, &r, &i);
    if (e == SDSM_OK && !r->held[i])
        e = SDSM_ENOTHELD;
    if (e == SDSM_OK && flags != SDSM_DIRTY && flags != SDSM_CLEAN)
        e = SDSM_EINVAL;
    if (e == SDSM_OK) {
        /* a reader never writes back: its release is clean whatever it says */
        int dirty = r->held[i] == HOLD_W && flags == SDSM_DIRTY;
        wire_t req = {.op = dirty ? HOME_REL_DIRTY : HOME_REL, .region = (uint32_t)(c >> 32),
                      .index = i, .bytes = dirty ? r->bytes : 0};
        e = send_msg(s, home_server(s, r, i), TAG_REQ, &req,
                     r->data + (size_t)i * r->bytes, dirty ? r->bytes : 0);
        r->held[i] = HOLD_NONE;
        if (dirty)
            r->ver[i]++;      /* we held the latest copy exclusively: ours is the next version */
        s->st.releases++;
    }
    s->st.lib_s += now_s() - t0;
    return e;
}

int sdsm_wait_newer(sdsm_t *s, sdsm_chunk_t c, uint64_t known, uint64_t *now)
{
    double t0 = now_s();
    struct region *r;
    uint32_t i;
    int e = client_chunk(s, c, &r, &i);
    if (e == SDSM_OK) {
        wire_t req = {.op = HOME_WAIT_NEWER, .region = (uint32_t)(c >> 32), .index = i,
                      .version = known}, rep;
        e = client_call(s, home_server(s, r, i), &req, NULL, 0, &rep);
        if (e == SDSM_OK && rep.op == HOME_ERROR)
            e = rep.error;
        else if (e == SDSM_OK && rep.op != HOME_NOTIFY)
            e = SDSM_EPROTO;
        if (e == SDSM_OK && now)
            *now = rep.version;
        s->st.waits++;
    }
    s->st.lib_s += now_s() - t0;
    return e;
}

int sdsm_lock(sdsm_t *s, sdsm_chunk_t lock) { return sdsm_acquire_write(s, lock, NULL, NULL); }
int sdsm_unlock(sdsm_t *s, sdsm_chunk_t lock) { return sdsm_release(s, lock, SDSM_CLEAN); }

int sdsm_barrier(sdsm_t *s)
{
    if (!s)
        return SDSM_EINVAL;
    if (sdsm_is_server(s))
        return SDSM_EROLE;
    double t0 = now_s();
    int rc = MPI_Barrier(s->clients);
    double dt = now_s() - t0;
    s->st.barrier_s += dt;
    s->st.lib_s += dt;
    s->st.wait_s += dt;
    return rc == MPI_SUCCESS ? SDSM_OK : SDSM_EMPI;
}

/* ---------------------------------------------------------------- server */

static struct region *region_at(sdsm_t *s, uint32_t home_index, uint32_t *i, uint32_t *id)
{
    for (uint32_t r = 0; r < s->nregions; r++)
        if (home_index >= s->regions[r].home_base &&
            home_index < s->regions[r].home_base + s->regions[r].nchunks) {
            *i = home_index - s->regions[r].home_base;
            *id = r;
            return &s->regions[r];
        }
    return NULL;
}

static const char *op_name(int op)
{
    static const char *n[] = {"?", "read", "write", "rel", "rel-dirty", "wait-newer", "bye"};
    return op >= 0 && op <= HOME_BYE ? n[op] : "?";
}

/* Print this home's holders, queues and parked waiters (watchdog, errors). */
static void dump_home(sdsm_t *s, FILE *f, double now)
{
    home_t *h = &s->home;
    fprintf(f, "sdsm watchdog: server rank %d received nothing for %.1f s with work pending\n",
            s->rank, now - s->last_progress);
    for (uint32_t k = 0; k < h->nchunks; k++) {
        home_chunk_t *c = &h->chunks[k];
        if (!c->homed || (c->owner == HOME_NONE && !c->nreaders && c->qhead == HOME_NONE &&
                          c->whead == HOME_NONE))
            continue;
        uint32_t i = 0, id = 0;
        region_at(s, k, &i, &id);
        fprintf(f, "  chunk %u:%u v%llu holders:", id, i, (unsigned long long)c->version);
        for (int x = 0; x < h->nclients; x++)
            if (home_hold(h, k, x))
                fprintf(f, " rank %d (%s)", x, home_hold(h, k, x) == HOLD_W ? "write" : "read");
        fprintf(f, "; queue:");
        for (int x = c->qhead; x != HOME_NONE; x = h->next[x])
            fprintf(f, " rank %d (%s, %.1f s)", x, op_name(h->pend_op[x]), now - h->pend_since[x]);
        fprintf(f, "; waiting for newer:");
        for (int x = c->whead; x != HOME_NONE; x = h->next[x])
            fprintf(f, " rank %d (> v%llu, %.1f s)", x, (unsigned long long)h->pend_ver[x],
                    now - h->pend_since[x]);
        fputc('\n', f);
    }
    /* who waits for whom, so a cycle across homes can be read off the dumps */
    for (int x = 0; x < h->nclients; x++)
        if (h->pend_op[x] == HOME_ACQ_R || h->pend_op[x] == HOME_ACQ_W) {
            fprintf(f, "  rank %d waits for", x);
            for (int y = 0; y < h->nclients; y++)
                if (home_hold(h, h->pend_chunk[x], y))
                    fprintf(f, " rank %d", y);
            fputc('\n', f);
        }
    fflush(f);
}

static void *watchdog_loop(void *arg)
{
    sdsm_t *s = arg;
    double tick = s->watchdog_s / 4 < 1.0 ? s->watchdog_s / 4 : 1.0;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        double t = until.tv_sec + until.tv_nsec * 1e-9 + tick;
        until.tv_sec = (time_t)t;
        until.tv_nsec = (long)((t - (time_t)t) * 1e9);
        if (!s->stopping)   /* finalize wakes us at once */
            pthread_cond_timedwait(&s->wake, &s->mu, &until);
        double now = now_s();
        int stop = s->stopping;
        /* waiting clients with nothing arriving: a deadlock or a silent rank */
        int stuck = !stop && now - s->last_progress > s->watchdog_s && !home_quiescent(&s->home);
        if (stuck) {
            /* one write(2) for the whole report: stderr is unbuffered, and the
             * other servers' reports would otherwise interleave with ours */
            char *text = NULL;
            size_t len = 0;
            FILE *m = open_memstream(&text, &len);
            FILE *f = m ? m : stderr;
            dump_home(s, f, now);
            fprintf(f, "sdsm watchdog: stopping the job (set SDSM_WATCHDOG_S to wait longer)\n");
            if (m) {
                fclose(m);
                for (size_t done = 0; done < len;) {
                    ssize_t w = write(STDERR_FILENO, text + done, len - done);
                    if (w <= 0)
                        break;
                    done += (size_t)w;
                }
            }
            fflush(stderr);
            _exit(3);
        }
        pthread_mutex_unlock(&s->mu);
        if (stop)
            return NULL;
    }
}

int sdsm_serve(sdsm_t *s)
{
    if (!s || !sdsm_is_server(s))
        return s ? SDSM_EROLE : SDSM_EINVAL;
    if (s->served)
        return SDSM_OK;
    s->served = 1;
    double start = now_s();
    s->serve_start = s->last_progress = start;
    if (s->watchdog_s > 0 && pthread_create(&s->watchdog, NULL, watchdog_loop, s) == 0)
        s->watchdog_on = 1;
    home_out_t *out = malloc(sizeof *out * home_max_out(&s->home));
    unsigned char *scratch = NULL;
    int e = out ? SDSM_OK : SDSM_ENOMEM;
    while (e == SDSM_OK && s->home.alive > 0) {
        MPI_Status st;
        double t0 = now_s();
        int rc = MPI_Recv(s->rbuf, (int)(sizeof(wire_t) + INLINE_B), MPI_BYTE, MPI_ANY_SOURCE,
                          TAG_REQ, s->comm, &st);
        double t1 = now_s();
        s->st.wait_s += t1 - t0;
        if (rc != MPI_SUCCESS) {
            e = SDSM_EMPI;
            break;
        }
        int got;
        MPI_Get_count(&st, MPI_BYTE, &got);
        s->st.msgs_recv++;
        s->st.bytes_recv += (uint64_t)got;
        wire_t req;
        memcpy(&req, s->rbuf, sizeof req);
        int from = st.MPI_SOURCE;
        home_in_t in = {.op = (int)req.op, .client = from, .version = req.version, .now = t1};
        struct region *r = req.region < s->nregions ? &s->regions[req.region] : NULL;
        in.chunk = r && req.index < r->nchunks ? r->home_base + req.index : UINT32_MAX;
        if (req.op == HOME_REL_DIRTY && req.bytes) {
            /* the payload is always taken off the wire; stored only from the writer */
            int ok = r && in.chunk != UINT32_MAX && req.bytes == r->bytes &&
                     home_hold(&s->home, in.chunk, from) == HOLD_W;
            void *dst = ok ? r->data + (size_t)req.index * r->bytes : NULL;
            if (!ok) {
                free(scratch);
                scratch = malloc(req.bytes);
                dst = scratch;
            }
            if (!dst || recv_payload(s, from, dst, req.bytes) != SDSM_OK) {
                e = dst ? SDSM_EMPI : SDSM_ENOMEM;
                break;
            }
        }
        pthread_mutex_lock(&s->mu);
        int n = home_step(&s->home, &in, out);
        s->last_progress = now_s();
        pthread_mutex_unlock(&s->mu);
        if (n < 0) {
            s->st.protocol_errors++;
            fprintf(stderr, "sdsm: server rank %d: %s from rank %d (%s on chunk %u:%u)\n",
                    s->rank, sdsm_strerror(-n), from, op_name((int)req.op), req.region, req.index);
            continue;
        }
        for (int j = 0; j < n && e == SDSM_OK; j++) {
            uint32_t i = 0, id = 0;
            struct region *rr = out[j].op == HOME_BYE_ACK ? NULL : region_at(s, out[j].chunk, &i, &id);
            size_t bytes = rr && out[j].with_data ? rr->bytes : 0;
            wire_t rep = {.op = (uint32_t)out[j].op, .region = id, .index = i,
                          .version = out[j].version, .bytes = bytes, .error = out[j].error};
            e = send_msg(s, out[j].client, TAG_REP, &rep,
                         bytes ? rr->data + (size_t)i * rr->bytes : NULL, bytes);
        }
    }
    free(out);
    free(scratch);
    s->st.lib_s += now_s() - start;
    s->st.protocol_errors = s->home.protocol_errors;
    return e;
}

/* ---------------------------------------------------------------- shutdown, stats */

int sdsm_finalize(sdsm_t **ps)
{
    return sdsm_finalize_stats(ps, NULL);
}

int sdsm_finalize_stats(sdsm_t **ps, sdsm_stats_t *out)
{
    if (!ps || !*ps)
        return SDSM_EINVAL;
    sdsm_t *s = *ps;
    int e = SDSM_OK;
    if (sdsm_is_server(s)) {
        e = sdsm_serve(s);
        if (s->watchdog_on) {
            pthread_mutex_lock(&s->mu);
            s->stopping = 1;
            pthread_cond_signal(&s->wake);
            pthread_mutex_unlock(&s->mu);
            pthread_join(s->watchdog, NULL);
        }
        home_free(&s->home);
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->mu);
    } else {
        double t0 = now_s();
        for (int h = 0; h < s->nservers; h++) {
            wire_t req = {.op = HOME_BYE}, rep;
            int eh = client_call(s, h, &req, NULL, 0, &rep);
            if (eh == SDSM_OK && rep.op != HOME_BYE_ACK)
                eh = SDSM_EPROTO;
            else if (eh == SDSM_OK)
                eh = rep.error;
            if (e == SDSM_OK)
                e = eh;
        }
        s->stopping = 1;
        s->st.lib_s += now_s() - t0;
        MPI_Comm_free(&s->clients);
    }
    for (uint32_t r = 0; r < s->nregions; r++) {
        free(s->regions[r].data);
        free(s->regions[r].ver);
        free(s->regions[r].held);
    }
    free(s->regions);
    free(s->rbuf);
    free(s->sbuf);
    MPI_Comm_free(&s->comm);
    if (out)
        *out = s->st;
    free(s);
    *ps = NULL;
    return e;
}

void sdsm_stats(const sdsm_t *s, sdsm_stats_t *out)
{
    *out = s->st;
}

void sdsm_stats_json(const sdsm_t *s, FILE *f)
{
    const sdsm_stats_t *t = &s->st;
    fprintf(f, "{\"rank\": %d, \"role\": \"%s\", \"lib_s\": %.9f, \"wait_s\": %.9f, "
            "\"barrier_s\": %.9f, \"msgs_sent\": %llu, \"msgs_recv\": %llu, "
            "\"bytes_sent\": %llu, \"bytes_recv\": %llu, \"acquires\": %llu, "
            "\"releases\": %llu, \"waits\": %llu, \"grants_with_data\": %llu, "
            "\"protocol_errors\": %llu}",
            s->rank, sdsm_is_server(s) ? "server" : "client", t->lib_s, t->wait_s, t->barrier_s,
            (unsigned long long)t->msgs_sent, (unsigned long long)t->msgs_recv,
            (unsigned long long)t->bytes_sent, (unsigned long long)t->bytes_recv,
            (unsigned long long)t->acquires, (unsigned long long)t->releases,
            (unsigned long long)t->waits, (unsigned long long)t->grants_with_data,
            (unsigned long long)t->protocol_errors);
}
