/* The home state machine (see home.h). Pure: inputs in, replies out. */
#include "home.h"
#include "sdsm_errno.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDLE 0
#define PARKED HOME_WAIT_NEWER

int home_init(home_t *h, int nclients, int alive)
{
    memset(h, 0, sizeof *h);
    h->nclients = nclients;
    h->alive = alive;
    h->next = malloc(sizeof(int) * nclients);
    h->pend_op = calloc(nclients, sizeof(int));
    h->nheld = calloc(nclients, sizeof(int));
    h->gone = calloc(nclients, sizeof(int));
    h->pend_chunk = calloc(nclients, sizeof(uint32_t));
    h->pend_ver = calloc(nclients, sizeof(uint64_t));
    h->pend_since = calloc(nclients, sizeof(double));
    if (!h->next || !h->pend_op || !h->nheld || !h->gone || !h->pend_chunk || !h->pend_ver ||
        !h->pend_since) {
        home_free(h);
        return SDSM_ENOMEM;
    }
    for (int c = 0; c < nclients; c++)
        h->next[c] = HOME_NONE;
    return SDSM_OK;
}

void home_free(home_t *h)
{
    free(h->chunks); free(h->hold); free(h->next); free(h->pend_op); free(h->nheld);
    free(h->gone); free(h->pend_chunk); free(h->pend_ver); free(h->pend_since);
    memset(h, 0, sizeof *h);
}

int64_t home_add_chunks(home_t *h, uint32_t n, const uint8_t *homed)
{
    uint64_t want = (uint64_t)h->nchunks + n;
    if (want > UINT32_MAX)
        return -SDSM_EINVAL;
    if (want > h->cap) {
        uint64_t cap = h->cap ? h->cap : 16;
        while (cap < want)
            cap *= 2;
        home_chunk_t *c = realloc(h->chunks, cap * sizeof *c);
        if (!c)
            return -SDSM_ENOMEM;
        h->chunks = c;
        uint8_t *hold = realloc(h->hold, cap * (uint64_t)h->nclients);
        if (!hold)
            return -SDSM_ENOMEM;
        h->hold = hold;
        h->cap = (uint32_t)cap;
    }
    uint32_t first = h->nchunks;
    for (uint32_t i = 0; i < n; i++) {
        home_chunk_t *c = &h->chunks[first + i];
        memset(c, 0, sizeof *c);
        c->owner = c->qhead = c->qtail = c->whead = HOME_NONE;
        c->homed = homed ? homed[i] : 1;
    }
    memset(h->hold + (uint64_t)first * h->nclients, 0, (uint64_t)n * h->nclients);
    h->nchunks = (uint32_t)want;
    return first;
}

int home_max_out(const home_t *h)
{
    /* a dirty release: every parked waiter plus every queued reader */
    return 2 * h->nclients + 1;
}

static uint8_t *hold_at(home_t *h, uint32_t k, int c)
{
    return &h->hold[(uint64_t)k * h->nclients + c];
}

static void reply(home_out_t *out, int *n, int op, int client, uint32_t k, uint64_t v,
                  int with_data, int error)
{
    out[*n] = (home_out_t){op, client, k, v, with_data, error};
    (*n)++;
}

static int grantable(const home_chunk_t *c, int op)
{
#ifdef SDSM_HOME_MUTANT
    /* a deliberately broken home, built only by the tests to show that the
     * explorer catches a writer granted beside readers */
    return c->owner == HOME_NONE;
#endif
    return op == HOME_ACQ_R ? c->owner == HOME_NONE : c->owner == HOME_NONE && c->nreaders == 0;
}

static void grant(home_t *h, uint32_t k, int client, int op, uint64_t v_have,
                  home_out_t *out, int *n)
{
    home_chunk_t *c = &h->chunks[k];
    if (op == HOME_ACQ_W) {
        c->owner = client;
        *hold_at(h, k, client) = HOLD_W;
    } else {
        c->nreaders++;
        *hold_at(h, k, client) = HOLD_R;
    }
    h->nheld[client]++;
    h->pend_op[client] = IDLE;
    reply(out, n, op == HOME_ACQ_W ? HOME_GRANT_W : HOME_GRANT_R, client, k, c->version,
          v_have != c->version, SDSM_OK);
}

/* Does `from` (transitively) wait for `target`? A queued client waits for the
 * chunk's holders and for everyone queued ahead of it. Each client has one
 * request at most, so the walk visits each client once. */
static int waits_for(home_t *h, int from, int target, uint8_t *seen)
{
    if (from == target)
        return 1;
    if (seen[from] || (h->pend_op[from] != HOME_ACQ_R && h->pend_op[from] != HOME_ACQ_W))
        return 0;
    seen[from] = 1;
    uint32_t k = h->pend_chunk[from];
    for (int x = 0; x < h->nclients; x++)
        if (x != from && home_hold(h, k, x) != HOLD_NONE && waits_for(h, x, target, seen))
            return 1;
    for (int x = h->chunks[k].qhead; x != from && x != HOME_NONE; x = h->next[x])
        if (waits_for(h, x, target, seen))
            return 1;
    return 0;
}

static int would_deadlock(home_t *h, uint32_t k, int client)
{
    uint8_t seen_small[256], *seen = h->nclients <= 256 ? seen_small : calloc(h->nclients, 1);
    if (!seen)
        return 0;
    memset(seen, 0, h->nclients <= 256 ? (size_t)h->nclients : 0);
    int found = 0;
    for (int x = 0; x < h->nclients && !found; x++)
        if (home_hold(h, k, x) != HOLD_NONE)
            found = waits_for(h, x, client, seen);
    for (int x = h->chunks[k].qhead; x != HOME_NONE && !found; x = h->next[x])
        found = waits_for(h, x, client, seen);
    if (seen != seen_small)
        free(seen);
    return found;
}

static void drain_queue(home_t *h, uint32_t k, home_out_t *out, int *n)
{
    home_chunk_t *c = &h->chunks[k];
    while (c->qhead != HOME_NONE) {
        int x = c->qhead, op = h->pend_op[x];
        if (!grantable(c, op))
            break;
        c->qhead = h->next[x];
        if (c->qhead == HOME_NONE)
            c->qtail = HOME_NONE;
        h->next[x] = HOME_NONE;
        grant(h, k, x, op, h->pend_ver[x], out, n);
        if (op == HOME_ACQ_W)
            break;
    }
}

static void release_hold(home_t *h, uint32_t k, int client)
{
    home_chunk_t *c = &h->chunks[k];
    uint8_t *held = hold_at(h, k, client);
    if (*held == HOLD_W)
        c->owner = HOME_NONE;
    else
        c->nreaders--;
    *held = HOLD_NONE;
    h->nheld[client]--;
}

static void notify_waiters(home_t *h, uint32_t k, home_out_t *out, int *n)
{
    home_chunk_t *c = &h->chunks[k];
    int *link = &c->whead;
    while (*link != HOME_NONE) {
        int x = *link;
        if (c->version > h->pend_ver[x]) {
            *link = h->next[x];
            h->next[x] = HOME_NONE;
            h->pend_op[x] = IDLE;
            reply(out, n, HOME_NOTIFY, x, k, c->version, 0, SDSM_OK);
        } else {
            link = &h->next[x];
        }
    }
}

int home_step(home_t *h, const home_in_t *in, home_out_t *out)
{
    int n = 0, x = in->client;
    uint32_t k = in->chunk;
    if (x < 0 || x >= h->nclients || h->gone[x]) {
        h->protocol_errors++;
        return -SDSM_EPROTO;
    }
    if (in->op != HOME_BYE && (k >= h->nchunks || !h->chunks[k].homed)) {
        h->protocol_errors++;
        if (in->op == HOME_REL || in->op == HOME_REL_DIRTY)
            return -SDSM_EPROTO;
        reply(out, &n, HOME_ERROR, x, k, 0, 0, SDSM_EINVAL);
        return n;
    }
    int is_request = in->op != HOME_REL && in->op != HOME_REL_DIRTY;
    if (is_request && h->pend_op[x] != IDLE) {
        /* a second outstanding request: the client library never sends one */
        h->protocol_errors++;
        return -SDSM_EPROTO;
    }
    home_chunk_t *c = k < h->nchunks ? &h->chunks[k] : NULL;
    switch (in->op) {
    case HOME_ACQ_R:
    case HOME_ACQ_W:
        if (home_hold(h, k, x) != HOLD_NONE) {
            reply(out, &n, HOME_ERROR, x, k, c->version, 0, SDSM_EHELD);
            break;
        }
        if (grantable(c, in->op) && c->qhead == HOME_NONE) {
            grant(h, k, x, in->op, in->version, out, &n);
            break;
        }
        h->pend_op[x] = in->op;
        h->pend_chunk[x] = k;
        h->pend_ver[x] = in->version;
        h->pend_since[x] = in->now;
        if (would_deadlock(h, k, x)) {
            h->pend_op[x] = IDLE;
            reply(out, &n, HOME_ERROR, x, k, c->version, 0, SDSM_EDEADLK);
            break;
        }
        h->next[x] = HOME_NONE;
        if (c->qtail == HOME_NONE)
            c->qhead = x;
        else
            h->next[c->qtail] = x;
        c->qtail = x;
        break;
    case HOME_REL:
    case HOME_REL_DIRTY:
        if (home_hold(h, k, x) == HOLD_NONE ||
            (in->op == HOME_REL_DIRTY && home_hold(h, k, x) != HOLD_W)) {
            h->protocol_errors++;
            return -SDSM_ENOTHELD;
        }
        release_hold(h, k, x);
        if (in->op == HOME_REL_DIRTY) {
            c->version++;
            notify_waiters(h, k, out, &n);
        }
        drain_queue(h, k, out, &n);
        break;
    case HOME_WAIT_NEWER:
        if (c->version > in->version) {
            reply(out, &n, HOME_NOTIFY, x, k, c->version, 0, SDSM_OK);
            break;
        }
        if (home_hold(h, k, x) == HOLD_W) {
            /* only its own release could make the chunk newer */
            reply(out, &n, HOME_ERROR, x, k, c->version, 0, SDSM_EDEADLK);
            break;
        }
        h->pend_op[x] = PARKED;
        h->pend_chunk[x] = k;
        h->pend_ver[x] = in->version;
        h->pend_since[x] = in->now;
        h->next[x] = c->whead;
        c->whead = x;
        break;
    case HOME_BYE: {
        /* a client leaving with holds releases them so nobody waits forever */
        int held = h->nheld[x] > 0;
        for (uint32_t j = 0; j < h->nchunks && h->nheld[x] > 0; j++)
            if (home_hold(h, j, x) != HOLD_NONE) {
                release_hold(h, j, x);
                drain_queue(h, j, out, &n);
            }
        h->gone[x] = 1;
        h->alive--;
        reply(out, &n, HOME_BYE_ACK, x, 0, 0, 0, held ? SDSM_EHELD : SDSM_OK);
        break;
    }
    default:
        h->protocol_errors++;
        return -SDSM_EPROTO;
    }
    return n;
}

int home_quiescent(const home_t *h)
{
    for (uint32_t k = 0; k < h->nchunks; k++) {
        const home_chunk_t *c = &h->chunks[k];
        if (c->owner != HOME_NONE || c->nreaders || c->qhead != HOME_NONE || c->whead != HOME_NONE)
            return 0;
    }
    return 1;
}

int home_check(const home_t *h, char *why, int len)
{
    int queued_total = 0;
    for (uint32_t k = 0; k < h->nchunks; k++) {
        const home_chunk_t *c = &h->chunks[k];
        int readers = 0, writers = 0;
        for (int x = 0; x < h->nclients; x++) {
            uint8_t s = home_hold(h, k, x);
            readers += s == HOLD_R;
            writers += s == HOLD_W;
            if (s == HOLD_W && c->owner != x) {
                snprintf(why, len, "chunk %u: client %d holds W but owner is %d", k, x, c->owner);
                return 1;
            }
        }
        if (writers > 1 || (writers && readers)) {
            snprintf(why, len, "chunk %u: %d writers and %d readers at once", k, writers, readers);
            return 1;
        }
        if (readers != c->nreaders || (c->owner != HOME_NONE) != (writers == 1)) {
            snprintf(why, len, "chunk %u: counts disagree (nreaders %d, holds %d)", k,
                     c->nreaders, readers);
            return 1;
        }
        if (c->qhead != HOME_NONE) {
            int head = c->qhead;
            if (grantable(c, h->pend_op[head])) {
                snprintf(why, len, "chunk %u: client %d queued although grantable", k, head);
                return 1;
            }
        }
        for (int x = c->qhead; x != HOME_NONE; x = h->next[x]) {
            if (++queued_total > h->nclients || h->pend_chunk[x] != k ||
                (h->pend_op[x] != HOME_ACQ_R && h->pend_op[x] != HOME_ACQ_W)) {
                snprintf(why, len, "chunk %u: queue corrupt at client %d", k, x);
                return 1;
            }
        }
        for (int x = c->whead; x != HOME_NONE; x = h->next[x]) {
            if (++queued_total > h->nclients || h->pend_op[x] != PARKED || h->pend_chunk[x] != k) {
                snprintf(why, len, "chunk %u: waiter list corrupt at client %d", k, x);
                return 1;
            }
            if (c->version > h->pend_ver[x]) {
                snprintf(why, len, "chunk %u: client %d parked for > v%llu while v%llu exists", k,
                         x, (unsigned long long)h->pend_ver[x], (unsigned long long)c->version);
                return 1;
            }
        }
    }
    return 0;
}
