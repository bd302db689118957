/* Videostream (seed 003 §5): 1280x720 8-bit frames, each through a 3x3 edge
 * detection and a Hough transform, output in frame order.
 *   seq   one rank: synthesize, process, hash
 *   mpi   rank 0 reads (synthesizes) and sends frame f to task f mod T,
 *         tasks process and send to rank 1, which restores the order
 *   sdsm  rank 0 serves; rank 1 is input/scheduling, rank 2 output, the
 *         rest are tasks. Per task an input and an output chunk (one frame
 *         each) and two zero-byte "taken" chunks; everyone waits for a newer
 *         version (publish-subscribe), never polls.
 * Output (--out FILE): the frames, concatenated; the JSON line carries the
 * FNV-1a hash of all of them (on the output rank's report). */
#define _GNU_SOURCE
#include "apps.h"
#include "imaging.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    hough_t h;
    int w, hgt;
    size_t bytes;
    uint32_t *acc;
    uint8_t *edges;
    FILE *out;
} ctx_t;

static void emit(ctx_t *c, report_t *me, const uint8_t *frame)
{
    me->hash = fnv1a(me->hash, frame, c->bytes);
    me->frames++;
    if (c->out && fwrite(frame, 1, c->bytes, c->out) != c->bytes)
        die("cannot write the output frames");
}

static void work(ctx_t *c, report_t *me, const uint8_t *in, uint8_t *out)
{
    double t0 = now_s();
    process_frame(&c->h, in, c->w, c->hgt, out, c->acc, c->edges);
    me->compute_s += now_s() - t0;
}

static void run_seq(const opts_t *o, ctx_t *c, report_t *me)
{
    uint8_t *in = malloc(c->bytes), *out = malloc(c->bytes);
    for (int f = 0; f < o->frames; f++) {
        synth_frame(in, c->w, c->hgt, f);
        work(c, me, in, out);
        emit(c, me, out);
    }
}

static void timed_recv(void *buf, size_t n, int from, int tag, report_t *me)
{
    double t0 = now_s();
    MPI_Recv(buf, (int)n, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    me->wait_s += now_s() - t0;
}

static void timed_send(const void *buf, size_t n, int to, int tag, report_t *me)
{
    double t0 = now_s();
    MPI_Send(buf, (int)n, MPI_BYTE, to, tag, MPI_COMM_WORLD);
    me->wait_s += now_s() - t0;
}

static void run_mpi(const opts_t *o, ctx_t *c, report_t *me)
{
    int tasks = world_size - 2;
    uint8_t *in = malloc(c->bytes), *out = malloc(c->bytes);
    if (world_rank == 0) {
        me->role = ROLE_INPUT;
        for (int f = 0; f < o->frames; f++) {
            synth_frame(in, c->w, c->hgt, f);
            timed_send(in, c->bytes, 2 + f % tasks, 1, me);
        }
    } else if (world_rank == 1) {
        me->role = ROLE_OUTPUT;
        for (int f = 0; f < o->frames; f++) {
            timed_recv(out, c->bytes, 2 + f % tasks, 2, me);
            emit(c, me, out);
        }
    } else {
        me->role = ROLE_TASK;
        for (int f = world_rank - 2; f < o->frames; f += tasks) {
            timed_recv(in, c->bytes, 0, 1, me);
            work(c, me, in, out);
            timed_send(out, c->bytes, 1, 2, me);
        }
    }
}

/* Block until chunk ch has at least version `want`; *have tracks what we saw. */
static void await(sdsm_t *s, sdsm_chunk_t ch, uint64_t want, uint64_t *have)
{
    while (*have < want)
        check(sdsm_wait_newer(s, ch, *have, have), "wait_newer");
}

static void bump(sdsm_t *s, sdsm_chunk_t ch)
{
    check(sdsm_acquire_write(s, ch, NULL, NULL), "signal");
    check(sdsm_release(s, ch, SDSM_DIRTY), "signal");
}

static void run_sdsm(const opts_t *o, ctx_t *c, report_t *me)
{
    int tasks = world_size - 3;
    sdsm_t *s;
    check(sdsm_init(MPI_COMM_WORLD, 1, &s), "sdsm_init");
    sdsm_region_t inr, outr, taken_in, taken_out;
    check(sdsm_alloc(s, tasks, c->bytes, SDSM_PLACE_CYCLIC, &inr), "alloc input frames");
    check(sdsm_alloc(s, tasks, c->bytes, SDSM_PLACE_CYCLIC, &outr), "alloc output frames");
    check(sdsm_alloc(s, tasks, 0, SDSM_PLACE_CYCLIC, &taken_in), "alloc signals");
    check(sdsm_alloc(s, tasks, 0, SDSM_PLACE_CYCLIC, &taken_out), "alloc signals");
    uint64_t *seen = calloc(tasks, sizeof *seen);
    int who = sdsm_client_index(s);
    if (sdsm_is_server(s)) {
        me->role = ROLE_SERVER;
        check(sdsm_serve(s), "serve");
    } else if (who == 0) {
        me->role = ROLE_INPUT;
        for (int f = 0; f < o->frames; f++) {
            int t = f % tasks;
            uint64_t k = (uint64_t)(f / tasks);
            await(s, sdsm_chunk(taken_in, t), k, &seen[t]);   /* task took frame k-1 */
            void *p;
            check(sdsm_acquire_write(s, sdsm_chunk(inr, t), &p, NULL), "write frame");
            synth_frame(p, c->w, c->hgt, f);
            check(sdsm_release(s, sdsm_chunk(inr, t), SDSM_DIRTY), "publish frame");
        }
    } else if (who == 1) {
        me->role = ROLE_OUTPUT;
        for (int f = 0; f < o->frames; f++) {
            int t = f % tasks;
            uint64_t k = (uint64_t)(f / tasks);
            await(s, sdsm_chunk(outr, t), k + 1, &seen[t]);
            const void *p;
            check(sdsm_acquire_read(s, sdsm_chunk(outr, t), &p, NULL), "read result");
            emit(c, me, p);
            check(sdsm_release(s, sdsm_chunk(outr, t), SDSM_CLEAN), "release result");
            bump(s, sdsm_chunk(taken_out, t));
        }
    } else {
        me->role = ROLE_TASK;
        int t = who - 2;
        uint8_t *in = malloc(c->bytes), *out = malloc(c->bytes);
        uint64_t vin = 0, vout = 0;
        for (int f = t, k = 0; f < o->frames; f += tasks, k++) {
            await(s, sdsm_chunk(inr, t), (uint64_t)k + 1, &vin);
            const void *p;
            check(sdsm_acquire_read(s, sdsm_chunk(inr, t), &p, NULL), "read frame");
            memcpy(in, p, c->bytes);
            check(sdsm_release(s, sdsm_chunk(inr, t), SDSM_CLEAN), "release frame");
            bump(s, sdsm_chunk(taken_in, t));
            work(c, me, in, out);
            await(s, sdsm_chunk(taken_out, t), (uint64_t)k, &vout);   /* output took k-1 */
            void *q;
            check(sdsm_acquire_write(s, sdsm_chunk(outr, t), &q, NULL), "write result");
            memcpy(q, out, c->bytes);
            check(sdsm_release(s, sdsm_chunk(outr, t), SDSM_DIRTY), "publish result");
        }
    }
    fill_report(me, s, 0, 0);
    check(finalize_report(me, &s), "sdsm_finalize");
}

int run_video(const opts_t *o)
{
    check_ranks("video", o->impl, 3, "input, output and a task", 4,
                "a server, input, output and a task");
    ctx_t c = {.w = o->width, .hgt = o->height};
    c.bytes = (size_t)o->width * o->height;
    hough_setup(&c.h, c.w, c.hgt, o->thetas > 0 ? o->thetas : 180);
    c.acc = malloc(sizeof *c.acc * (size_t)c.h.nrho * c.h.thetas);
    c.edges = malloc(c.bytes);
    report_t me;
    memset(&me, 0, sizeof me);
    me.hash = FNV_START;
    me.role = ROLE_SEQ;
    int writes_output = o->impl == IMPL_SEQ || (o->impl == IMPL_MPI && world_rank == 1) ||
                        (o->impl == IMPL_SDSM && world_rank == 2);
    if (o->out && writes_output && !(c.out = fopen(o->out, "wb")))
        die("cannot write %s", o->out);
    MPI_Barrier(MPI_COMM_WORLD);
    timeline_start(o->sample_s);
    double t0 = now_s(), c0 = cpu_s();
    if (o->impl == IMPL_SEQ)
        run_seq(o, &c, &me);
    else if (o->impl == IMPL_MPI)
        run_mpi(o, &c, &me);
    else
        run_sdsm(o, &c, &me);
    if (c.out)
        fclose(c.out);
    double lib = me.lib_s, wait = me.wait_s;
    fill_report(&me, NULL, t0, c0);
    me.lib_s = lib;
    me.wait_s = wait;
    if (!me.frames)
        me.hash = 0;
    char extra[256];
    snprintf(extra, sizeof extra, "\"frames\": %d, \"width\": %d, \"height\": %d, \"thetas\": %d, "
             "\"seed_messages\": 52000, \"seed_frames\": 1730", o->frames, c.w, c.hgt, c.h.thetas);
    finish("video", o, &me, extra);
    return 0;
}
