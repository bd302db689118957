/* Blocking collectives through their nonblocking forms plus the test loop.
 * The nonblocking schedule advances only inside MPI_Test, so the loop's
 * tests are what drives every round of the algorithm. */
#define _GNU_SOURCE
#include "shoalwait.h"
#include "wrap.h"

#define SITE __builtin_return_address(0)

/* Body of one wrapper: pass through, or start the I-form and wait on it. */
#define COLL(fn, blocking, nonblocking)                     \
    do {                                                    \
        if (!sw_active(fn))                                 \
            SW_PASS(fn, PMPI_##blocking);                   \
        MPI_Request req_;                                   \
        int rc_ = PMPI_##nonblocking;                       \
        return sw_finish(fn, site, rc_, &req_, MPI_STATUS_IGNORE); \
    } while (0)

static int is_root(MPI_Comm comm, int root)
{
    int me = -1;
    return PMPI_Comm_rank(comm, &me) == MPI_SUCCESS && me == root;
}

int sw_barrier(const void *site, MPI_Comm comm)
{
    if (sw_cfg.timed)
        sw_traffic_to_all(comm, 0, MPI_BYTE);
    COLL(F_BARRIER, Barrier(comm), Ibarrier(comm, &req_));
}

int sw_bcast(const void *site, void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    if (sw_cfg.timed && is_root(comm, root))
        sw_traffic_to_all(comm, count, type);
    COLL(F_BCAST, Bcast(buf, count, type, root, comm),
         Ibcast(buf, count, type, root, comm, &req_));
}

int sw_allreduce(const void *site, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                 MPI_Op op, MPI_Comm comm)
{
    if (sw_cfg.timed)
        sw_traffic_to_all(comm, count, type);
    COLL(F_ALLREDUCE, Allreduce(sbuf, rbuf, count, type, op, comm),
         Iallreduce(sbuf, rbuf, count, type, op, comm, &req_));
}

int sw_reduce(const void *site, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
              MPI_Op op, int root, MPI_Comm comm)
{
    if (sw_cfg.timed)
        sw_traffic_to_one(comm, root, count, type);
    COLL(F_REDUCE, Reduce(sbuf, rbuf, count, type, op, root, comm),
         Ireduce(sbuf, rbuf, count, type, op, root, comm, &req_));
}

int MPI_Barrier(MPI_Comm comm)
{
    SW_DIRECT(F_BARRIER, PMPI_Barrier(comm));
    return sw_barrier(SITE, comm);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    SW_DIRECT(F_BCAST, PMPI_Bcast(buf, count, type, root, comm));
    return sw_bcast(SITE, buf, count, type, root, comm);
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm)
{
    SW_DIRECT(F_REDUCE, PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
    return sw_reduce(SITE, sbuf, rbuf, count, type, op, root, comm);
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    SW_DIRECT(F_ALLREDUCE, PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
    return sw_allreduce(SITE, sbuf, rbuf, count, type, op, comm);
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed)
        sw_traffic_to_one(comm, root, scount, stype);
    COLL(F_GATHER, Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm),
         Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &req_));
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed)
        sw_traffic_to_one(comm, root, scount, stype);
    COLL(F_GATHERV, Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm),
         Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, &req_));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed && is_root(comm, root))
        sw_traffic_to_all(comm, scount, stype);
    COLL(F_SCATTER, Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm),
         Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &req_));
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed && is_root(comm, root))
        sw_traffic_to_each(comm, scounts, stype);
    COLL(F_SCATTERV, Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm),
         Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, &req_));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed)   /* in place: the rank's own block of the receive buffer */
        sw_traffic_to_all(comm, sbuf == MPI_IN_PLACE ? rcount : scount,
                          sbuf == MPI_IN_PLACE ? rtype : stype);
    COLL(F_ALLGATHER, Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm),
         Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, &req_));
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed) {
        int me = 0;
        PMPI_Comm_rank(comm, &me);
        sw_traffic_to_all(comm, sbuf == MPI_IN_PLACE ? rcounts[me] : scount,
                          sbuf == MPI_IN_PLACE ? rtype : stype);
    }
    COLL(F_ALLGATHERV, Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm),
         Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, &req_));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed)
        sw_traffic_to_all(comm, sbuf == MPI_IN_PLACE ? rcount : scount,
                          sbuf == MPI_IN_PLACE ? rtype : stype);
    enum sw_alltoall shape =
        sw_active(F_ALLTOALL) ? sw_alltoall_shape(sbuf, scount, stype, comm) : SW_A2A_MPI;
    if (shape != SW_A2A_MPI)
        return sw_alltoall(site, shape, sbuf, scount, stype, rbuf, rcount, rtype, comm);
    COLL(F_ALLTOALL, Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm),
         Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, &req_));
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
                  MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                  MPI_Datatype rtype, MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed)
        sw_traffic_to_each(comm, sbuf == MPI_IN_PLACE ? rcounts : scounts,
                           sbuf == MPI_IN_PLACE ? rtype : stype);
    COLL(F_ALLTOALLV,
         Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm),
         Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, &req_));
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                       MPI_Op op, MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed)   /* each rank's part of every other rank's block */
        sw_traffic_to_each(comm, rcounts, type);
    COLL(F_REDUCE_SCATTER, Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm),
         Ireduce_scatter(sbuf, rbuf, rcounts, type, op, comm, &req_));
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm)
{
    const void *site = SITE;
    if (sw_cfg.timed)
        sw_traffic_to_all(comm, rcount, type);
    COLL(F_REDUCE_SCATTER_BLOCK, Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm),
         Ireduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, &req_));
}
