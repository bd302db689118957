/* shoal-bench: MPBench and IMB-MPI1 communication tests under one timing
 * harness, writing JSON Lines for shoal's sweep driver.
 *
 *   shoal-bench --points imb.PingPong:8,mpbench.bcast:1024 [options]
 *   shoal-bench --list
 *
 * See docs/benchmark-program.md for the tests, their semantics and the
 * output records. */
#include "bench.h"
#include "shoal_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

static const char usage[] =
    "usage: shoal-bench --points TEST:SIZE[,TEST:SIZE...] [options]\n"
    "       shoal-bench --list\n"
    "\n"
    "  --points LIST    points to run, in order (sizes in bytes), e.g. imb.PingPong:8,mpbench.bcast:1024\n"
    "  --ci X           stop when the median's 95% CI half-width <= X * median (default 0.02)\n"
    "  --budget S       at most S seconds per point (default 1.0)\n"
    "  --min-reps N     at least N measured repetitions (default 10)\n"
    "  --max-reps N     at most N measured repetitions (default 100000)\n"
    "  --rep-time S     calibrate one repetition to about S seconds (default 0.0002)\n"
    "  --inner N        force N operations per repetition (no calibration)\n"
    "  --warmup N       untimed repetitions before measuring (default 2); calibration\n"
    "                   trials at the measured inner count are among them\n"
    "  --settle S       exchange messages for S seconds before the first point (default 0.05)\n"
    "  --flush BYTES    write BYTES of memory between repetitions to evict caches (default 0: off)\n"
    "  --check          fill send buffers with a pattern and verify every received byte\n"
    "  --list           print the test table as JSON and exit\n"
    "\n"
    "Output: JSON Lines on rank 0's stdout (hello, point/skip records, done).\n";

static void print_list(void)
{
    puts("[");
    for (size_t i = 0; i < sb_ntests; i++) {
        const sb_test *t = &sb_tests[i];
        fputs("  {\"name\":", stdout);
        sb_json_string(t->name);
        fputs(",\"suite\":", stdout);
        sb_json_string(t->suite);
        printf(",\"min_ranks\":%d,\"metric\":\"%s\",\"bytes_per_op\":", t->min_ranks, sb_metric_name(t->metric));
        sb_json_string(t->bytes_per_op);
        printf(",\"timed_by\":\"%s\"", t->timing == SB_TIME_MAX ? "max" : "rank0");
        fputs(",\"description\":", stdout);
        sb_json_string(t->description);
        printf("}%s\n", i + 1 < sb_ntests ? "," : "");
    }
    puts("]");
}

static void emit_hello(MPI_Comm comm)
{
    int rank, nprocs, len;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nprocs);
    char name[MPI_MAX_PROCESSOR_NAME];
    memset(name, 0, sizeof name);
    MPI_Get_processor_name(name, &len);
    char *names = rank == 0 ? calloc((size_t)nprocs, MPI_MAX_PROCESSOR_NAME) : NULL;
    if (rank == 0 && !names) {
        fprintf(stderr, "shoal-bench: out of memory gathering host names\n");
        MPI_Abort(comm, 1);
    }
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, comm);
    /* Process ids: a launcher that reports a dead process by pid alone (Hydra) then
     * names its rank. */
    int pid = (int)getpid();
    int *pids = rank == 0 ? calloc((size_t)nprocs, sizeof(int)) : NULL;
    if (rank == 0 && !pids) {
        fprintf(stderr, "shoal-bench: out of memory gathering process ids\n");
        MPI_Abort(comm, 1);
    }
    MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, comm);
    if (rank != 0)
        return;

    char library[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(library, &len);
    library[strcspn(library, "\n")] = '\0';
    for (size_t end = strlen(library); end > 0 && (library[end - 1] == ' ' || library[end - 1] == '\t');)
        library[--end] = '\0';

    printf("{\"type\":\"hello\",\"ranks\":%d,\"mpi_library\":", nprocs);
    sb_json_string(library);
    fputs(",\"hosts\":[", stdout);
    for (int r = 0; r < nprocs; r++) {
        char *host = names + (size_t)r * MPI_MAX_PROCESSOR_NAME;
        host[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
        if (r)
            putchar(',');
        sb_json_string(host);
    }
    fputs("],\"pids\":[", stdout);
    for (int r = 0; r < nprocs; r++)
        printf("%s%d", r ? "," : "", pids[r]);
    fputs("],\"timer\":\"CLOCK_MONOTONIC\",\"timer_resolution_s\":", stdout);
    sb_json_double(shoal_clock_resolution_s(), 9);
    fputs("}\n", stdout);
    fflush(stdout);
    free(names);
    free(pids);
}

int main(int argc, char **argv)
{
    /* --list and --help need no MPI: the Python side reads the table
     * without starting a job. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) {
            print_list();
            return 0;
        }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
    }

    sb_options o;
    char err[256] = "";
    int bad = sb_parse_options(argc, argv, &o, err, sizeof err);
    /* Tests only: SHOAL_BENCH_CORRUPT=<rank> makes that rank flip one byte of
     * its send data after filling, so --check must report errors. */
    const char *corrupt = getenv("SHOAL_BENCH_CORRUPT");
    o.corrupt_rank = corrupt && *corrupt ? atoi(corrupt) : -1;

    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Every rank parsed the same arguments, so all of them stop here together. */
    if (!bad && sb_flush_init(o.flush) != 0) {
        bad = 1;
        snprintf(err, sizeof err, "cannot allocate the --flush buffer of %zu B; give a smaller size", o.flush);
    }
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
        if (rank == 0)
            fprintf(stderr, "shoal-bench: %s\n", err[0] ? err : "a rank could not start; see its messages");
        sb_free_options(&o);
        MPI_Finalize();
        return 2;
    }

    emit_hello(MPI_COMM_WORLD);
    /* Tests only: SHOAL_BENCH_CRASH=<rank> makes that rank die of SIGSEGV without a word as
     * its last point starts, so a crash report must come from the launcher; <rank>:fault
     * makes it write through a null pointer instead, with whatever handler the MPI set (one
     * that reports the signal on stderr, as a real crash meets). Any earlier point has let
     * the hello line (pids) reach shoal, as in a crash in the middle of a run; a crash right
     * at the start could take the hello with it. */
    const char *crash = getenv("SHOAL_BENCH_CRASH");
    int crashes = crash && *crash && atoi(crash) == rank;
    int faults = crashes && strstr(crash, ":fault") != NULL;
    sb_settle(o.settle, MPI_COMM_WORLD);
    for (size_t i = 0; i < o.npoints; i++) {
        if (crashes && i + 1 == o.npoints) {
            if (faults) {
                volatile int *nowhere = NULL;
                *nowhere = 1;
            }
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        }
        sb_run_point(&o, &o.points[i], MPI_COMM_WORLD);
    }
    if (rank == 0) {
        puts("{\"type\":\"done\"}");
        fflush(stdout);
    }
    sb_free_options(&o);
    MPI_Finalize();
    return 0;
}
