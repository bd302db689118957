/* shoal-sdsmcheck: every interleaving of small client scripts against the
 * pure home state machine (home.c), with FIFO channels per client.
 *
 *   shoal-sdsmcheck [--clients N] [--ops K] [--alphabet R0,W1,...]
 *
 * Every multiset of N scripts of K operations drawn from the alphabet is
 * explored depth first over all orders of client actions and message
 * arrivals (states already seen are skipped). Operations (k = chunk 0..1):
 *   Rk  acquire read, release          Wk  acquire write, dirty release
 *   Ck  acquire write, clean release   Nk  wait for a version newer than known
 *   Pab acquire write a then b, dirty releases (EDEADLK allowed at b)
 *   Dk  acquire read twice (the second must fail with EHELD), release
 * Checked after every step: home_check's structural invariants, at most one
 * writer xor readers (as the clients see it), grants carry the latest
 * version and data exactly when the client's copy is stale, queued grants in
 * arrival order, replies only to outstanding requests, a notification only
 * when newer; at every final state: all clients done (or parked on a wait
 * nobody can satisfy), nothing held or queued. Prints one JSON line. */
#define _GNU_SOURCE
#include "home.h"
#include "sdsm_errno.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXC 4
#define NCHUNK 2
#define MAXOPS 4
#define CHAN 6
#define MAXSTEP 16

enum { OP_R, OP_W, OP_C, OP_N, OP_P, OP_D };
typedef struct { int kind, a, b; } op_t;

/* One client's micro-program: messages to send and replies to await. */
typedef struct { int send, chunk, await, expect_err; } step_t;

typedef struct { int op; uint32_t chunk; uint64_t version; } msg_t;

typedef struct {
    int pc, nsteps, waiting, done, aborted_op;
    int held[NCHUNK];             /* HOLD_* as the client sees it */
    uint64_t known[NCHUNK], have[NCHUNK];
    int nchan;
    msg_t chan[CHAN];             /* client -> home, FIFO */
    int has_reply;
    home_out_t reply;
    uint32_t ticket;              /* arrival ticket of its queued request */
} client_t;

typedef struct {
    client_t cl[MAXC];
    uint64_t version[NCHUNK];     /* shadow: dirty releases processed */
    uint32_t next_ticket[NCHUNK];
} world_t;

static int nclients = 3, nops = 2;
static op_t alphabet[16];
static int nalpha;
static step_t prog[MAXC][MAXOPS * 6 + 2];
static int proglen[MAXC];
static uint64_t states, transitions, finals, violations, stuck_waits, deadlocks_reported;
static char first_violation[512];

/* ---- state memo: 128-bit hashes in an open-addressing table ---- */
static uint64_t *memo;
static size_t memo_cap, memo_n;

static void memo_reset(void)
{
    if (!memo) {
        memo_cap = 1 << 20;
        memo = calloc(memo_cap * 2, sizeof *memo);
    }
    memset(memo, 0, memo_cap * 2 * sizeof *memo);
    memo_n = 0;
}

static int memo_insert(uint64_t a, uint64_t b)
{
    if (a == 0 && b == 0)
        a = 1;
    if (memo_n * 2 > memo_cap) {
        uint64_t *old = memo;
        size_t oc = memo_cap;
        memo_cap *= 2;
        memo = calloc(memo_cap * 2, sizeof *memo);
        memo_n = 0;
        for (size_t i = 0; i < oc; i++)
            if (old[2 * i] || old[2 * i + 1])
                memo_insert(old[2 * i], old[2 * i + 1]);
        free(old);
    }
    size_t i = a & (memo_cap - 1);
    while (memo[2 * i] || memo[2 * i + 1]) {
        if (memo[2 * i] == a && memo[2 * i + 1] == b)
            return 0;
        i = (i + 1) & (memo_cap - 1);
    }
    memo[2 * i] = a;
    memo[2 * i + 1] = b;
    memo_n++;
    return 1;
}

static void hash_bytes(uint64_t *a, uint64_t *b, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        *a = (*a ^ c[i]) * 0x100000001b3ULL;
        *b = (*b ^ c[i]) * 0x9E3779B97F4A7C15ULL + 0x7f4a7c15;
    }
}

static void hash_state(const home_t *h, const world_t *w, uint64_t *a, uint64_t *b)
{
    *a = 0xcbf29ce484222325ULL;
    *b = 0x84222325cbf29ce4ULL;
    for (uint32_t k = 0; k < h->nchunks; k++) {
        const home_chunk_t *c = &h->chunks[k];
        int v[5] = {(int)c->version, c->owner, c->nreaders, c->qhead, c->whead};
        hash_bytes(a, b, v, sizeof v);
    }
    hash_bytes(a, b, h->hold, (size_t)h->nchunks * h->nclients);
    for (int x = 0; x < h->nclients; x++) {
        int v[6] = {h->next[x], h->pend_op[x], h->nheld[x], h->gone[x], (int)h->pend_chunk[x],
                    (int)h->pend_ver[x]};
        hash_bytes(a, b, v, sizeof v);
    }
    for (int x = 0; x < nclients; x++) {
        const client_t *c = &w->cl[x];
        int v[8] = {c->pc, c->waiting, c->done, c->held[0], c->held[1], (int)c->known[0],
                    (int)c->known[1], c->nchan};
        hash_bytes(a, b, v, sizeof v);
        uint64_t hv[2] = {c->have[0], c->have[1]};
        hash_bytes(a, b, hv, sizeof hv);
        for (int i = 0; i < c->nchan; i++)
            hash_bytes(a, b, &c->chan[i], sizeof c->chan[i]);
        hash_bytes(a, b, &c->has_reply, sizeof c->has_reply);
        if (c->has_reply)
            hash_bytes(a, b, &c->reply, sizeof c->reply);
    }
}

/* ---- homes: one working copy per depth ---- */
static home_t *levels;
static int nlevels;

static void home_copy(home_t *d, const home_t *s)
{
    memcpy(d->chunks, s->chunks, sizeof *s->chunks * s->nchunks);
    memcpy(d->hold, s->hold, (size_t)s->nchunks * s->nclients);
    size_t n = sizeof(int) * s->nclients;
    memcpy(d->next, s->next, n);
    memcpy(d->pend_op, s->pend_op, n);
    memcpy(d->nheld, s->nheld, n);
    memcpy(d->gone, s->gone, n);
    memcpy(d->pend_chunk, s->pend_chunk, sizeof(uint32_t) * s->nclients);
    memcpy(d->pend_ver, s->pend_ver, sizeof(uint64_t) * s->nclients);
    d->alive = s->alive;
    d->protocol_errors = s->protocol_errors;
}

static void violation(const char *fmt, const char *detail, int client)
{
    if (!violations++)
        snprintf(first_violation, sizeof first_violation, "%s (client %d)%s%s", fmt, client,
                 detail ? ": " : "", detail ? detail : "");
}

/* ---- client micro-programs ---- */
static void compile(int x, const op_t *ops, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        const op_t *o = &ops[i];
        switch (o->kind) {
        case OP_R: prog[x][m++] = (step_t){HOME_ACQ_R, o->a, 1, 0};
                   prog[x][m++] = (step_t){HOME_REL, o->a, 0, 0}; break;
        case OP_W: prog[x][m++] = (step_t){HOME_ACQ_W, o->a, 1, 0};
                   prog[x][m++] = (step_t){HOME_REL_DIRTY, o->a, 0, 0}; break;
        case OP_C: prog[x][m++] = (step_t){HOME_ACQ_W, o->a, 1, 0};
                   prog[x][m++] = (step_t){HOME_REL, o->a, 0, 0}; break;
        case OP_N: prog[x][m++] = (step_t){HOME_WAIT_NEWER, o->a, 1, 0}; break;
        case OP_P: prog[x][m++] = (step_t){HOME_ACQ_W, o->a, 1, 0};
                   prog[x][m++] = (step_t){HOME_ACQ_W, o->b, 1, -1};   /* EDEADLK allowed */
                   prog[x][m++] = (step_t){HOME_REL_DIRTY, o->b, 0, 0};
                   prog[x][m++] = (step_t){HOME_REL_DIRTY, o->a, 0, 0}; break;
        case OP_D: prog[x][m++] = (step_t){HOME_ACQ_R, o->a, 1, 0};
                   prog[x][m++] = (step_t){HOME_ACQ_R, o->a, 1, SDSM_EHELD};
                   prog[x][m++] = (step_t){HOME_REL, o->a, 0, 0}; break;
        }
    }
    prog[x][m++] = (step_t){HOME_BYE, 0, 1, 0};
    proglen[x] = m;
}

/* Skip steps that release a chunk the client never got (after EDEADLK). */
static void skip_dead(client_t *c, int x)
{
    while (c->pc < proglen[x]) {
        const step_t *st = &prog[x][c->pc];
        if ((st->send == HOME_REL || st->send == HOME_REL_DIRTY) && c->held[st->chunk] == HOLD_NONE)
            c->pc++;
        else
            break;
    }
}

static void check_exclusion(const world_t *w)
{
    for (int k = 0; k < NCHUNK; k++) {
        int r = 0, wr = 0;
        for (int x = 0; x < nclients; x++) {
            r += w->cl[x].held[k] == HOLD_R;
            wr += w->cl[x].held[k] == HOLD_W;
        }
        if (wr > 1 || (wr && r))
            violation("two clients hold a chunk against single writer / readers", NULL, -1);
    }
}

/* A client acts: takes its reply, or sends its next message. */
static void client_act(world_t *w, int x)
{
    client_t *c = &w->cl[x];
    if (c->waiting) {
        const step_t *st = &prog[x][c->pc];
        const home_out_t *r = &c->reply;
        c->has_reply = 0;
        c->waiting = 0;
        if (st->send == HOME_BYE) {
            if (r->op != HOME_BYE_ACK || r->error != SDSM_OK)
                violation("bye answered wrongly", NULL, x);
            c->done = 1;
            c->pc++;
            return;
        }
        if (r->op == HOME_ERROR) {
            if (st->expect_err == -1 && r->error == SDSM_EDEADLK)
                deadlocks_reported++;
            else if (r->error != st->expect_err)
                violation("unexpected error reply", sdsm_strerror(r->error), x);
            c->pc++;
            skip_dead(c, x);
            return;
        }
        if (st->expect_err > 0)
            violation("an error was expected, a reply came", NULL, x);
        if (st->send == HOME_WAIT_NEWER) {
            if (r->op != HOME_NOTIFY || r->version <= c->known[st->chunk])
                violation("notification not newer than known", NULL, x);
            c->known[st->chunk] = r->version;
        } else {
            int want = st->send == HOME_ACQ_W ? HOME_GRANT_W : HOME_GRANT_R;
            if (r->op != want)
                violation("wrong grant kind", NULL, x);
            c->held[st->chunk] = st->send == HOME_ACQ_W ? HOLD_W : HOLD_R;
            c->have[st->chunk] = r->version;
            if (r->version > c->known[st->chunk])
                c->known[st->chunk] = r->version;
            check_exclusion(w);
        }
        c->pc++;
        return;
    }
    const step_t *st = &prog[x][c->pc];
    if (c->nchan >= CHAN) {
        violation("channel overflow", NULL, x);
        return;
    }
    msg_t m = {st->send, (uint32_t)st->chunk, 0};
    if (st->send == HOME_ACQ_R || st->send == HOME_ACQ_W)
        m.version = c->have[st->chunk];
    else if (st->send == HOME_WAIT_NEWER)
        m.version = c->known[st->chunk];
    c->chan[c->nchan++] = m;
    if (st->send == HOME_REL || st->send == HOME_REL_DIRTY) {
        if (st->send == HOME_REL_DIRTY) {
            c->have[st->chunk]++;
            c->known[st->chunk] = c->have[st->chunk];
        }
        c->held[st->chunk] = HOLD_NONE;
        c->pc++;
        skip_dead(c, x);
    } else {
        c->waiting = 1;
    }
}

/* The home takes the first message of client x's channel. */
static void home_take(home_t *h, world_t *w, int x, home_out_t *out)
{
    client_t *c = &w->cl[x];
    msg_t m = c->chan[0];
    memmove(c->chan, c->chan + 1, sizeof m * --c->nchan);
    if (m.op == HOME_ACQ_R || m.op == HOME_ACQ_W)
        c->ticket = w->next_ticket[m.chunk]++;
    home_in_t in = {m.op, x, m.chunk, m.version, 0};
    int n = home_step(h, &in, out);
    if (n < 0) {
        violation("home rejected a message", sdsm_strerror(-n), x);
        return;
    }
    if (m.op == HOME_REL_DIRTY)
        w->version[m.chunk]++;
    char why[200];
    if (home_check(h, why, sizeof why))
        violation("home invariant", why, x);
    for (int i = 0; i < n; i++) {
        client_t *d = &w->cl[out[i].client];
        if (!d->waiting || d->has_reply) {
            violation("reply without an outstanding request", NULL, out[i].client);
            continue;
        }
        if (out[i].op == HOME_GRANT_R || out[i].op == HOME_GRANT_W) {
            uint32_t k = out[i].chunk;
            if (out[i].version != w->version[k])
                violation("grant does not carry the latest version", NULL, out[i].client);
            if (out[i].with_data != (d->have[k] != out[i].version))
                violation("grant data flag disagrees with the client's copy", NULL, out[i].client);
            /* FIFO: nobody queued earlier on this chunk is still waiting */
            for (int y = 0; y < nclients; y++)
                if (y != out[i].client && (h->pend_op[y] == HOME_ACQ_R || h->pend_op[y] == HOME_ACQ_W) &&
                    h->pend_chunk[y] == k && w->cl[y].ticket < d->ticket)
                    violation("grant out of arrival order", NULL, out[i].client);
        }
        d->reply = out[i];
        d->has_reply = 1;
    }
}

static void explore(int depth, const world_t *w)
{
    if (violations)
        return;
    home_t *h = &levels[depth];
    uint64_t a, b;
    hash_state(h, w, &a, &b);
    if (!memo_insert(a, b))
        return;
    states++;
    if (depth + 1 >= nlevels) {
        violation("exploration deeper than expected", NULL, -1);
        return;
    }
    home_out_t out[2 * MAXC + 1];
    int moved = 0;
    for (int x = 0; x < nclients; x++) {
        const client_t *c = &w->cl[x];
        if (!c->done && ((c->waiting && c->has_reply) || (!c->waiting && c->pc < proglen[x]))) {
            world_t next = *w;
            home_copy(&levels[depth + 1], h);
            client_act(&next, x);
            transitions++;
            moved = 1;
            explore(depth + 1, &next);
        }
        if (c->nchan) {
            world_t next = *w;
            home_copy(&levels[depth + 1], h);
            home_take(&levels[depth + 1], &next, x, out);
            transitions++;
            moved = 1;
            explore(depth + 1, &next);
        }
    }
    if (moved)
        return;
    finals++;
    /* final state: everyone done, or parked on a wait nobody can satisfy */
    for (int x = 0; x < nclients; x++) {
        const client_t *c = &w->cl[x];
        if (c->done)
            continue;
        if (c->waiting && prog[x][c->pc].send == HOME_WAIT_NEWER && h->pend_op[x] == HOME_WAIT_NEWER)
            stuck_waits++;
        else
            violation("client stuck without an error", NULL, x);
    }
    if (!home_quiescent(h)) {
        int only_waiters = 1;
        for (uint32_t k = 0; k < h->nchunks; k++) {
            const home_chunk_t *c = &h->chunks[k];
            if (c->owner != HOME_NONE || c->nreaders || c->qhead != HOME_NONE)
                only_waiters = 0;
        }
        if (!only_waiters)
            violation("final state holds or queues a chunk", NULL, -1);
    }
}

static int parse_op(const char *t, op_t *o)
{
    const char *kinds = "RWCNPD";
    const char *k = strchr(kinds, t[0]);
    if (!k || !t[0] || t[1] < '0' || t[1] > '1')
        return -1;
    o->kind = (int)(k - kinds);
    o->a = t[1] - '0';
    o->b = 1 - o->a;
    if (o->kind == OP_P) {
        if (t[2] < '0' || t[2] > '1' || t[2] == t[1] || t[3])
            return -1;
        o->b = t[2] - '0';
    } else if (t[2]) {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *alpha = "R0,R1,W0,W1,C0,N0,P01,P10,D0";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--clients") && i + 1 < argc)
            nclients = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
            nops = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--alphabet") && i + 1 < argc)
            alpha = argv[++i];
        else {
            fprintf(stderr, "usage: shoal-sdsmcheck [--clients 1-%d] [--ops 1-%d] [--alphabet R0,W1,...]\n",
                    MAXC, MAXOPS);
            return 2;
        }
    }
    if (nclients < 1 || nclients > MAXC || nops < 1 || nops > MAXOPS) {
        fprintf(stderr, "shoal-sdsmcheck: --clients must be 1-%d and --ops 1-%d\n", MAXC, MAXOPS);
        return 2;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", alpha);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (nalpha == 16 || parse_op(t, &alphabet[nalpha++])) {
            fprintf(stderr, "shoal-sdsmcheck: bad operation '%s' (use Rk Wk Ck Nk Dk Pab, k in 0-1)\n", t);
            return 2;
        }
    }
    /* scripts are numbered 0..nalpha^nops-1; clients take non-decreasing
     * numbers (clients are symmetric, so other orders repeat the same runs) */
    int nscripts = 1;
    for (int i = 0; i < nops; i++)
        nscripts *= nalpha;
    nlevels = nclients * (MAXOPS * 6 + 2) * 3 + 8;
    levels = calloc(nlevels, sizeof *levels);
    for (int d = 0; d < nlevels; d++) {
        home_init(&levels[d], nclients, nclients);
        home_add_chunks(&levels[d], NCHUNK, NULL);
    }
    int pick[MAXC] = {0};
    uint64_t combos = 0;
    for (;;) {
        for (int x = 0; x < nclients; x++) {
            op_t ops[MAXOPS];
            for (int i = 0, s = pick[x]; i < nops; i++, s /= nalpha)
                ops[i] = alphabet[s % nalpha];
            compile(x, ops, nops);
        }
        home_t fresh;
        home_init(&fresh, nclients, nclients);
        home_add_chunks(&fresh, NCHUNK, NULL);
        home_copy(&levels[0], &fresh);
        home_free(&fresh);
        world_t w;
        memset(&w, 0, sizeof w);
        memo_reset();
        explore(0, &w);
        combos++;
        if (violations)
            break;
        int x = nclients - 1;
        while (x >= 0 && pick[x] == nscripts - 1)
            x--;
        if (x < 0)
            break;
        pick[x]++;
        for (int y = x + 1; y < nclients; y++)
            pick[y] = pick[x];
    }
    printf("{\"clients\": %d, \"ops\": %d, \"chunks\": %d, \"alphabet\": \"%s\", "
           "\"script_sets\": %llu, \"states\": %llu, \"transitions\": %llu, \"final_states\": %llu, "
           "\"deadlocks_reported\": %llu, \"parked_unsatisfiable\": %llu, \"violations\": %llu",
           nclients, nops, NCHUNK, alpha, (unsigned long long)combos, (unsigned long long)states,
           (unsigned long long)transitions, (unsigned long long)finals,
           (unsigned long long)deadlocks_reported, (unsigned long long)stuck_waits,
           (unsigned long long)violations);
    if (violations)
        printf(", \"first_violation\": \"%s\"", first_violation);
    printf("}\n");
    return violations ? 1 : 0;
}
