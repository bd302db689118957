/* The setup, kernel and verify functions the test table (table.c) is built
 * from. Tests of the two suites share a kernel wherever the MPI pattern is
 * the same (MPBench roundtrip and IMB PingPong, the two Bcasts, the two
 * Alltoalls); they differ in their table entry, not in code. */
#ifndef SHOAL_BENCH_KERNELS_H
#define SHOAL_BENCH_KERNELS_H

#include "bench.h"

/* p2p.c: ranks 0 and 1 only; other ranks only join the harness's barriers. */
int pair_setup(sb_ctx *c);
double bytes_size(const sb_ctx *c);
double bytes_2size(const sb_ctx *c);
double bytes_4size(const sb_ctx *c);
double bytes_zero(const sb_ctx *c);
void stream_ack_kernel(sb_ctx *c, long inner);  /* MPBench bandwidth: ack inside the timer */
#define IMB_WINDOW 64                            /* IMB Uniband's window of messages in flight */
void window_kernel(sb_ctx *c, long inner);      /* IMB Uniband: windowed nonblocking sends */
void stream_kernel(sb_ctx *c, long inner);      /* MPBench latency: ack after the timer */
void stream_complete(sb_ctx *c);
long stream_verify(const sb_ctx *c);
void pingpong_kernel(sb_ctx *c, long inner);
long pair_verify(const sb_ctx *c);              /* each of ranks 0, 1 received the other's data */
void bidir_kernel(sb_ctx *c, long inner);
/* Periodic chain over all ranks (IMB Sendrecv, Exchange). */
int chain_setup(sb_ctx *c);
void sendrecv_kernel(sb_ctx *c, long inner);
long sendrecv_verify(const sb_ctx *c);
int exchange_setup(sb_ctx *c);
void exchange_kernel(sb_ctx *c, long inner);
long exchange_verify(const sb_ctx *c);

/* collectives.c: root is rank 0 where there is one. */
int bcast_setup(sb_ctx *c);
void bcast_kernel(sb_ctx *c, long inner);
long bcast_verify(const sb_ctx *c);
int u8_reduction_setup(sb_ctx *c);
void u8_reduction_prepare(sb_ctx *c);
void u8_reduce_kernel(sb_ctx *c, long inner);
long u8_reduce_verify(const sb_ctx *c);
void u8_allreduce_kernel(sb_ctx *c, long inner);
long u8_allreduce_verify(const sb_ctx *c);
int float_reduction_setup(sb_ctx *c);
int float_reduce_scatter_setup(sb_ctx *c);
void float_reduction_prepare(sb_ctx *c);
double bytes_float_count(const sb_ctx *c);
void float_reduce_kernel(sb_ctx *c, long inner);
long float_reduce_verify(const sb_ctx *c);
void float_allreduce_kernel(sb_ctx *c, long inner);
long float_allreduce_verify(const sb_ctx *c);
void float_reduce_scatter_kernel(sb_ctx *c, long inner);
long float_reduce_scatter_verify(const sb_ctx *c);
int allgather_setup(sb_ctx *c);
void allgather_kernel(sb_ctx *c, long inner);
long blocks_from_all_verify(const sb_ctx *c);   /* rbuf block j came from rank j */
int gather_setup(sb_ctx *c);
void gather_kernel(sb_ctx *c, long inner);
int scatter_setup(sb_ctx *c);
void scatter_kernel(sb_ctx *c, long inner);
long scatter_verify(const sb_ctx *c);
int mpbench_alltoall_setup(sb_ctx *c);         /* size/nprocs to every rank */
int imb_alltoall_setup(sb_ctx *c);             /* size to every rank */
double bytes_alltoall_total(const sb_ctx *c);
void alltoall_kernel(sb_ctx *c, long inner);
long alltoall_verify(const sb_ctx *c);
int barrier_setup(sb_ctx *c);
void barrier_kernel(sb_ctx *c, long inner);
long nothing_to_verify(const sb_ctx *c);

#endif
