/* Where a rank runs and who started it: rank, host name, the network namespace of the
 * rank and of its parent (the launcher's daemon), the device core shoal gave it; then a
 * 256 KiB Allreduce, whose bytes must cross the emulated links. One line per rank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define COUNT (256 * 1024 / sizeof(int))

static unsigned long netns_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    static int data[COUNT];
    for (size_t i = 0; i < COUNT; i++)
        data[i] = rank;
    MPI_Allreduce(MPI_IN_PLACE, data, COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    char host[64] = "", parent[64];
    gethostname(host, sizeof host);
    snprintf(parent, sizeof parent, "/proc/%d/ns/net", (int)getppid());
    const char *core = getenv("SHOAL_DEVICE_CORE");
    printf("%d %s %lu %lu %s %d\n", rank, host, netns_of("/proc/self/ns/net"), netns_of(parent),
           core ? core : "-", data[COUNT - 1]);
    MPI_Finalize();
    return 0;
}
