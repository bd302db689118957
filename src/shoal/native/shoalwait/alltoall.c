/* MPI_Alltoall pairwise, as the blocking call runs it, where the MPI's
 * nonblocking form would post every block at once.
 *
 * Open MPI's coll/tuned runs a blocking MPI_Alltoall of large blocks pairwise
 * (step s: send to rank+s, receive from rank-s, both done before the next
 * step), while libnbc's MPI_Ialltoall posts all sends and receives at once at
 * every size. On a shared cable plant of 128 boxes the difference is 127
 * connections per box filling one modem buffer instead of one. Here the
 * pairwise exchange is a schedule that the wait loop's tests advance, so the
 * rank still sleeps between steps. Its messages travel on a duplicate of the
 * communicator (made once, kept as an attribute of it), where no receive of the
 * program's own can match them. */
#define _GNU_SOURCE
#include "shoalwait.h"
#include "wrap.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

int64_t sw_alltoall_pairwise_calls;

#ifdef OPEN_MPI
/* Where Open MPI 5.0's coll/tuned fixed rules pick pairwise for a blocking
 * MPI_Alltoall (coll_tuned_decision_fixed.c, v5.0.10): ranks in [lo, hi) and
 * bytes per block in [from, below). Two ranks are left out: one exchange
 * whatever the algorithm. */
static const struct { int lo, hi; int64_t from, below; } tuned_pairwise[] = {
    {3, 8, 524288, 1048576},
    {64, 256, 262144, INT64_MAX},
    {256, 512, 32768, INT64_MAX},
    {512, 1024, 262144, INT64_MAX},
};
#endif

static int pairwise_by_default(int ranks, int64_t block_B)
{
#ifdef OPEN_MPI
    for (size_t i = 0; i < sizeof tuned_pairwise / sizeof tuned_pairwise[0]; i++)
        if (ranks >= tuned_pairwise[i].lo && ranks < tuned_pairwise[i].hi &&
            block_B >= tuned_pairwise[i].from && block_B < tuned_pairwise[i].below)
            return 1;
#endif
    /* MPICH's nonblocking form goes pairwise above 32 KiB blocks, as its blocking one does. */
    (void)ranks;
    (void)block_B;
    return 0;
}

int sw_alltoall_goes_pairwise(const void *sbuf, int scount, MPI_Datatype stype, MPI_Comm comm)
{
    if (sw_cfg.alltoall == SW_A2A_MPI || sbuf == MPI_IN_PLACE)
        return 0;
    int inter = 0, ranks = 0, type_B = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
        return 0;
    if (sw_cfg.alltoall == SW_A2A_PAIRWISE)
        return 1;
    if (PMPI_Comm_size(comm, &ranks) != MPI_SUCCESS ||
        PMPI_Type_size(stype, &type_B) != MPI_SUCCESS)
        return 0;
    return pairwise_by_default(ranks, (int64_t)scount * type_B);
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
 * same call: the choice depends only on the ranks and the block's bytes). */
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
    }
    *out = *dup;
    return MPI_SUCCESS;
}

/* ---- the schedule -------------------------------------------------------- */

#define TAG 1

struct pairwise {
    const char *sbuf;
    char *rbuf;
    int scount, rcount;
    MPI_Datatype stype, rtype;
    MPI_Aint sext, rext;
    MPI_Comm comm;
    int rank, size, step;
    MPI_Request req[2];
};

/* Step s (1..size; the last is the rank's own block). */
static int post(struct pairwise *x)
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

static int test_step(void *ctx, int *done)
{
    struct pairwise *x = ctx;
    int flag = 0;
    *done = 0;
    int rc = PMPI_Testall(2, x->req, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || !flag)
        return rc;
    if (x->step == x->size) {
        *done = 1;
        return MPI_SUCCESS;
    }
    x->step++;
    return post(x);
}

int sw_alltoall_pairwise(const void *site, const void *sbuf, int scount, MPI_Datatype stype,
                         void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    struct pairwise x = {.sbuf = sbuf, .rbuf = rbuf, .scount = scount, .rcount = rcount,
                         .stype = stype, .rtype = rtype, .step = 1};
    MPI_Aint lb;
    int rc;
    if ((rc = PMPI_Type_get_extent(stype, &lb, &x.sext)) != MPI_SUCCESS ||
        (rc = PMPI_Type_get_extent(rtype, &lb, &x.rext)) != MPI_SUCCESS ||
        (rc = private_comm(comm, &x.comm)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_rank(x.comm, &x.rank)) != MPI_SUCCESS ||
        (rc = PMPI_Comm_size(x.comm, &x.size)) != MPI_SUCCESS || (rc = post(&x)) != MPI_SUCCESS)
        return rc;
    __atomic_fetch_add(&sw_alltoall_pairwise_calls, 1, __ATOMIC_RELAXED);
    return sw_wait(F_ALLTOALL, site, test_step, &x);
}
