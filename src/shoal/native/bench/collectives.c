/* Collective kernels. Where there is a root it is rank 0 (IMB's default,
 * MPBench's only choice). Reductions:
 * - MPBench: MPI_UNSIGNED_CHAR with MPI_SUM, count = size, so every byte
 *   size is a valid point (MPI defines MPI_SUM on unsigned char);
 * - IMB: MPI_FLOAT with MPI_SUM, count = floor(size/4), as IMB does. */
#include "kernels.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bcast_setup(sb_ctx *c)
{
    if (sb_fits_int(c, c->size, "message"))
        return 1;
    c->count = (int)c->size;
    return c->rank == 0 ? sb_alloc(c, c->size, 0) : sb_alloc(c, 0, c->size);
}

void bcast_kernel(sb_ctx *c, long inner)
{
    void *buf = c->rank == 0 ? c->sbuf : c->rbuf;
    for (long i = 0; i < inner; i++)
        MPI_Bcast(buf, c->count, MPI_BYTE, 0, c->comm);
}

long bcast_verify(const sb_ctx *c)
{
    return c->rank == 0 ? 0 : sb_verify_bytes(c->rbuf, c->size, 0, c->rep, 0);
}

/* ---- MPBench reductions: unsigned char sums ---- */

int u8_reduction_setup(sb_ctx *c)
{
    if (sb_fits_int(c, c->size, "message"))
        return 1;
    c->count = (int)c->size;
    return sb_alloc(c, c->size, c->size);
}

void u8_reduction_prepare(sb_ctx *c)
{
    for (size_t i = 0; i < c->slen; i++)
        c->sbuf[i] = sb_contrib_u8(c->rank, c->nprocs, c->rep, i);
    memset(c->rbuf, 0, c->rlen);
}

static long u8_sum_verify(const sb_ctx *c)
{
    long errors = 0;
    for (size_t i = 0; i < c->size; i++) {
        unsigned char want = 0;
        for (int r = 0; r < c->nprocs; r++)
            want = (unsigned char)(want + sb_contrib_u8(r, c->nprocs, c->rep, i));
        errors += c->rbuf[i] != want;
    }
    return errors;
}

void u8_reduce_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Reduce(c->sbuf, c->rbuf, c->count, MPI_UNSIGNED_CHAR, MPI_SUM, 0, c->comm);
}

long u8_reduce_verify(const sb_ctx *c) { return c->rank == 0 ? u8_sum_verify(c) : 0; }

void u8_allreduce_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Allreduce(c->sbuf, c->rbuf, c->count, MPI_UNSIGNED_CHAR, MPI_SUM, c->comm);
}

long u8_allreduce_verify(const sb_ctx *c) { return u8_sum_verify(c); }

/* ---- IMB reductions: float sums ---- */

static int float_count(sb_ctx *c)
{
    if (c->size < sizeof(float)) {
        snprintf(c->reason, sizeof c->reason,
                 "IMB reductions move MPI_FLOAT elements; %zu B is less than one 4-byte float", c->size);
        return 1;
    }
    if (sb_fits_int(c, c->size / sizeof(float), "element"))
        return 1;
    c->count = (int)(c->size / sizeof(float));
    return 0;
}

int float_reduction_setup(sb_ctx *c)
{
    if (float_count(c))
        return 1;
    size_t bytes = (size_t)c->count * sizeof(float);
    return sb_alloc(c, bytes, bytes);
}

/* Reduce_scatter: the count is split over the ranks as evenly as possible,
 * the first count % nprocs ranks taking one element more. */
int float_reduce_scatter_setup(sb_ctx *c)
{
    if (float_count(c))
        return 1;
    c->counts = malloc((size_t)c->nprocs * sizeof *c->counts);
    if (!c->counts) {
        snprintf(c->reason, sizeof c->reason, "cannot allocate the receive counts");
        return 1;
    }
    for (int r = 0; r < c->nprocs; r++)
        c->counts[r] = c->count / c->nprocs + (r < c->count % c->nprocs);
    return sb_alloc(c, (size_t)c->count * sizeof(float), (size_t)c->counts[c->rank] * sizeof(float));
}

double bytes_float_count(const sb_ctx *c) { return (double)c->count * sizeof(float); }

void float_reduction_prepare(sb_ctx *c)
{
    float *s = (float *)(void *)c->sbuf;
    for (size_t i = 0; i < c->slen / sizeof(float); i++)
        s[i] = sb_contrib_float(c->rank, c->rep, i);
    memset(c->rbuf, 0, c->rlen);
}

/* Elements [offset, offset + n) of the sum over ranks, compared exactly. */
static long float_sum_verify(const sb_ctx *c, size_t offset, size_t n)
{
    const float *got = (const float *)(const void *)c->rbuf;
    long errors = 0;
    for (size_t i = 0; i < n; i++) {
        float want = 0.0f;
        for (int r = 0; r < c->nprocs; r++)
            want += sb_contrib_float(r, c->rep, offset + i);
        errors += got[i] != want;
    }
    return errors;
}

void float_reduce_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Reduce(c->sbuf, c->rbuf, c->count, MPI_FLOAT, MPI_SUM, 0, c->comm);
}

long float_reduce_verify(const sb_ctx *c)
{
    return c->rank == 0 ? float_sum_verify(c, 0, (size_t)c->count) : 0;
}

void float_allreduce_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Allreduce(c->sbuf, c->rbuf, c->count, MPI_FLOAT, MPI_SUM, c->comm);
}

long float_allreduce_verify(const sb_ctx *c) { return float_sum_verify(c, 0, (size_t)c->count); }

void float_reduce_scatter_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Reduce_scatter(c->sbuf, c->rbuf, c->counts, MPI_FLOAT, MPI_SUM, c->comm);
}

long float_reduce_scatter_verify(const sb_ctx *c)
{
    size_t offset = 0;
    for (int r = 0; r < c->rank; r++)
        offset += (size_t)c->counts[r];
    return float_sum_verify(c, offset, (size_t)c->counts[c->rank]);
}

/* ---- per-process blocks (IMB semantics): every rank contributes `size` bytes ---- */

/* Total of nprocs blocks of `block` bytes, if it fits one allocation. */
static int blocks_total(sb_ctx *c, size_t block, size_t *total)
{
    if (sb_fits_int(c, block, "block"))
        return 1;
    if (block && (size_t)c->nprocs > SIZE_MAX / block) {
        snprintf(c->reason, sizeof c->reason, "%d blocks of %zu B do not fit in memory", c->nprocs, block);
        return 1;
    }
    *total = block * (size_t)c->nprocs;
    c->count = (int)block;
    return 0;
}

int allgather_setup(sb_ctx *c)
{
    size_t total;
    return blocks_total(c, c->size, &total) || sb_alloc(c, c->size, total);
}

void allgather_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Allgather(c->sbuf, c->count, MPI_BYTE, c->rbuf, c->count, MPI_BYTE, c->comm);
}

long blocks_from_all_verify(const sb_ctx *c)
{
    long errors = 0;
    if (c->rlen == 0)
        return 0;
    for (int r = 0; r < c->nprocs; r++)
        errors += sb_verify_bytes(c->rbuf + (size_t)r * c->size, c->size, r, c->rep, 0);
    return errors;
}

int gather_setup(sb_ctx *c)
{
    size_t total;
    return blocks_total(c, c->size, &total) || sb_alloc(c, c->size, c->rank == 0 ? total : 0);
}

void gather_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Gather(c->sbuf, c->count, MPI_BYTE, c->rbuf, c->count, MPI_BYTE, 0, c->comm);
}

int scatter_setup(sb_ctx *c)
{
    size_t total;
    return blocks_total(c, c->size, &total) || sb_alloc(c, c->rank == 0 ? total : 0, c->size);
}

void scatter_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Scatter(c->sbuf, c->count, MPI_BYTE, c->rbuf, c->count, MPI_BYTE, 0, c->comm);
}

long scatter_verify(const sb_ctx *c)
{
    return sb_verify_bytes(c->rbuf, c->size, 0, c->rep, (size_t)c->rank * c->size);
}

/* MPBench all-to-all: the size is the total each rank sends, split evenly. */
int mpbench_alltoall_setup(sb_ctx *c)
{
    size_t block = c->size / (size_t)c->nprocs, total;
    if (c->size > 0 && block == 0) {
        snprintf(c->reason, sizeof c->reason,
                 "MPBench alltoall sends size/ranks to every rank; %zu B over %d ranks is less than 1 B",
                 c->size, c->nprocs);
        return 1;
    }
    return blocks_total(c, block, &total) || sb_alloc(c, total, total);
}

/* IMB Alltoall: the size is the block sent to each rank. */
int imb_alltoall_setup(sb_ctx *c)
{
    size_t total;
    return blocks_total(c, c->size, &total) || sb_alloc(c, total, total);
}

double bytes_alltoall_total(const sb_ctx *c) { return (double)c->count * c->nprocs; }

void alltoall_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Alltoall(c->sbuf, c->count, MPI_BYTE, c->rbuf, c->count, MPI_BYTE, c->comm);
}

/* Block r of this rank's receive buffer is block `rank` of rank r's send buffer. */
long alltoall_verify(const sb_ctx *c)
{
    size_t block = (size_t)c->count;
    long errors = 0;
    for (int r = 0; r < c->nprocs; r++)
        errors += sb_verify_bytes(c->rbuf + (size_t)r * block, block, r, c->rep, (size_t)c->rank * block);
    return errors;
}

int barrier_setup(sb_ctx *c)
{
    if (c->size != 0) {
        snprintf(c->reason, sizeof c->reason, "imb.Barrier moves no data; it runs once per sweep, at size 0");
        return 1;
    }
    c->count = 0;
    return sb_alloc(c, 0, 0);
}

void barrier_kernel(sb_ctx *c, long inner)
{
    for (long i = 0; i < inner; i++)
        MPI_Barrier(c->comm);
}

long nothing_to_verify(const sb_ctx *c)
{
    (void)c;
    return 0;
}
