/* The home of a set of chunks: a pure state machine (no MPI, no clock, no I/O).
 *
 * The transport (sdsm.c) feeds it one decoded request at a time and sends the
 * replies it returns; the explorer (sdsmcheck) feeds it every arrival order.
 * Keeping it pure is what makes exhaustive checking possible.
 *
 * Protocol (home-based MESI at chunk granularity, single writer / readers):
 *   ACQ_R(k, v_have)   granted when no writer holds k and nobody is queued
 *   ACQ_W(k, v_have)   granted when nobody holds k and nobody is queued
 *                      otherwise queued FIFO; a grant carries the chunk's
 *                      version and its data when v_have differs
 *   REL(k) / REL_DIRTY(k)   drop the hold (a dirty release stores the data
 *                      and bumps the version, answering parked waiters),
 *                      then grant the queue's head: every leading reader,
 *                      or one writer. No reply.
 *   WAIT_NEWER(k, v0)  answered (NOTIFY) as soon as the version exceeds v0
 *   BYE                the client leaves; answered with BYE_ACK
 * Each client has at most one request outstanding; that bounds the queues
 * and makes a deadlock check at enqueue a short walk. */
#ifndef SDSM_HOME_H
#define SDSM_HOME_H

#include <stdint.h>

enum { HOME_ACQ_R = 1, HOME_ACQ_W, HOME_REL, HOME_REL_DIRTY, HOME_WAIT_NEWER, HOME_BYE };
enum { HOME_GRANT_R = 1, HOME_GRANT_W, HOME_NOTIFY, HOME_ERROR, HOME_BYE_ACK };
enum { HOLD_NONE = 0, HOLD_R = 1, HOLD_W = 2 };
#define HOME_NONE (-1)

typedef struct {
    int op, client;
    uint32_t chunk;       /* index into this home's chunk table */
    uint64_t version;     /* ACQ_*: version the client has; WAIT_NEWER: version known */
    double now;           /* caller's clock, kept only for the watchdog's ages */
} home_in_t;

typedef struct {
    int op, client;
    uint32_t chunk;
    uint64_t version;
    int with_data;        /* grant: the client's copy is stale, send the chunk */
    int error;            /* HOME_ERROR / HOME_BYE_ACK: an SDSM_E* code */
} home_out_t;

typedef struct {
    uint64_t version;
    int owner;            /* writing client or HOME_NONE */
    int nreaders;
    int qhead, qtail;     /* FIFO of queued acquires, linked through next[] */
    int whead;            /* parked WAIT_NEWER clients, linked through next[] */
    int homed;            /* 1 when this home serves the chunk */
} home_chunk_t;

typedef struct {
    int nclients;         /* clients are numbered 0..nclients-1 (ranks) */
    uint32_t nchunks, cap;
    home_chunk_t *chunks;
    uint8_t *hold;        /* nchunks x nclients: HOLD_* */
    /* per client: its outstanding request at this home (one at most) */
    int *next, *pend_op, *nheld, *gone;
    uint32_t *pend_chunk;
    uint64_t *pend_ver;
    double *pend_since;
    int alive;            /* clients that have not said BYE */
    uint64_t protocol_errors;
} home_t;

int  home_init(home_t *h, int nclients, int alive);
void home_free(home_t *h);
/* Append n chunks (served here when homed); returns the index of the first. */
int64_t home_add_chunks(home_t *h, uint32_t n, const uint8_t *homed);
/* Process one request; writes at most home_max_out(h) replies into out and
 * returns how many, or a negative SDSM_E* code for a request that has no
 * reply and breaks the protocol (a release of a chunk not held). */
int  home_step(home_t *h, const home_in_t *in, home_out_t *out);
int  home_max_out(const home_t *h);
/* Nothing held, queued or parked at this home. */
int  home_quiescent(const home_t *h);
/* Check every structural invariant; returns 0 or writes why into why. */
int  home_check(const home_t *h, char *why, int len);
static inline uint8_t home_hold(const home_t *h, uint32_t k, int c)
{
    return h->hold[(uint64_t)k * (uint64_t)h->nclients + (uint64_t)c];
}

#endif
