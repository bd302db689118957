/* A CPU-bound MPI kernel for the dilation benchmark: every rank runs the same
 * fixed number of multiply-adds, then rank 0 prints the slowest rank's time. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long iterations = argc > 1 ? atol(argv[1]) : 100000000L;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    volatile unsigned long x = (unsigned long)rank + 1;
    for (long i = 0; i < iterations; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    double mine = MPI_Wtime() - t0, slowest;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%.9f %lu\n", slowest, (unsigned long)x);
    MPI_Finalize();
    return 0;
}
