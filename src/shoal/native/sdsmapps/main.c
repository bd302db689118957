/* shoal-sdsm: seed 003's S-DSM programs.
 *
 *   shoal-sdsm full  [--writes N] [--bytes B]          1 server + clients
 *   shoal-sdsm burst [--cycles C] [--writes N] [--pause S]
 *   shoal-sdsm lock  [--cycles C] [--hold S]
 *   shoal-sdsm hough [--impl sdsm|mpi|seq] [--size 256] [--thetas 1800]
 *                    [--threshold V] [--out DIR]
 *                    sdsm: 2 servers, 1 I/O, tasks; mpi: 1 I/O, tasks; seq: 1 rank
 *   shoal-sdsm video [--impl sdsm|mpi|seq] [--frames F] [--width 1280]
 *                    [--height 720] [--thetas 180] [--out FILE]
 *                    sdsm: 1 server, input, output, tasks; mpi: input, output, tasks
 *   shoal-sdsm stress [--seeds N] [--first S] [--ops K]   randomized, vs a model
 *   shoal-sdsm errors                                      defined error codes (3 ranks)
 *   shoal-sdsm deadlock                                    cross-home deadlock (4 ranks)
 *   common: [--sample S] CPU timeline period (0: none)
 * Rank 0 prints one JSON line (per-rank reports and CPU timelines). */
#define _GNU_SOURCE
#include "apps.h"

#include <stdlib.h>
#include <string.h>

static double number(const char *flag, const char *v, double lo, double hi)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= lo && x <= hi))
        die("%s %s: expected a number from %g to %g", flag, v, lo, hi);
    return x;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (argc < 2)
        die("usage: shoal-sdsm full|burst|lock|hough|video [options]");
    const char *app = argv[1];
    long seeds = 50, first = 0, ops = 200;
    opts_t o = {.impl = IMPL_SDSM, .writes = -1, .cycles = -1, .pause_s = -1, .hold_s = -1,
                .bytes = 4, .size = 256, .thetas = -1, .threshold = -1, .frames = 20,
                .width = 1280, .height = 720, .sample_s = 0.05};
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            die("%s needs a value", f);
        i++;
        if (!strcmp(f, "--impl")) {
            o.impl = !strcmp(v, "sdsm") ? IMPL_SDSM : !strcmp(v, "mpi") ? IMPL_MPI
                   : !strcmp(v, "seq") ? IMPL_SEQ : -1;
            if (o.impl < 0)
                die("--impl %s: use sdsm, mpi or seq", v);
        } else if (!strcmp(f, "--writes")) o.writes = (long)number(f, v, 0, 1e9);
        else if (!strcmp(f, "--cycles")) o.cycles = (long)number(f, v, 0, 1e6);
        else if (!strcmp(f, "--pause")) o.pause_s = number(f, v, 0, 3600);
        else if (!strcmp(f, "--hold")) o.hold_s = number(f, v, 0, 3600);
        else if (!strcmp(f, "--bytes")) o.bytes = (size_t)number(f, v, 4, 1e12);
        else if (!strcmp(f, "--size")) o.size = (int)number(f, v, 8, 8192);
        else if (!strcmp(f, "--thetas")) o.thetas = (int)number(f, v, 1, 36000);
        else if (!strcmp(f, "--threshold")) o.threshold = (int)number(f, v, 1, 1e9);
        else if (!strcmp(f, "--frames")) o.frames = (int)number(f, v, 1, 1e7);
        else if (!strcmp(f, "--width")) o.width = (int)number(f, v, 8, 16384);
        else if (!strcmp(f, "--height")) o.height = (int)number(f, v, 8, 16384);
        else if (!strcmp(f, "--sample")) o.sample_s = number(f, v, 0, 60);
        else if (!strcmp(f, "--out")) o.out = v;
        else if (!strcmp(f, "--seeds")) seeds = (long)number(f, v, 1, 1e7);
        else if (!strcmp(f, "--first")) first = (long)number(f, v, 0, 1e15);
        else if (!strcmp(f, "--ops")) ops = (long)number(f, v, 1, 1e7);
        else
            die("unknown option %s", f);
    }
    int rc;
    if (!strcmp(app, "full") || !strcmp(app, "burst") || !strcmp(app, "lock"))
        rc = run_patterns(app, &o);
    else if (!strcmp(app, "hough"))
        rc = run_hough(&o);
    else if (!strcmp(app, "video"))
        rc = run_video(&o);
    else if (!strcmp(app, "stress"))
        rc = run_stress((int)seeds, first, (int)ops);
    else if (!strcmp(app, "errors"))
        rc = run_errors();
    else if (!strcmp(app, "deadlock"))
        rc = run_deadlock();
    else
        die("unknown program '%s': use full, burst, lock, hough, video, stress, errors or deadlock", app);
    MPI_Finalize();
    return rc;
}
