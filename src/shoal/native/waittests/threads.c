/* MPI_THREAD_MULTIPLE: on rank 1 two threads receive concurrently (each its
 * own tag) while rank 0's two threads send; every value must arrive once. */
#define _GNU_SOURCE
#include "waittest.h"

#include <pthread.h>
#include <stdio.h>

#define PER_THREAD 200

struct job { int rank, tag; long sum; int bad; };

static void *work(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        int v = j->tag * 100000 + i;
        if (j->rank == 0) {
            if (i % 50 == 0)
                wt_sleep(0.002);   /* let the receivers fall asleep now and then */
            MPI_Send(&v, 1, MPI_INT, 1, j->tag, MPI_COMM_WORLD);
        } else {
            int got = -1;
            MPI_Status st;
            MPI_Recv(&got, 1, MPI_INT, 0, j->tag, MPI_COMM_WORLD, &st);
            if (got != v || st.MPI_TAG != j->tag)
                j->bad++;
            j->sum += got;
        }
    }
    return NULL;
}

int wt_threads(int argc, char **argv)
{
    int provided = 0, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            fprintf(stderr, "this MPI does not provide MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    struct job jobs[2] = {{rank, 1, 0, 0}, {rank, 2, 0, 0}};
    pthread_t t[2];
    if (rank < 2) {
        for (int i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, work, &jobs[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int bad = jobs[0].bad + jobs[1].bad;
    if (rank == 1)
        printf("{\"threads\": 2, \"received\": %d, \"sum\": %ld, \"bad\": %d}\n",
               2 * PER_THREAD, jobs[0].sum + jobs[1].sum, bad);
    fflush(stdout);
    MPI_Finalize();
    return bad ? 1 : 0;
}
