/* Point-to-point kernels: the pair tests (ranks 0 and 1) and the periodic
 * chain over all ranks. Each kernel is only the timed loop body. */
#include "kernels.h"

enum { TAG_DATA = 1, TAG_BACK = 2, TAG_RIGHTWARD = 3, TAG_LEFTWARD = 4 };

static int in_pair(const sb_ctx *c) { return c->rank < 2; }

int pair_setup(sb_ctx *c)
{
    if (sb_fits_int(c, c->size, "message"))
        return 1;
    c->count = (int)c->size;
    return in_pair(c) ? sb_alloc(c, c->size, c->size) : sb_alloc(c, 0, 0);
}

double bytes_size(const sb_ctx *c) { return (double)c->size; }
double bytes_2size(const sb_ctx *c) { return 2.0 * (double)c->size; }
double bytes_4size(const sb_ctx *c) { return 4.0 * (double)c->size; }
double bytes_zero(const sb_ctx *c) { (void)c; return 0.0; }

/* MPBench bandwidth: `inner` sends, then the receiver's 4-byte ack, all timed. */
void stream_ack_kernel(sb_ctx *c, long inner)
{
    if (c->rank == 0) {
        for (long i = 0; i < inner; i++)
            MPI_Send(c->sbuf, c->count, MPI_BYTE, 1, TAG_DATA, c->comm);
        MPI_Recv(c->ack, 4, MPI_BYTE, 1, TAG_BACK, c->comm, MPI_STATUS_IGNORE);
    } else if (c->rank == 1) {
        for (long i = 0; i < inner; i++)
            MPI_Recv(c->rbuf, c->count, MPI_BYTE, 0, TAG_DATA, c->comm, MPI_STATUS_IGNORE);
        MPI_Send(c->ack, 4, MPI_BYTE, 0, TAG_BACK, c->comm);
    }
}

/* IMB Uniband: windows of IMB_WINDOW nonblocking sends completed together,
 * each window acknowledged by the receiver; one operation is one message. */
void window_kernel(sb_ctx *c, long inner)
{
    MPI_Request req[IMB_WINDOW];
    if (c->rank == 0) {
        for (long i = 0; i < inner; i++) {
            for (int w = 0; w < IMB_WINDOW; w++)
                MPI_Isend(c->sbuf, c->count, MPI_BYTE, 1, TAG_DATA, c->comm, &req[w]);
            MPI_Waitall(IMB_WINDOW, req, MPI_STATUSES_IGNORE);
            MPI_Recv(c->ack, 4, MPI_BYTE, 1, TAG_BACK, c->comm, MPI_STATUS_IGNORE);
        }
    } else if (c->rank == 1) {
        for (long i = 0; i < inner; i++) {
            for (int w = 0; w < IMB_WINDOW; w++)
                MPI_Irecv(c->rbuf, c->count, MPI_BYTE, 0, TAG_DATA, c->comm, &req[w]);
            MPI_Waitall(IMB_WINDOW, req, MPI_STATUSES_IGNORE);
            MPI_Send(c->ack, 4, MPI_BYTE, 0, TAG_BACK, c->comm);
        }
    }
}

/* MPBench application latency (gap time): the sender's timer covers only
 * handing `inner` messages to MPI; the ack is collected by stream_complete. */
void stream_kernel(sb_ctx *c, long inner)
{
    if (c->rank == 0) {
        for (long i = 0; i < inner; i++)
            MPI_Send(c->sbuf, c->count, MPI_BYTE, 1, TAG_DATA, c->comm);
    } else if (c->rank == 1) {
        for (long i = 0; i < inner; i++)
            MPI_Recv(c->rbuf, c->count, MPI_BYTE, 0, TAG_DATA, c->comm, MPI_STATUS_IGNORE);
        MPI_Send(c->ack, 4, MPI_BYTE, 0, TAG_BACK, c->comm);
    }
}

void stream_complete(sb_ctx *c)
{
    if (c->rank == 0)
        MPI_Recv(c->ack, 4, MPI_BYTE, 1, TAG_BACK, c->comm, MPI_STATUS_IGNORE);
}

long stream_verify(const sb_ctx *c)
{
    return c->rank == 1 ? sb_verify_bytes(c->rbuf, c->size, 0, c->rep, 0) : 0;
}

/* Send and echo: one iteration is one full round trip. */
void pingpong_kernel(sb_ctx *c, long inner)
{
    if (c->rank == 0) {
        for (long i = 0; i < inner; i++) {
            MPI_Send(c->sbuf, c->count, MPI_BYTE, 1, TAG_DATA, c->comm);
            MPI_Recv(c->rbuf, c->count, MPI_BYTE, 1, TAG_BACK, c->comm, MPI_STATUS_IGNORE);
        }
    } else if (c->rank == 1) {
        for (long i = 0; i < inner; i++) {
            MPI_Recv(c->rbuf, c->count, MPI_BYTE, 0, TAG_DATA, c->comm, MPI_STATUS_IGNORE);
            MPI_Send(c->sbuf, c->count, MPI_BYTE, 0, TAG_BACK, c->comm);
        }
    }
}

long pair_verify(const sb_ctx *c)
{
    return in_pair(c) ? sb_verify_bytes(c->rbuf, c->size, 1 - c->rank, c->rep, 0) : 0;
}

/* MPBench bidirectional bandwidth: both post a receive and a send, then wait for both. */
void bidir_kernel(sb_ctx *c, long inner)
{
    if (!in_pair(c))
        return;
    int peer = 1 - c->rank;
    MPI_Request req[2];
    for (long i = 0; i < inner; i++) {
        MPI_Irecv(c->rbuf, c->count, MPI_BYTE, peer, TAG_DATA, c->comm, &req[0]);
        MPI_Isend(c->sbuf, c->count, MPI_BYTE, peer, TAG_DATA, c->comm, &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
}

static int right_of(const sb_ctx *c) { return (c->rank + 1) % c->nprocs; }
static int left_of(const sb_ctx *c) { return (c->rank + c->nprocs - 1) % c->nprocs; }

int chain_setup(sb_ctx *c)
{
    if (sb_fits_int(c, c->size, "message"))
        return 1;
    c->count = (int)c->size;
    return sb_alloc(c, c->size, c->size);
}

/* IMB Sendrecv: send to the right neighbour while receiving from the left. */
void sendrecv_kernel(sb_ctx *c, long inner)
{
    int right = right_of(c), left = left_of(c);
    for (long i = 0; i < inner; i++)
        MPI_Sendrecv(c->sbuf, c->count, MPI_BYTE, right, TAG_RIGHTWARD, c->rbuf, c->count, MPI_BYTE, left,
                     TAG_RIGHTWARD, c->comm, MPI_STATUS_IGNORE);
}

long sendrecv_verify(const sb_ctx *c)
{
    return sb_verify_bytes(c->rbuf, c->size, left_of(c), c->rep, 0);
}

int exchange_setup(sb_ctx *c)
{
    if (sb_fits_int(c, c->size, "message"))
        return 1;
    c->count = (int)c->size;
    return sb_alloc(c, c->size, 2 * c->size);
}

/* IMB Exchange: the same block to both neighbours, a block from each. The
 * two directions use different tags so that with two ranks (left == right)
 * each receive still knows which send it matches. */
void exchange_kernel(sb_ctx *c, long inner)
{
    int right = right_of(c), left = left_of(c);
    MPI_Request req[4];
    for (long i = 0; i < inner; i++) {
        MPI_Irecv(c->rbuf, c->count, MPI_BYTE, left, TAG_RIGHTWARD, c->comm, &req[0]);
        MPI_Irecv(c->rbuf + c->size, c->count, MPI_BYTE, right, TAG_LEFTWARD, c->comm, &req[1]);
        MPI_Isend(c->sbuf, c->count, MPI_BYTE, right, TAG_RIGHTWARD, c->comm, &req[2]);
        MPI_Isend(c->sbuf, c->count, MPI_BYTE, left, TAG_LEFTWARD, c->comm, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    }
}

long exchange_verify(const sb_ctx *c)
{
    return sb_verify_bytes(c->rbuf, c->size, left_of(c), c->rep, 0) +
           sb_verify_bytes(c->rbuf + c->size, c->size, right_of(c), c->rep, 0);
}
