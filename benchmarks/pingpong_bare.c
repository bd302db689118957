/* The reference for harness_overhead.py: the shortest honest ping-pong.
 *
 *   pingpong_bare SIZE INNER REPS
 *
 * Each repetition: a barrier, then INNER round trips of SIZE bytes between
 * ranks 0 and 1 timed on rank 0 with CLOCK_MONOTONIC. At the end rank 0
 * prints one line per repetition: the half round-trip time in seconds. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: pingpong_bare SIZE INNER REPS\n");
        MPI_Finalize();
        return 2;
    }
    int size = atoi(argv[1]);
    long inner = atol(argv[2]), reps = atol(argv[3]);
    char *sbuf = malloc((size_t)size + 1), *rbuf = malloc((size_t)size + 1);
    memset(sbuf, 1, (size_t)size + 1); /* real pages, not the shared zero page */
    memset(rbuf, 2, (size_t)size + 1);
    double *samples = malloc((size_t)(reps > 0 ? reps : 1) * sizeof *samples);
    for (long r = -2; r < reps; r++) { /* two untimed warm-up repetitions */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        if (rank == 0) {
            for (long i = 0; i < inner; i++) {
                MPI_Send(sbuf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(rbuf, size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        } else if (rank == 1) {
            for (long i = 0; i < inner; i++) {
                MPI_Recv(rbuf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, size, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
            }
        }
        double t1 = now();
        if (r >= 0)
            samples[r] = (t1 - t0) / (2.0 * (double)inner);
    }
    /* Printed at the end: a line per repetition would wake the launcher's
     * output forwarding (a pty under Open MPI) between repetitions. */
    for (long r = 0; rank == 0 && r < reps; r++)
        printf("%.9g\n", samples[r]);
    free(samples);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
