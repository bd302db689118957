/* --probe: the workloads' serial kernels timed on this core, no MPI (docs/cluster.md, "Host
 * speed"). shoal-work runs it on the host; shoal-guest-probe, built from the same kernels
 * without MPI, inside a virtual board's guest (docs/pallex.md, "The board's speed"). */
#include "work.h"
#include "shoal_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double probe_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const wk_workload *find_probed(const wk_workload *const *catalog, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(catalog[i]->name, name) == 0 && catalog[i]->probe)
            return catalog[i];
    return NULL;
}

/* The named kernels in turn over `rounds` rounds, each round doing the same parts of each
 * kernel (as many as the first round fitted in budget_s of CPU time); one sample (units, CPU s,
 * wall s) per kernel and round. CPU time is the core's own speed: another process on the same
 * CPU lengthens the wall time, not it. */
static int probe(const wk_workload *const *catalog, size_t ncat, const char *names, double budget_s,
                 int rounds)
{
    enum { MAX = 16 };
    const wk_workload *chosen[MAX];
    int n = 0;
    char *list = strdup(names);
    for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
        const wk_workload *w = find_probed(catalog, ncat, name);
        if (!w || n == MAX) {
            fprintf(stderr, "shoal-work: no probe for '%s'\n", name);
            return 2;
        }
        chosen[n++] = w;
    }
    free(list);
    double *units = wk_zalloc(sizeof(double) * 3 * MAX * (size_t)rounds);
    long parts[MAX] = {0};
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < n; k++) {
            double *out = units + 3 * ((size_t)k * rounds + r);
            double c0 = probe_cpu_s(), t0 = shoal_now_s(), done = 0, one;
            long i = 0;
            do {
                chosen[k]->probe(i++, &one);
                done += one;
            } while (r == 0 ? probe_cpu_s() - c0 < budget_s : i < parts[k]);
            parts[k] = i;
            out[0] = done, out[1] = probe_cpu_s() - c0, out[2] = shoal_now_s() - t0;
        }
    fputs("{\"probe\":[", stdout);
    for (int k = 0; k < n; k++) {
        fputs(k ? ",{\"name\":" : "{\"name\":", stdout);
        wk_json_string(chosen[k]->name);
        fputs(",\"unit\":", stdout);
        wk_json_string(chosen[k]->unit);
        fputs(",\"samples\":[", stdout);
        for (int r = 0; r < rounds; r++) {
            const double *x = units + 3 * ((size_t)k * rounds + r);
            printf("%s{\"units\":%.17g,\"cpu_s\":%.9g,\"wall_s\":%.9g}", r ? "," : "", x[0], x[1], x[2]);
        }
        fputs("]}", stdout);
    }
    puts("]}");
    free(units);
    return 0;
}

int wk_probe_cli(int argc, char **argv, const wk_workload *const *catalog, size_t n)
{
    const char *names = NULL;
    double probe_s = 0.1;
    int rounds = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_next = i + 1 < argc;
        if (!strcmp(a, "--probe") && has_next)
            names = argv[++i];
        else if (!strcmp(a, "--probe-s") && has_next)
            probe_s = atof(argv[++i]);
        else if (!strcmp(a, "--rounds") && has_next)
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "shoal-work: unknown or incomplete option '%s' (with --probe: --probe-s S, "
                            "--rounds R)\n", a);
            return 2;
        }
    }
    if (!names) {
        fputs("shoal-work: --probe LIST names the kernels to time (e.g. raytrace,videostream)\n", stderr);
        return 2;
    }
    if (!(probe_s > 0 && probe_s <= 60) || rounds < 1 || rounds > 100) {
        fputs("shoal-work: --probe-s must be in (0, 60] and --rounds in 1..100\n", stderr);
        return 2;
    }
    return probe(catalog, n, names, probe_s, rounds);
}
