/* MPI_Alltoall in the blocking call's shape where the MPI's nonblocking form
 * would post every block at once.
 *
 * Open MPI's coll/tuned runs a blocking MPI_Alltoall of small blocks by
 * Bruck's algorithm (log2 p steps, each one message to rank+k carrying every
 * block whose index has bit k) and of large blocks pairwise (step s: send to
 * rank+s, receive from rank-s, both done before the next step), while libnbc's
 * MPI_Ialltoall posts all p-1 sends and receives at once at every size. On a
 * shared cable plant of 128 boxes that is 127 connections per box filling one
 * modem buffer instead of one, and 8128 connections opened by the first call
 * instead of 832. Here either exchange is a schedule that the wait loop's
 * tests advance, so the rank still sleeps between steps. Its messages travel
 * on a duplicate of the communicator (made once, kept as an attribute of it;
 * MPI_COMM_WORLD's in MPI_Init), where no receive of the program's own can match
 * them. */
#define _GNU_SOURCE
#include "shoalwait.h"
#include "wrap.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int64_t sw_alltoall_pairwise_calls, sw_alltoall_bruck_calls;
int64_t sw_alltoall_comms_made; /* private communicators made */
int sw_alltoall_world_in_init;  /* MPI_COMM_WORLD's was made in MPI_Init */

#ifdef OPEN_MPI
/* Where Open MPI 5.0's coll/tuned fixed rules pick Bruck's or the pairwise
 * exchange for a blocking MPI_Alltoall (coll_tuned_decision_fixed.c, v5.0.10):
 * ranks in [lo, hi) and bytes per block in [from, below). Two ranks are left
 * out: one exchange whatever the algorithm. */
static const struct { int lo, hi; int64_t from, below; enum sw_alltoall shape; } tuned[] = {
    {3, 8, 524288, 1048576, SW_A2A_PAIRWISE},
    {16, 32, 4, 512, SW_A2A_BRUCK},
    {32, 64, 0, 512, SW_A2A_BRUCK},
    {64, 512, 0, 1024, SW_A2A_BRUCK},
    {64, 256, 262144, INT64_MAX, SW_A2A_PAIRWISE},
    {256, 512, 32768, INT64_MAX, SW_A2A_PAIRWISE},
    {512, 2048, 0, 512, SW_A2A_BRUCK},
    {512, 1024, 262144, INT64_MAX, SW_A2A_PAIRWISE},
    {2048, 4096, 0, 1024, SW_A2A_BRUCK},
    {4096, INT32_MAX, 0, 2048, SW_A2A_BRUCK},
};
#endif

/* SW_A2A_MPI, SW_A2A_PAIRWISE or SW_A2A_BRUCK by the MPI's own blocking rules. */
static enum sw_alltoall by_default(int ranks, int64_t block_B)
{
#ifdef OPEN_MPI
    for (size_t i = 0; i < sizeof tuned / sizeof tuned[0]; i++)
        if (ranks >= tuned[i].lo && ranks < tuned[i].hi && block_B >= tuned[i].from &&
            block_B < tuned[i].below)
            return tuned[i].shape;
#endif
    /* MPICH's nonblocking form runs Bruck's up to 2 KiB blocks and pairwise above
     * 32 KiB, as its blocking one does at the ends of that range. */
    (void)ranks;
    (void)block_B;
    return SW_A2A_MPI;
}

enum sw_alltoall sw_alltoall_shape(const void *sbuf, int scount, MPI_Datatype stype,
                                   MPI_Comm comm)
{
    if (sw_cfg.alltoall == SW_A2A_MPI || sbuf == MPI_IN_PLACE)
        return SW_A2A_MPI;
    int inter = 0, ranks = 0, type_B = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
        PMPI_Comm_size(comm, &ranks) != MPI_SUCCESS ||
        PMPI_Type_size(stype, &type_B) != MPI_SUCCESS)
        return SW_A2A_MPI;
    int64_t block_B = (int64_t)scount * type_B;
    enum sw_alltoall shape = sw_cfg.alltoall == SW_A2A_AUTO ? by_default(ranks, block_B)
                                                              : sw_cfg.alltoall;
    /* Bruck's buffers are counted in ints. */
    if (shape == SW_A2A_BRUCK && ranks * block_B > INT32_MAX)
        return SW_A2A_MPI;
    return shape;
}

/* ---- the private communicator, one per communicator used ---------------- */

static int dup_key = MPI_KEYVAL_INVALID;
static pthread_once_t dup_key_once = PTHREAD_ONCE_INIT;

static int free_dup(MPI_Comm comm, int key, void *value, void *extra)
{
    MPI_Comm *dup = value;
    int rc = PMPI_Comm_free(dup);
    free(dup);
    return rc;
}

static void make_dup_key(void)
{
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_dup, &dup_key, NULL);
}

/* Collective over comm the first time (every rank takes this path for the
 * same call: the shape depends only on the ranks and the block's bytes). */
static int private_comm(MPI_Comm comm, MPI_Comm *out)
{
    pthread_once(&dup_key_once, make_dup_key);
    if (dup_key == MPI_KEYVAL_INVALID)
        return MPI_ERR_KEYVAL;
    MPI_Comm *dup;
    int found = 0;
    int rc = PMPI_Comm_get_attr(comm, dup_key, &dup, &found);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!found) {
        dup = malloc(sizeof *dup);
        if (!dup)
            return MPI_ERR_NO_MEM;
        if ((rc = PMPI_Comm_dup(comm, dup)) != MPI_SUCCESS ||
            (rc = PMPI_Comm_set_attr(comm, dup_key, dup)) != MPI_SUCCESS) {
            free(dup);
            return rc;
        }
        __atomic_fetch_add(&sw_alltoall_comms_made, 1, __ATOMIC_RELAXED);
    }
    *out = *dup;
    return MPI_SUCCESS;
}

/* Whether the MPI's blocking rules choose a shape of libshoalwait's own for
 * some block size on `ranks` ranks (a row of tuned's table covers them). */
static int has_own_shape(int ranks)
{
#ifdef OPEN_MPI
    for (size_t i = 0; i < sizeof tuned / sizeof tuned[0]; i++)
        if (ranks >= tuned[i].lo && ranks < tuned[i].hi)
            return 1;
#endif
    (void)ranks;
    return 0;
}

/* MPI_COMM_WORLD's private communicator is made in MPI_Init rather than by the
 * first Alltoall, whose time it would otherwise hold: Open MPI agrees on a new
 * communicator's id in rounds of allreduces, seconds on a 128-box cable plant.
 * Only where an Alltoall on the world can take a shape of libshoalwait's own:
 * one asked for by SHOAL_WAIT_ALLTOALL, or the MPI's rules for its size. */
int sw_alltoall_prepare(void)
{
    if (!sw_active(F_ALLTOALL) || sw_cfg.alltoall == SW_A2A_MPI)
        return MPI_SUCCESS;
    int ranks = 0;
    if (PMPI_Comm_size(MPI_COMM_WORLD, &ranks) != MPI_SUCCESS)
        return MPI_SUCCESS;
    if (sw_cfg.alltoall == SW_A2A_AUTO && !has_own_shape(ranks))
        return MPI_SUCCESS;
    MPI_Comm made;
    int rc = private_comm(MPI_COMM_WORLD, &made);
    sw_alltoall_world_in_init = rc == MPI_SUCCESS;
    return rc;
}

/* ---- the schedules -------------------------------------------------------- */

#define TAG 1

struct exchange {
    const char *sbuf;
    char *rbuf;
    int scount, rcount;
    MPI_Datatype stype, rtype;
    MPI_Aint sext, rext;
    MPI_Comm comm;
    int rank, size;
    int step;               /* pairwise: 1..size; Bruck: the bit, 1, 2, 4, ... */
    MPI_Request req[2];     /* this step's receive and send */
    int (*next)(struct exchange *x, int *done);   /* once both are done */
    /* Bruck: every block packed, in rotated order (slot i: the block for
     * rank+i, and at the end the block from rank-i), and one step's blocks. */
    char *slots, *out, *in;
    int64_t block_B, moved;
};

/* Pairwise step s (1..size; the last is the rank's own block). */
static int pairwise_post(struct exchange *x)
{
    int to = (x->rank + x->step) % x->size;
    int from = (x->rank - x->step % x->size + x->size) % x->size;
    int rc = PMPI_Irecv(x->rbuf + (MPI_Aint)from * x->rcount * x->rext, x->rcount, x->rtype,
                        from, TAG, x->comm, &x->req[0]);
    if (rc != MPI_SUCCESS)
        return rc;
    return PMPI_Isend(x->sbuf + (MPI_Aint)to * x->scount * x->sext, x->scount, x->stype, to,
                      TAG, x->comm, &x->req[1]);
}

/* After a pairwise step: the next one, or done. */
static int pairwise_next(struct exchange *x, int *done)
{
    if (x->step == x->size) {
        *done = 1;
        return MPI_SUCCESS;
    }
    x->step++;
    return pairwise_post(x);
}

/* Bruck step k: the slots whose index has bit k go to rank+k, the same slots of
 * rank-k come back in their place. */
static int bruck_post(struct exchange *x)
{
    x->moved = 0;
    for (int i = 1; i < x->size; i++)
        if (i & x->step)
            memcpy(x->out + x->moved++ * x->block_B, x->slots + i * x->block_B, x->block_B);
    int to = (x->rank + x->step) % x->size, from = (x->rank - x->step + x->size) % x->size;
    int rc = PMPI_Irecv(x->in, (int)(x->moved * x->block_B), MPI_BYTE, from, TAG, x->comm,
                        &x->req[0]);
    if (rc != MPI_SUCCESS)
        return rc;
    return PMPI_Isend(x->out, (int)(x->moved * x->block_B), MPI_BYTE, to, TAG, x->comm,
                      &x->req[1]);
}

/* The last rotation: slot i holds the block from rank-i. */
static int bruck_unpack(struct exchange *x)
{
    for (int i = 0; i < x->size; i++) {
        int from = (x->rank - i + x->size) % x->size, pos = 0;
        int rc = PMPI_Unpack(x->slots + i * x->block_B, (int)x->block_B, &pos,
                             x->rbuf + (MPI_Aint)from * x->rcount * x->rext, x->rcount,
                             x->rtype, x->comm);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* After a Bruck step: its blocks in their slots, then the next step, or the end. */
static int bruck_next(struct exchange *x, int *done)
{
    int64_t back = 0;
    for (int i = 1; i < x->size; i++)
        if (i & x->step)
            memcpy(x->slots + i * x->block_B, x->in + back++ * x->block_B, x->block_B);
    x->step <<= 1;
    if (x->step < x->size)
        return bruck_post(x);
    *done = 1;
    return bruck_unpack(x);
}

/* The first rotation: slot i holds the block for rank+i, packed. */
static int bruck_start(struct exchange *x)
{
    int type_B = 0, rc = PMPI_Type_size(x->stype, &type_B);
    if (rc != MPI_SUCCESS)
        return rc;
    x->block_B = (int64_t)x->scount * type_B;
    int64_t half = (x->size / 2 + 1) * x->block_B;
    x->slots = malloc(x->size * x->block_B + 1);
    x->out = malloc(half + 1);
    x->in = malloc(half + 1);
    if (!x->slots || !x->out || !x->in)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < x->size; i++) {
        int to = (x->rank + i) % x->size, pos = 0;
        rc = PMPI_Pack(x->sbuf + (MPI_Aint)to * x->scount * x->sext, x->scount, x->stype,
                       x->slots + i * x->block_B, (int)x->block_B, &pos, x->comm);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    x->step = 1;
    return x->size == 1 ? MPI_SUCCESS : bruck_post(x);   /* one rank: nothing to exchange */
}

/* The wait loop's test: the step's two requests, then the schedule moves on. */
static int step_test(void *ctx, int *done)
{
    struct exchange *x = ctx;
    int flag = 0;
    *done = 0;
    int rc = PMPI_Testall(2, x->req, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || !flag)
        return rc;
    return x->next(x, done);
}

int sw_alltoall(const void *site, enum sw_alltoall shape, const void *sbuf, int scount,
                MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    struct exchange x = {.sbuf = sbuf, .rbuf = rbuf, .scount = scount, .rcount = rcount,
                         .stype = stype, .rtype = rtype, .step = 1,
                         .req = {MPI_REQUEST_NULL, MPI_REQUEST_NULL}};
    MPI_Aint lb;
    int rc;
    if ((rc = PMPI_Type_get_extent(stype, &lb, &x.sext)) != MPI_SUCCESS ||
        (rc = PMPI_Type_get_extent(rtype, &lb, &x.rext)) != MPI_SUCCESS ||
        (rc = private_comm(comm, &x.comm)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_rank(x.comm, &x.rank)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_size(x.comm, &x.size)) != MPI_SUCCESS)
        return rc;
    if (shape == SW_A2A_PAIRWISE) {
        if ((rc = pairwise_post(&x)) != MPI_SUCCESS)
            return rc;
        __atomic_fetch_add(&sw_alltoall_pairwise_calls, 1, __ATOMIC_RELAXED);
        x.next = pairwise_next;
        return sw_wait(F_ALLTOALL, site, step_test, &x);
    }
    __atomic_fetch_add(&sw_alltoall_bruck_calls, 1, __ATOMIC_RELAXED);
    x.next = bruck_next;
    if ((rc = bruck_start(&x)) == MPI_SUCCESS)
        rc = x.size == 1 ? bruck_unpack(&x) : sw_wait(F_ALLTOALL, site, step_test, &x);
    free(x.slots);
    free(x.out);
    free(x.in);
    return rc;
}
