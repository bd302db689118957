/* Launch and wire-up cost of one rank per emulated device: how long after the launcher
 * started (LAUNCH_T0, CLOCK_MONOTONIC seconds, one clock for every namespace of the host)
 * each rank's MPI_Init returned, the rank's resident memory then and at its peak, and
 * MPI_Finalize's time. Rank 0 prints one JSON line. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double status_kB(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':')
            v = atof(line + n + 1);
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    const char *t0_text = getenv("LAUNCH_T0");
    double t0 = t0_text ? atof(t0_text) : now_s();
    double before = now_s();
    MPI_Init(&argc, &argv);
    double after = now_s();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* The first message to every rank (on-demand wire-up counts here, not in MPI_Init). */
    double mine[4] = {after - t0, after - before, status_kB("VmRSS") * 1024, 0};
    double first = now_s();
    MPI_Barrier(MPI_COMM_WORLD);
    mine[3] = now_s() - first;
    double *all = rank == 0 ? malloc(sizeof(double) * 4 * size) : NULL;
    MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double fin = now_s();
    MPI_Finalize();
    fin = now_s() - fin;
    if (rank == 0) {
        printf("{\"ranks\":%d,\"finalize_s\":%.6f,\"init_done_s\":[", size, fin);
        for (int r = 0; r < size; r++)
            printf("%s%.6f", r ? "," : "", all[4 * r]);
        printf("],\"init_s\":[");
        for (int r = 0; r < size; r++)
            printf("%s%.6f", r ? "," : "", all[4 * r + 1]);
        printf("],\"rss_B\":[");
        for (int r = 0; r < size; r++)
            printf("%s%.0f", r ? "," : "", all[4 * r + 2]);
        printf("],\"first_barrier_s\":[");
        for (int r = 0; r < size; r++)
            printf("%s%.6f", r ? "," : "", all[4 * r + 3]);
        printf("]}\n");
        fflush(stdout);
    }
    return 0;
}
