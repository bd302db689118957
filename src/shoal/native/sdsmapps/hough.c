/* Hough (seed 003 §5): a 256x256 input, a 1800x724 accumulator (724 lines
 * of 1800 cells), an output image of the detected lines.
 *   seq   one rank does everything
 *   mpi   rank 0 (I/O) broadcasts the input, tasks vote on their lines,
 *         MPI_Reduce sums the accumulators, rank 0 finds peaks and renders
 *   sdsm  ranks 0-1 serve, rank 2 is the I/O task, the rest are tasks; input,
 *         accumulator and output are regions with one chunk per line; tasks
 *         take input lines eagerly from a shared counter and write every
 *         accumulator line their votes touch (contention by design), then
 *         take accumulator lines for peaks and output lines to render
 * Output (--out DIR): accumulator.bin (uint32, little endian) and lines.pgm;
 * the JSON line carries the FNV-1a hash of both. */
#define _GNU_SOURCE
#include "apps.h"
#include "imaging.h"

#include <stdlib.h>
#include <string.h>

#define PEAK_CAP 4000

typedef struct { int32_t count, pad; peak_t p[PEAK_CAP]; } peakbox_t;

static void save(const opts_t *o, const hough_t *h, const uint32_t *acc, const uint8_t *img)
{
    if (!o->out)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/accumulator.bin", o->out);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(acc, sizeof *acc, (size_t)h->nrho * h->thetas, f) != (size_t)h->nrho * h->thetas)
        die("cannot write %s", path);
    fclose(f);
    snprintf(path, sizeof path, "%s/lines.pgm", o->out);
    f = fopen(path, "wb");
    if (!f)
        die("cannot write %s", path);
    fprintf(f, "P5\n%d %d\n255\n", o->size, o->size);
    fwrite(img, 1, (size_t)o->size * o->size, f);
    fclose(f);
}

static uint64_t digest(const hough_t *h, const uint32_t *acc, const uint8_t *img, int size)
{
    uint64_t d = fnv1a(FNV_START, acc, sizeof *acc * (size_t)h->nrho * h->thetas);
    return fnv1a(d, img, (size_t)size * size);
}

static int collect_peaks(const hough_t *h, const uint32_t *acc, int threshold, peak_t *p)
{
    int n = 0;
    for (int r = 0; r < h->nrho; r++) {
        n += hough_peaks_line(h, acc + (size_t)r * h->thetas, r, threshold, p + n, PEAK_CAP - n);
        if (n >= PEAK_CAP)
            die("more than %d accumulator cells reach the threshold %d; raise --threshold",
                PEAK_CAP, threshold);
    }
    return peaks_canonical(p, n);
}

static void finish_hough(const opts_t *o, const hough_t *h, report_t *me)
{
    char extra[256];
    snprintf(extra, sizeof extra, "\"size\": %d, \"thetas\": %d, \"accumulator_lines\": %d, "
             "\"seed_messages\": 1688000", o->size, h->thetas, h->nrho);
    finish("hough", o, me, extra);
}

static void run_seq(const opts_t *o, const hough_t *h, int threshold, report_t *me)
{
    int size = o->size;
    uint8_t *img = malloc((size_t)size * size), *outimg = malloc((size_t)size * size);
    uint32_t *acc = calloc((size_t)h->nrho * h->thetas, sizeof *acc);
    peak_t *p = malloc(sizeof *p * PEAK_CAP);
    synth_lines(img, size);
    double c0 = now_s();
    for (int y = 0; y < size; y++)
        hough_line(h, img + (size_t)y * size, size, y, acc);
    int n = collect_peaks(h, acc, threshold, p);
    for (int y = 0; y < size; y++)
        render_line(h, p, n, size, y, outimg + (size_t)y * size);
    me->compute_s = now_s() - c0;
    me->hash = digest(h, acc, outimg, size);
    save(o, h, acc, outimg);
}

static void run_mpi(const opts_t *o, const hough_t *h, int threshold, report_t *me)
{
    int size = o->size, tasks = world_size - 1;
    size_t cells = (size_t)h->nrho * h->thetas;
    uint8_t *img = malloc((size_t)size * size);
    uint32_t *acc = calloc(cells, sizeof *acc), *sum = world_rank == 0 ? calloc(cells, sizeof *sum) : NULL;
    if (world_rank == 0)
        synth_lines(img, size);
    MPI_Bcast(img, size * size, MPI_BYTE, 0, MPI_COMM_WORLD);
    double c0 = now_s();
    if (world_rank > 0)
        for (int y = world_rank - 1; y < size; y += tasks)
            hough_line(h, img + (size_t)y * size, size, y, acc);
    me->compute_s = now_s() - c0;
    MPI_Reduce(acc, sum, (int)cells, MPI_UINT32_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0) {
        peak_t *p = malloc(sizeof *p * PEAK_CAP);
        uint8_t *outimg = malloc((size_t)size * size);
        int n = collect_peaks(h, sum, threshold, p);
        for (int y = 0; y < size; y++)
            render_line(h, p, n, size, y, outimg + (size_t)y * size);
        me->hash = digest(h, sum, outimg, size);
        save(o, h, sum, outimg);
    }
}

/* Take the next index from a shared counter chunk. */
static uint32_t take(sdsm_t *s, sdsm_chunk_t counter)
{
    void *p;
    check(sdsm_acquire_write(s, counter, &p, NULL), "take");
    uint32_t v = (*(uint32_t *)p)++;
    check(sdsm_release(s, counter, SDSM_DIRTY), "take release");
    return v;
}

static void run_sdsm(const opts_t *o, const hough_t *h, int threshold, report_t *me)
{
    int size = o->size, tasks = world_size - 3;
    sdsm_t *s;
    check(sdsm_init(MPI_COMM_WORLD, 2, &s), "sdsm_init");
    sdsm_region_t in, acc, outr, ctl, box;
    check(sdsm_alloc(s, size, size, SDSM_PLACE_CYCLIC, &in), "alloc input");
    check(sdsm_alloc(s, h->nrho, sizeof(uint32_t) * h->thetas, SDSM_PLACE_CYCLIC, &acc), "alloc accumulator");
    check(sdsm_alloc(s, size, size, SDSM_PLACE_CYCLIC, &outr), "alloc output");
    /* counters for the three phases, "input ready", "tasks done" */
    check(sdsm_alloc(s, 5, sizeof(uint32_t), SDSM_PLACE_CYCLIC, &ctl), "alloc control");
    check(sdsm_alloc(s, 1, sizeof(peakbox_t), SDSM_PLACE_ON(1), &box), "alloc peaks");
    sdsm_chunk_t ready = sdsm_chunk(ctl, 3), done = sdsm_chunk(ctl, 4);
    size_t cells = (size_t)h->nrho * h->thetas;
    /* the tasks' own phase barrier (the I/O task sleeps in wait_newer meanwhile) */
    MPI_Comm taskcomm = MPI_COMM_NULL;
    if (!sdsm_is_server(s))
        MPI_Comm_split(sdsm_client_comm(s), sdsm_client_index(s) == 0 ? MPI_UNDEFINED : 0, 0,
                       &taskcomm);
    if (sdsm_is_server(s)) {
        me->role = ROLE_SERVER;
        check(sdsm_serve(s), "serve");
    } else if (sdsm_client_index(s) == 0) {
        me->role = ROLE_IO;
        uint8_t *img = malloc((size_t)size * size);
        synth_lines(img, size);
        for (int y = 0; y < size; y++) {
            void *p;
            check(sdsm_acquire_write(s, sdsm_chunk(in, y), &p, NULL), "write input");
            memcpy(p, img + (size_t)y * size, size);
            check(sdsm_release(s, sdsm_chunk(in, y), SDSM_DIRTY), "release input");
        }
        void *p;
        check(sdsm_acquire_write(s, ready, &p, NULL), "ready");
        check(sdsm_release(s, ready, SDSM_DIRTY), "ready");
        /* asleep until every task has finished (publish-subscribe) */
        uint64_t v = 0;
        while (v < (uint64_t)tasks)
            check(sdsm_wait_newer(s, done, v, &v), "wait done");
        uint32_t *all = malloc(cells * sizeof *all);
        uint8_t *outimg = malloc((size_t)size * size);
        for (int r = 0; r < h->nrho; r++) {
            const void *q;
            check(sdsm_acquire_read(s, sdsm_chunk(acc, r), &q, NULL), "read accumulator");
            memcpy(all + (size_t)r * h->thetas, q, sizeof *all * h->thetas);
            check(sdsm_release(s, sdsm_chunk(acc, r), SDSM_CLEAN), "release accumulator");
        }
        for (int y = 0; y < size; y++) {
            const void *q;
            check(sdsm_acquire_read(s, sdsm_chunk(outr, y), &q, NULL), "read output");
            memcpy(outimg + (size_t)y * size, q, size);
            check(sdsm_release(s, sdsm_chunk(outr, y), SDSM_CLEAN), "release output");
        }
        me->hash = digest(h, all, outimg, size);
        save(o, h, all, outimg);
    } else {
        me->role = ROLE_TASK;
        uint64_t v;
        check(sdsm_wait_newer(s, ready, 0, &v), "wait ready");
        uint32_t *local = calloc(cells, sizeof *local);
        double compute = 0;
        /* phase 1: vote, one input line at a time, into every accumulator line touched */
        for (uint32_t y; (y = take(s, sdsm_chunk(ctl, 0))) < (uint32_t)size;) {
            const void *row;
            check(sdsm_acquire_read(s, sdsm_chunk(in, y), &row, NULL), "read input");
            double c0 = now_s();
            int lo, hi;
            hough_line_span(h, row, size, (int)y, local, &lo, &hi);
            compute += now_s() - c0;
            check(sdsm_release(s, sdsm_chunk(in, y), SDSM_CLEAN), "release input");
            for (int r = lo; r <= hi; r++) {
                uint32_t *mine = local + (size_t)r * h->thetas;
                int any = 0;
                for (int t = 0; t < h->thetas && !any; t++)
                    any = mine[t] != 0;
                if (!any)
                    continue;
                void *line;
                check(sdsm_acquire_write(s, sdsm_chunk(acc, r), &line, NULL), "write accumulator");
                uint32_t *cell = line;
                for (int t = 0; t < h->thetas; t++)
                    cell[t] += mine[t];
                check(sdsm_release(s, sdsm_chunk(acc, r), SDSM_DIRTY), "release accumulator");
                memset(mine, 0, sizeof *mine * h->thetas);
            }
        }
        MPI_Barrier(taskcomm);
        /* phase 2: peaks of accumulator lines, appended to the shared box */
        peak_t found[PEAK_CAP];
        int nfound = 0;
        for (uint32_t r; (r = take(s, sdsm_chunk(ctl, 1))) < (uint32_t)h->nrho;) {
            const void *line;
            check(sdsm_acquire_read(s, sdsm_chunk(acc, r), &line, NULL), "read accumulator");
            nfound += hough_peaks_line(h, line, (int)r, threshold, found + nfound, PEAK_CAP - nfound);
            check(sdsm_release(s, sdsm_chunk(acc, r), SDSM_CLEAN), "release accumulator");
        }
        void *bp;
        check(sdsm_acquire_write(s, sdsm_chunk(box, 0), &bp, NULL), "peaks");
        peakbox_t *pb = bp;
        if (pb->count + nfound > PEAK_CAP)
            die("more than %d accumulator cells reach the threshold %d; raise --threshold",
                PEAK_CAP, threshold);
        memcpy(pb->p + pb->count, found, sizeof *found * nfound);
        pb->count += nfound;
        check(sdsm_release(s, sdsm_chunk(box, 0), SDSM_DIRTY), "peaks");
        MPI_Barrier(taskcomm);
        /* phase 3: render output lines from the canonical peaks */
        const void *cbp;
        check(sdsm_acquire_read(s, sdsm_chunk(box, 0), &cbp, NULL), "peaks");
        peakbox_t *all = malloc(sizeof *all);
        memcpy(all, cbp, sizeof *all);
        check(sdsm_release(s, sdsm_chunk(box, 0), SDSM_CLEAN), "peaks");
        int n = peaks_canonical(all->p, all->count);
        for (uint32_t y; (y = take(s, sdsm_chunk(ctl, 2))) < (uint32_t)size;) {
            void *line;
            check(sdsm_acquire_write(s, sdsm_chunk(outr, y), &line, NULL), "write output");
            double c0 = now_s();
            render_line(h, all->p, n, size, (int)y, line);
            compute += now_s() - c0;
            check(sdsm_release(s, sdsm_chunk(outr, y), SDSM_DIRTY), "release output");
        }
        me->compute_s = compute;
        void *dp;
        check(sdsm_acquire_write(s, done, &dp, NULL), "done");
        check(sdsm_release(s, done, SDSM_DIRTY), "done");
        MPI_Comm_free(&taskcomm);
    }
    fill_report(me, s, 0, 0);
    check(finalize_report(me, &s), "sdsm_finalize");
}

int run_hough(const opts_t *o)
{
    check_ranks("hough", o->impl, 2, "an I/O rank and a task", 4,
                "2 servers, an I/O task and a task");
    hough_t h;
    hough_setup(&h, o->size, o->size, o->thetas > 0 ? o->thetas : 1800);
    int threshold = o->threshold > 0 ? o->threshold : o->size / 3;
    report_t me;
    memset(&me, 0, sizeof me);
    me.role = o->impl == IMPL_SEQ ? ROLE_SEQ : world_rank == 0 ? ROLE_IO : ROLE_TASK;
    MPI_Barrier(MPI_COMM_WORLD);
    timeline_start(o->sample_s);
    double t0 = now_s(), c0 = cpu_s();
    if (o->impl == IMPL_SEQ)
        run_seq(o, &h, threshold, &me);
    else if (o->impl == IMPL_MPI)
        run_mpi(o, &h, threshold, &me);
    else
        run_sdsm(o, &h, threshold, &me);
    double lib = me.lib_s, wait = me.wait_s;
    fill_report(&me, NULL, t0, c0);
    me.lib_s = lib;
    me.wait_s = wait;
    finish_hough(o, &h, &me);
    return 0;
}
