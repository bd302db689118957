/* shoal-work: run workloads under MPI and print one JSON line per run.
 *
 *   shoal-work --runs raytrace:512[,msa:S200-L300...] [--check] [--output DIR]
 *   shoal-work --list
 *   shoal-work --describe NAME:SIZE
 *   shoal-work --probe NAME[,NAME...] [--probe-s S] [--rounds R]
 *
 * Rank 0 prints, on stdout: a "hello" record, one "result" record per run,
 * then "done". See docs/work.md for the fields. */
#include "work.h"
#include "shoal_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The catalog: one line per workload, in the order --list shows them. Each is a C file
 * here whose WK_WORKLOAD(NAME, ...) defines wk_NAME (docs/work.md: adding a workload). */
#define WK_CATALOG(X) \
    X(raytrace)       \
    X(msa)            \
    X(videostream)    \
    X(edge)           \
    X(ep)             \
    X(is)

#define WK_DECLARE(name) extern const wk_workload wk_##name;
WK_CATALOG(WK_DECLARE)
#define WK_ENTRY(name) &wk_##name,
static const wk_workload *const workloads[] = {WK_CATALOG(WK_ENTRY)};
#define NWORKLOADS (sizeof workloads / sizeof workloads[0])

static const char usage[] =
    "usage: shoal-work --runs NAME:SIZE[,NAME:SIZE...] [options]\n"
    "       shoal-work --list | --describe NAME:SIZE\n"
    "\n"
    "  --runs LIST     workloads to run in order, each with its size\n"
    "  --check         compare every parallel result with the serial reference (rank 0, untimed)\n"
    "  --corrupt       damage the parallel result before the check (the check must fail)\n"
    "  --output DIR    rank 0 writes each result's files into DIR (image, matrix, lines, ...)\n"
    "  --aes KIND      edge: openssl (libcrypto's EVP), software, or auto (default)\n"
    "  --list          print the workloads as JSON and exit\n"
    "  --describe X    check NAME:SIZE and print its memory per rank as JSON, then exit\n"
    "  --probe LIST    time each named workload's serial kernel on this core (no MPI), as JSON\n"
    "  --probe-s S     CPU seconds per kernel and round (default 0.1)\n"
    "  --rounds R      rounds, the kernels interleaved in each (default 3)\n";

static const wk_workload *find(const char *name, size_t len)
{
    for (size_t i = 0; i < NWORKLOADS; i++)
        if (strlen(workloads[i]->name) == len && strncmp(workloads[i]->name, name, len) == 0)
            return workloads[i];
    return NULL;
}

/* Split "NAME:SIZE" and validate it; returns the workload or NULL with err filled. */
static const wk_workload *parse_item(const char *item, char *size, size_t sizelen, double *mem,
                                     char *err, size_t errlen)
{
    const char *colon = strchr(item, ':');
    size_t nlen = colon ? (size_t)(colon - item) : strlen(item);
    const wk_workload *w = find(item, nlen);
    if (!w) {
        snprintf(err, errlen, "unknown workload '%.*s'", (int)nlen, item);
        return NULL;
    }
    snprintf(size, sizelen, "%s", colon ? colon + 1 : w->default_size);
    if (w->parse(size, mem, err, errlen) != 0)
        return NULL;
    return w;
}

static void print_list(void)
{
    puts("[");
    for (size_t i = 0; i < NWORKLOADS; i++) {
        const wk_workload *w = workloads[i];
        fputs("  {\"name\":", stdout);
        wk_json_string(w->name);
        fputs(",\"unit\":", stdout);
        wk_json_string(w->unit);
        fputs(",\"default_size\":", stdout);
        wk_json_string(w->default_size);
        fputs(",\"small_size\":", stdout);
        wk_json_string(w->small_size);
        fputs(",\"description\":", stdout);
        wk_json_string(w->description);
        printf("}%s\n", i + 1 < NWORKLOADS ? "," : "");
    }
    puts("]");
}

static int describe(const char *item)
{
    char size[256], err[256];
    double mem = 0;
    const wk_workload *w = parse_item(item, size, sizeof size, &mem, err, sizeof err);
    fputs("{\"valid\":", stdout);
    if (!w) {
        fputs("false,\"error\":", stdout);
        wk_json_string(err);
        puts("}");
        return 2;
    }
    fputs("true,\"name\":", stdout);
    wk_json_string(w->name);
    fputs(",\"size\":", stdout);
    wk_json_string(size);
    printf(",\"memory_per_rank_B\":%.0f}\n", mem);
    return 0;
}

static void emit_hello(MPI_Comm comm, int nprocs)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    char *all = NULL;
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0)
        all = wk_zalloc((size_t)nprocs * MPI_MAX_PROCESSOR_NAME);
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, comm);
    if (rank != 0)
        return;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl)
        *nl = 0;
    printf("{\"type\":\"hello\",\"program\":\"shoal-work\",\"ranks\":%d,\"mpi_library\":", nprocs);
    wk_json_string(lib);
    fputs(",\"hosts\":[", stdout);
    for (int i = 0; i < nprocs; i++) {
        if (i)
            putchar(',');
        wk_json_string(all + (size_t)i * MPI_MAX_PROCESSOR_NAME);
    }
    printf("],\"timer_resolution_s\":%.3g}\n", shoal_clock_resolution_s());
    fflush(stdout);
    free(all);
}

static void print_doubles(const char *key, const double *v, int n)
{
    printf(",\"%s\":[", key);
    for (int i = 0; i < n; i++)
        printf("%s%.9g", i ? "," : "", v[i]);
    putchar(']');
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This kernel's boot id, hashed to 52 bits (exact in a double): ranks that report the same
 * one read the same CLOCK_MONOTONIC, so their start times compare directly. */
static double clock_domain(void)
{
    char id[64] = "";
    FILE *fh = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (fh) {
        if (!fgets(id, sizeof id, fh))
            id[0] = '\0';
        fclose(fh);
    }
    return (double)(wk_fnv1a(WK_FNV_INIT, id, strlen(id)) >> 12);
}

static void run_one(const wk_workload *w, const char *size, const wk_opts *base, MPI_Comm comm)
{
    int rank, nprocs;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nprocs);
    wk_opts opts = *base;
    opts.size = size;
    wk_result res;
    memset(&res, 0, sizeof res);
    res.check = opts.check ? "pass" : "off";

    MPI_Barrier(comm);
    double t0 = shoal_now_s(), cpu0 = cpu_s();
    w->run(&opts, &res, comm);
    if (res.t_end == 0)
        res.t_end = shoal_now_s();
    /* CPU time of the whole run on each rank: it includes the check, so it is
     * reported only for runs without one; machine load does not inflate it. */
    double mine[6] = {res.compute_s, res.comm_s, res.serial_s, cpu_s() - cpu0, t0, clock_domain()};
    double *all = rank == 0 ? wk_alloc(sizeof(double) * 6 * (size_t)nprocs) : NULL;
    MPI_Gather(mine, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, comm);
    if (rank == 0) {
        double *compute = wk_alloc(sizeof(double) * (size_t)nprocs);
        double *comms = wk_alloc(sizeof(double) * (size_t)nprocs);
        double *cpus = wk_alloc(sizeof(double) * (size_t)nprocs);
        /* The run starts when the first rank starts: a rank released late from the barrier
         * (descheduled, or asleep under libshoalwait) must not hide the others' head start.
         * Only ranks on this kernel share its clock; elsewhere rank 0's start stands. */
        for (int i = 0; i < nprocs; i++) {
            compute[i] = all[6 * i];
            comms[i] = all[6 * i + 1];
            cpus[i] = opts.check ? 0.0 : all[6 * i + 3];
            if (all[6 * i + 5] == all[5] && all[6 * i + 4] < t0)
                t0 = all[6 * i + 4];
        }
        double elapsed = res.t_end - t0;
        /* A workload timed the way its reference times it (NPB IS: the longest
         * rank's own clock) reports that length; its window ends at rank 0's end. */
        if (res.elapsed_s > 0) {
            elapsed = res.elapsed_s;
            t0 = res.t_end - elapsed;
        }
        printf("{\"type\":\"result\",\"workload\":");
        wk_json_string(w->name);
        fputs(",\"size\":", stdout);
        wk_json_string(size);
        printf(",\"ranks\":%d,\"time_s\":%.9g,\"serial_s\":%.9g", nprocs, elapsed, res.serial_s);
        print_doubles("rank_compute_s", compute, nprocs);
        print_doubles("rank_comm_s", comms, nprocs);
        if (!opts.check)
            print_doubles("rank_cpu_s", cpus, nprocs);
        printf(",\"work\":%.17g,\"unit\":", res.work);
        wk_json_string(w->unit);
        printf(",\"throughput_per_s\":%.9g", elapsed > 0 ? res.work / elapsed : 0.0);
        fputs(",\"check\":", stdout);
        wk_json_string(res.check);
        fputs(",\"check_detail\":", stdout);
        wk_json_string(res.check_detail);
        printf(",\"digest\":\"%016llx\",\"t_start_mono_s\":%.9f,\"t_end_mono_s\":%.9f",
               (unsigned long long)res.digest, t0, res.t_end);
        printf(",\"extra\":{%s}}\n", res.extra);
        fflush(stdout);
        free(compute);
        free(comms);
        free(cpus);
        free(all);
    }
}

int main(int argc, char **argv)
{
    const char *runs = NULL, *describe_item = NULL;
    wk_opts opts = {.aes = "auto"};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--probe"))
            return wk_probe_cli(argc, argv, workloads, NWORKLOADS);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_next = i + 1 < argc;
        if (!strcmp(a, "--runs") && has_next)
            runs = argv[++i];
        else if (!strcmp(a, "--check"))
            opts.check = 1;
        else if (!strcmp(a, "--corrupt"))
            opts.corrupt = 1;
        else if (!strcmp(a, "--output") && has_next)
            opts.output_dir = argv[++i];
        else if (!strcmp(a, "--aes") && has_next)
            opts.aes = argv[++i];
        else if (!strcmp(a, "--list")) {
            print_list();
            return 0;
        } else if (!strcmp(a, "--describe") && has_next)
            describe_item = argv[++i];
        else {
            fprintf(stderr, "shoal-work: unknown or incomplete option '%s'\n%s", a, usage);
            return 2;
        }
    }
    if (describe_item)
        return describe(describe_item);
    if (!runs) {
        fputs(usage, stderr);
        return 2;
    }
    if (strcmp(opts.aes, "openssl") && strcmp(opts.aes, "software") && strcmp(opts.aes, "auto")) {
        fprintf(stderr, "shoal-work: --aes must be openssl, software or auto, not '%s'\n", opts.aes);
        return 2;
    }
    /* Validate every item before MPI starts, so bad input costs nothing. */
    char *list = strdup(runs);
    for (char *item = strtok(list, ","); item; item = strtok(NULL, ",")) {
        char size[256], err[256];
        double mem;
        if (!parse_item(item, size, sizeof size, &mem, err, sizeof err)) {
            fprintf(stderr, "shoal-work: %s\n", err);
            return 2;
        }
    }
    free(list);

    MPI_Init(&argc, &argv);
    int nprocs;
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    emit_hello(MPI_COMM_WORLD, nprocs);
    list = strdup(runs);
    char *save = NULL;
    for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char size[256], err[256];
        double mem;
        const wk_workload *w = parse_item(item, size, sizeof size, &mem, err, sizeof err);
        run_one(w, size, &opts, MPI_COMM_WORLD);
    }
    free(list);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        puts("{\"type\":\"done\"}");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
