/* A fixed computation mixing point-to-point and collectives; rank 0 prints
 * an exact integer checksum that must be the same under every wait mode. */
#define _GNU_SOURCE
#include "waittest.h"

#include <stdio.h>
#include <stdlib.h>

#define N 256

int wt_result(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = (int)wt_arg(argc, argv, "--rounds", 40);
    long v[N], in[N], total = 0;
    long *a2a = malloc(sizeof(long) * size * 4), *back = malloc(sizeof(long) * size * 4);
    for (int i = 0; i < N; i++)
        v[i] = (long)rank * 1000 + i;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int r = 0; r < rounds; r++) {
        MPI_Sendrecv(v, N, MPI_LONG, right, r, in, N, MPI_LONG, left, r, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (int i = 0; i < N; i++)
            v[i] = (v[i] * 31 + in[(i + r) % N]) % 1000003;
        long s = 0, sum = 0;
        for (int i = 0; i < N; i++)
            s += v[i];
        MPI_Allreduce(&s, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        long pivot = rank == r % size ? sum % 977 : 0;
        MPI_Bcast(&pivot, 1, MPI_LONG, r % size, MPI_COMM_WORLD);
        for (int i = 0; i < size * 4; i++)
            a2a[i] = v[i % N] + pivot + i;
        MPI_Alltoall(a2a, 4, MPI_LONG, back, 4, MPI_LONG, MPI_COMM_WORLD);
        for (int i = 0; i < size * 4; i++)
            v[i % N] = (v[i % N] + back[i]) % 1000003;
        /* Rank 0 collects one value from everyone in whatever order it comes. */
        if (rank == 0) {
            long got = 0, x;
            for (int k = 1; k < size; k++) {
                MPI_Recv(&x, 1, MPI_LONG, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                got += x;
            }
            total = (total * 7 + got + sum) % 1000000007;
        } else {
            MPI_Send(&v[r % N], 1, MPI_LONG, 0, 99, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("{\"result\": %ld, \"ranks\": %d, \"rounds\": %d}\n", total, size, rounds);
    fflush(stdout);
    free(a2a);
    free(back);
    MPI_Finalize();
    return 0;
}
