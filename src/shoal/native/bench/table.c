/* The one table of tests. Adding a test is adding an entry here (and a
 * kernel if its MPI pattern is new); the harness does the rest. */
#include "kernels.h"

#include <string.h>

#define RANK0 SB_TIME_RANK0
#define MAX SB_TIME_MAX
#define BW SB_METRIC_BANDWIDTH
#define TIME SB_METRIC_TIME
#define RATE SB_METRIC_RATE

const sb_test sb_tests[] = {
    /* name, suite, min ranks, metric, bytes/op, description, timing, ops/iter,
     * setup, teardown, bytes, kernel, complete, prepare, verify */
    {"mpbench.bandwidth", "mpbench", 2, BW, "size",
     "rank 0 sends inner messages to rank 1, which then sends a 4-byte ack; the ack is inside the timer",
     RANK0, 1, pair_setup, NULL, bytes_size, stream_ack_kernel, NULL, NULL, stream_verify},
    {"mpbench.latency", "mpbench", 2, TIME, "size",
     "application latency (gap time): rank 0 times handing inner sends to MPI; rank 1's 4-byte ack is "
     "received after the timer stops",
     RANK0, 1, pair_setup, NULL, bytes_size, stream_kernel, stream_complete, NULL, stream_verify},
    {"mpbench.roundtrip", "mpbench", 2, RATE, "2*size",
     "rank 0 sends, rank 1 echoes; time per op is one full round trip, the rate is round trips per second",
     RANK0, 1, pair_setup, NULL, bytes_2size, pingpong_kernel, NULL, NULL, pair_verify},
    {"mpbench.bibw", "mpbench", 2, BW, "2*size",
     "ranks 0 and 1 each post Irecv and Isend of size bytes, then Waitall, per iteration",
     RANK0, 1, pair_setup, NULL, bytes_2size, bidir_kernel, NULL, NULL, pair_verify},
    {"mpbench.bcast", "mpbench", 1, BW, "size",
     "MPI_Bcast of size bytes from rank 0",
     MAX, 1, bcast_setup, NULL, bytes_size, bcast_kernel, NULL, NULL, bcast_verify},
    {"mpbench.reduce", "mpbench", 1, BW, "size",
     "MPI_Reduce to rank 0, MPI_SUM over size MPI_UNSIGNED_CHAR elements",
     MAX, 1, u8_reduction_setup, NULL, bytes_size, u8_reduce_kernel, NULL, u8_reduction_prepare,
     u8_reduce_verify},
    {"mpbench.allreduce", "mpbench", 1, BW, "size",
     "MPI_Allreduce, MPI_SUM over size MPI_UNSIGNED_CHAR elements",
     MAX, 1, u8_reduction_setup, NULL, bytes_size, u8_allreduce_kernel, NULL, u8_reduction_prepare,
     u8_allreduce_verify},
    {"mpbench.alltoall", "mpbench", 1, BW, "ranks*floor(size/ranks)",
     "MPI_Alltoall where each rank sends floor(size/ranks) bytes to every rank",
     MAX, 1, mpbench_alltoall_setup, NULL, bytes_alltoall_total, alltoall_kernel, NULL, NULL,
     alltoall_verify},

    {"imb.PingPong", "imb", 2, TIME, "size",
     "rank 0 sends, rank 1 echoes; time per op is half a round trip",
     RANK0, 2, pair_setup, NULL, bytes_size, pingpong_kernel, NULL, NULL, pair_verify},
    {"imb.Uniband", "imb", 2, BW, "size",
     "rank 0 keeps windows of 64 MPI_Isend to rank 1 in flight (Waitall, then a 4-byte ack per "
     "window); one operation is one message",
     RANK0, IMB_WINDOW, pair_setup, NULL, bytes_size, window_kernel, NULL, NULL, stream_verify},
    {"imb.Sendrecv", "imb", 2, TIME, "2*size",
     "periodic chain: every rank MPI_Sendrecv's size bytes to the right and from the left",
     MAX, 1, chain_setup, NULL, bytes_2size, sendrecv_kernel, NULL, NULL, sendrecv_verify},
    {"imb.Exchange", "imb", 2, TIME, "4*size",
     "periodic chain: every rank sends size bytes to both neighbours and receives from both",
     MAX, 1, exchange_setup, NULL, bytes_4size, exchange_kernel, NULL, NULL, exchange_verify},
    {"imb.Allreduce", "imb", 1, TIME, "4*floor(size/4)",
     "MPI_Allreduce, MPI_SUM over floor(size/4) MPI_FLOAT elements",
     MAX, 1, float_reduction_setup, NULL, bytes_float_count, float_allreduce_kernel, NULL,
     float_reduction_prepare, float_allreduce_verify},
    {"imb.Reduce", "imb", 1, TIME, "4*floor(size/4)",
     "MPI_Reduce to rank 0, MPI_SUM over floor(size/4) MPI_FLOAT elements",
     MAX, 1, float_reduction_setup, NULL, bytes_float_count, float_reduce_kernel, NULL,
     float_reduction_prepare, float_reduce_verify},
    {"imb.Reduce_scatter", "imb", 1, TIME, "4*floor(size/4)",
     "MPI_Reduce_scatter, MPI_SUM over floor(size/4) MPI_FLOAT elements split evenly over the ranks",
     MAX, 1, float_reduce_scatter_setup, NULL, bytes_float_count, float_reduce_scatter_kernel, NULL,
     float_reduction_prepare, float_reduce_scatter_verify},
    {"imb.Allgather", "imb", 1, TIME, "size",
     "MPI_Allgather of a size-byte block from every rank",
     MAX, 1, allgather_setup, NULL, bytes_size, allgather_kernel, NULL, NULL, blocks_from_all_verify},
    {"imb.Gather", "imb", 1, TIME, "size",
     "MPI_Gather of a size-byte block from every rank to rank 0",
     MAX, 1, gather_setup, NULL, bytes_size, gather_kernel, NULL, NULL, blocks_from_all_verify},
    {"imb.Scatter", "imb", 1, TIME, "size",
     "MPI_Scatter of a size-byte block from rank 0 to every rank",
     MAX, 1, scatter_setup, NULL, bytes_size, scatter_kernel, NULL, NULL, scatter_verify},
    {"imb.Bcast", "imb", 1, TIME, "size",
     "MPI_Bcast of size bytes from rank 0",
     MAX, 1, bcast_setup, NULL, bytes_size, bcast_kernel, NULL, NULL, bcast_verify},
    {"imb.Alltoall", "imb", 1, TIME, "size",
     "MPI_Alltoall of a size-byte block from every rank to every rank",
     MAX, 1, imb_alltoall_setup, NULL, bytes_size, alltoall_kernel, NULL, NULL, alltoall_verify},
    {"imb.Barrier", "imb", 1, TIME, "0",
     "MPI_Barrier; only size 0 is measured, other sizes are skipped",
     MAX, 1, barrier_setup, NULL, bytes_zero, barrier_kernel, NULL, NULL, nothing_to_verify},
};

const size_t sb_ntests = sizeof sb_tests / sizeof sb_tests[0];

const sb_test *sb_find_test(const char *name)
{
    for (size_t i = 0; i < sb_ntests; i++)
        if (!strcmp(sb_tests[i].name, name))
            return &sb_tests[i];
    return NULL;
}

const char *sb_metric_name(sb_metric m)
{
    switch (m) {
    case SB_METRIC_BANDWIDTH: return "bandwidth";
    case SB_METRIC_RATE: return "rate";
    default: return "time";
    }
}
