/* traffic: a fixed set of sends and collectives whose bytes between every pair
 * of ranks are known in advance, on MPI_COMM_WORLD and on a communicator whose
 * ranks run the other way round (rank c of it is world rank size-1-c), so the
 * library's counts can be checked cell by cell (tests/wait/test_traffic.py
 * holds the expected matrix). Rank 0 prints {"scenario": "traffic", "ranks": N}. */
#include "waittest.h"

#include <stdio.h>
#include <stdlib.h>

int wt_traffic(int argc, char **argv)
{
    (void)argc, (void)argv;
    MPI_Init(NULL, NULL);
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, n - 1 - r, &rev);
    int c;
    MPI_Comm_rank(rev, &c);
    char bytes[256] = {0}, got[256];
    int ints[16] = {0}, iback[16];
    double dbl[8] = {0}, dback[8 * 64];

    /* p2p on the world: r -> r+1, 100 + r bytes */
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    MPI_Request req;
    MPI_Irecv(got, sizeof got, MPI_BYTE, prev, 1, MPI_COMM_WORLD, &req);
    MPI_Send(bytes, 100 + r, MPI_BYTE, next, 1, MPI_COMM_WORLD);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* p2p on rev: rank c -> c+1 of rev, 3 ints, by MPI_Isend */
    MPI_Irecv(iback, 16, MPI_INT, (c + n - 1) % n, 2, rev, &req);
    MPI_Request sreq;
    MPI_Isend(ints, 3, MPI_INT, (c + 1) % n, 2, rev, &sreq);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Wait(&sreq, MPI_STATUS_IGNORE);
    /* MPI_Sendrecv on the world: 8 doubles to r+1 */
    MPI_Sendrecv(dbl, 8, MPI_DOUBLE, next, 3, dback, 8, MPI_DOUBLE, prev, 3, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    /* nothing to nobody */
    MPI_Send(bytes, 50, MPI_BYTE, MPI_PROC_NULL, 4, MPI_COMM_WORLD);

    /* collectives */
    MPI_Bcast(ints, 10, MPI_INT, 0, rev);                       /* from world n-1, 40 B */
    MPI_Gather(dbl, 2, MPI_DOUBLE, dback, 2, MPI_DOUBLE, 1, MPI_COMM_WORLD); /* to 1, 16 B */
    MPI_Allreduce(ints, iback, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);   /* all to all, 16 B */
    int *scounts = malloc(sizeof(int) * n), *sdispls = malloc(sizeof(int) * n);
    int *rcounts = malloc(sizeof(int) * n), *rdispls = malloc(sizeof(int) * n);
    for (int i = 0, s = 0, q = 0; i < n; i++) {
        scounts[i] = i + 1;          /* i + 1 bytes to rank i */
        rcounts[i] = r + 1;          /* every rank sends r + 1 bytes to rank r */
        sdispls[i] = s;
        rdispls[i] = q;
        s += scounts[i];
        q += rcounts[i];
    }
    char *sa = calloc(256, 1), *ra = calloc(256, 1);
    MPI_Alltoallv(sa, scounts, sdispls, MPI_BYTE, ra, rcounts, rdispls, MPI_BYTE, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);                                 /* 0 B, a message each */
    MPI_Scatter(bytes, 5, MPI_BYTE, got, 5, MPI_BYTE, 1 % n, rev); /* from world n-2, 5 B */
    free(sa);
    free(ra);
    free(scounts);
    free(sdispls);
    free(rcounts);
    free(rdispls);
    MPI_Comm_free(&rev);
    if (r == 0)
        printf("{\"scenario\": \"traffic\", \"ranks\": %d}\n", n);
    MPI_Finalize();
    return 0;
}
