/* alltoall: MPI_Alltoall delivers every block where it belongs, on the world
 * and on a split communicator, bytes and ints, while a wildcard receive of the
 * program's own is pending that none of the collective's messages may match.
 *
 *   --bytes B   bytes per block (default 1024; a multiple of 4)
 *   --reps N    calls of each kind (default 2)
 * Rank 0 prints {"scenario": "alltoall", "checked": blocks checked, ...}. */
#include "waittest.h"

#include <stdio.h>
#include <stdlib.h>

static int failures;

static unsigned char byte_of(int from, int to, long j)
{
    return (unsigned char)(from * 31 + to * 7 + j);
}

/* One call on comm with blocks of `count` elements of `type` (`unit` bytes each). */
static long exchange(MPI_Comm comm, MPI_Datatype type, int count, int unit)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    long block = (long)count * unit;
    unsigned char *s = malloc(block * size), *r = malloc(block * size);
    for (int to = 0; to < size; to++)
        for (long j = 0; j < block; j++)
            s[to * block + j] = byte_of(rank, to, j);
    for (long j = 0; j < block * size; j++)
        r[j] = 0xEE;
    MPI_Alltoall(s, count, type, r, count, type, comm);
    long checked = 0;
    for (int from = 0; from < size; from++) {
        for (long j = 0; j < block; j++)
            if (r[from * block + j] != byte_of(from, rank, j)) {
                fprintf(stderr, "FAIL rank %d of %d: block from %d, byte %ld\n", rank, size,
                        from, j);
                failures++;
                break;
            }
        checked++;
    }
    free(s);
    free(r);
    return checked;
}

int wt_alltoall(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int bytes = (int)wt_arg(argc, argv, "--bytes", 1024);
    int reps = (int)wt_arg(argc, argv, "--reps", 2);
    int pending = -1, token = 1000 + rank;
    MPI_Request mine;
    MPI_Irecv(&pending, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &mine);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    long checked = 0;
    for (int i = 0; i < reps; i++) {
        checked += exchange(MPI_COMM_WORLD, MPI_BYTE, bytes, 1);
        checked += exchange(MPI_COMM_WORLD, MPI_INT, bytes / 4, 4);
        checked += exchange(half, MPI_BYTE, bytes, 1);
    }
    MPI_Comm_free(&half);
    int stolen = 0;
    MPI_Test(&mine, &stolen, MPI_STATUS_IGNORE);
    if (stolen) {
        fprintf(stderr, "FAIL rank %d: its wildcard receive matched %d\n", rank, pending);
        failures++;
    }
    MPI_Barrier(MPI_COMM_WORLD);   /* no token leaves before every rank looked */
    MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD);
    MPI_Wait(&mine, MPI_STATUS_IGNORE);
    if (pending != 1000 + (rank + size - 1) % size) {
        fprintf(stderr, "FAIL rank %d: its own receive got %d\n", rank, pending);
        failures++;
    }
    long all = 0;
    int failed = 0;
    MPI_Reduce(&checked, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&failures, &failed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("{\"scenario\": \"alltoall\", \"ranks\": %d, \"bytes\": %d, \"checked\": %ld, "
               "\"failures\": %d}\n", size, bytes, all, failed);
    MPI_Finalize();
    return failures ? 1 : 0;
}
