/* shoal-pairs: latency and bandwidth between every pair of ranks, one pair at a time.
 *
 * Usage: shoal-pairs LAT_SIZE_B BW_SIZE_B BW_BYTES_TOTAL LAT_ITERS
 * For each pair (a < b) all other ranks wait at a barrier while a and b run a
 * ping-pong of LAT_SIZE_B bytes (one-way latency = round trip / 2) and a
 * streaming test: a sends BW_SIZE_B messages, 8 in flight, until
 * BW_BYTES_TOTAL bytes have gone, and b acknowledges the last one. Rank 0
 * prints one JSON line per pair with both host names. One rank per device
 * gives the device-to-device matrix.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 8

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 5) {
        if (rank == 0) fprintf(stderr, "usage: shoal-pairs LAT_SIZE_B BW_SIZE_B BW_BYTES_TOTAL LAT_ITERS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long lat_size = atol(argv[1]), bw_size = atol(argv[2]), bw_total = atol(argv[3]);
    int lat_iters = atoi(argv[4]);
    long rounds = bw_total / (bw_size * WINDOW);
    if (rounds < 1) rounds = 1;
    char *buf = calloc(1, (size_t)(bw_size * WINDOW + lat_size + 1));
    char names[size][MPI_MAX_PROCESSOR_NAME];
    char mine[MPI_MAX_PROCESSOR_NAME] = {0};
    int len;
    MPI_Get_processor_name(mine, &len);
    MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    for (int a = 0; a < size; a++) {
        for (int b = a + 1; b < size; b++) {
            double result[2] = {0, 0};
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == a || rank == b) {
                int peer = rank == a ? b : a;
                /* Ping-pong: a few untimed round trips first. */
                double t0 = 0;
                for (int i = -5; i < lat_iters; i++) {
                    if (i == 0) t0 = MPI_Wtime();
                    if (rank == a) {
                        MPI_Send(buf, (int)lat_size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                        MPI_Recv(buf, (int)lat_size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    } else {
                        MPI_Recv(buf, (int)lat_size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                        MPI_Send(buf, (int)lat_size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                    }
                }
                result[0] = (MPI_Wtime() - t0) / (2.0 * lat_iters);
                /* Streaming: windows of non-blocking sends, one ack at the end. */
                MPI_Request req[WINDOW];
                t0 = MPI_Wtime();
                for (long r = 0; r < rounds; r++) {
                    for (int w = 0; w < WINDOW; w++) {
                        if (rank == a)
                            MPI_Isend(buf + w * bw_size, (int)bw_size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[w]);
                        else
                            MPI_Irecv(buf + w * bw_size, (int)bw_size, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[w]);
                    }
                    MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                }
                if (rank == a)
                    MPI_Recv(buf, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                else
                    MPI_Send(buf, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD);
                double elapsed = MPI_Wtime() - t0;
                result[1] = (double)rounds * WINDOW * bw_size / elapsed;
                if (rank == a && a != 0)
                    MPI_Send(result, 2, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD);
            }
            if (rank == 0) {
                if (a != 0)
                    MPI_Recv(result, 2, MPI_DOUBLE, a, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                printf("{\"a\": %d, \"b\": %d, \"host_a\": \"%s\", \"host_b\": \"%s\", "
                       "\"latency_s\": %.9g, \"bandwidth_Bps\": %.9g, \"bw_bytes\": %ld}\n",
                       a, b, names[a], names[b], result[0], result[1],
                       rounds * WINDOW * bw_size);
                fflush(stdout);
            }
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
