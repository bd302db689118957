/* Start and end of MPI: configuration, the ABI guard, timer slack, telemetry.
 *
 * The library is compiled against one MPI (MPICH and Open MPI differ in
 * ABI: handles are ints in one and pointers in the other). Loaded into a
 * program of another MPI it would misbehave silently, so MPI_Init compares
 * MPI_Get_library_version (callable before init) with the MPI this file
 * was compiled for and refuses to go on when they differ. */
#define _GNU_SOURCE
#include "shoalwait.h"
#include "wrap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#if defined(OPEN_MPI)
#define STR2(x) #x
#define STR(x) STR2(x)
const char sw_built_for[] = "Open MPI v" STR(OMPI_MAJOR_VERSION) "." STR(OMPI_MINOR_VERSION) "." STR(
    OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
const char sw_built_for[] = "MPICH " MPICH_VERSION;
#else
#error "libshoalwait knows MPICH and Open MPI (and their derivatives) only"
#endif

char sw_runtime_library[MPI_MAX_LIBRARY_VERSION_STRING + 1];
int64_t sw_init_ns;
struct rusage sw_init_usage;
int sw_slack_errno;
int64_t sw_slack_got_ns = -1;

/* "MPICH 5.0.2" or "Open MPI v5.0.11" from the library's version text. */
static void runtime_identity(char *out, size_t n)
{
    const char *s = sw_runtime_library, *p;
    if (!strncmp(s, "Open MPI v", 10)) {
        size_t len = strcspn(s, ",\n");
        snprintf(out, n, "%.*s", (int)len, s);
    } else if ((p = strstr(s, "MPICH Version:"))) {
        p += strlen("MPICH Version:");
        p += strspn(p, " \t");
        snprintf(out, n, "MPICH %.*s", (int)strcspn(p, " \t\n"), p);
    } else {
        snprintf(out, n, "%.*s", (int)strcspn(s, "\n"), s);
    }
}

static void guard_abi(void)
{
    int len = 0;
    PMPI_Get_library_version(sw_runtime_library, &len);
    sw_runtime_library[len < 0 ? 0 : len] = '\0';
    char running[256];
    runtime_identity(running, sizeof running);
    if (strcmp(running, sw_built_for) != 0) {
        sw_fatal(3, "this libshoalwait.so was built for %s but the program runs %s; "
                    "build it for that MPI (shoal run --mpi ...) instead of reusing this file",
                 sw_built_for, running);
    }
}

/* Timer slack is per thread: every thread that waits sets its own. */
void sw_slack_thread(void)
{
    if (sw_cfg.slack_ns == 0 || sw_cfg.mode == SW_BUSY)
        return;
    if (prctl(PR_SET_TIMERSLACK, (unsigned long)sw_cfg.slack_ns, 0, 0, 0) != 0) {
        if (!__atomic_exchange_n(&sw_slack_errno, errno, __ATOMIC_RELAXED))
            sw_say("the kernel refused timer slack %lld ns (%s); sleeps will end later than "
                   "asked", (long long)sw_cfg.slack_ns, strerror(errno));
    }
    long got = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (got >= 0)
        __atomic_store_n(&sw_slack_got_ns, (int64_t)got, __ATOMIC_RELAXED);
}

static void start(void)
{
    sw_configure();
    guard_abi();
}

/* The telemetry's clock and CPU accounting start when MPI_Init returns:
 * loading the MPI library and its start-up (Open MPI's wire-up can take a
 * second, mostly asleep) are not the program's waiting. */
static int started(int rc)
{
    if (rc == MPI_SUCCESS) {
        sw_wake_start();   /* the sockets MPI_Init opened */
        sw_traffic_start();
        rc = sw_alltoall_prepare();
    }
    sw_init_ns = sw_now_ns();
    getrusage(RUSAGE_SELF, &sw_init_usage);
    return rc;
}

int MPI_Init(int *argc, char ***argv)
{
    start();
    return started(PMPI_Init(argc, argv));
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    start();
    return started(PMPI_Init_thread(argc, argv, required, provided));
}

int MPI_Finalize(void)
{
    int rank = 0, size = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    sw_telemetry_write(rank, size);
    sw_recv_cache_free_all();
    return PMPI_Finalize();
}
