/* videostream: edge detection and a Hough line transform per frame (seed 003 §5).
 *
 * A frame farm: rank 0 makes the frames (the serial part: the camera),
 * keeps WINDOW frames in flight per worker rank, processes frames itself
 * between arrivals, and puts the results back in frame order. Per frame:
 * 3x3 Sobel edges, integer Hough accumulator (0.25 degree steps, fixed-point
 * sin/cos), the TOP strongest lines (rho, theta, votes) with
 * non-maximum suppression. All integer, so every rank count gives the serial
 * lines exactly. Frames/s. */
#include "work.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHETA 720
#define TOP 8
#define WINDOW 2
#define EDGE_THRESHOLD 160
#define TAG_RESULT 1
#define TAG_STOP 2
#define TAG_FRAME 3

typedef struct { int frame; int line[TOP][3]; } vs_result; /* rho index, theta index, votes */

static int cos_q[NTHETA], sin_q[NTHETA];

static int vs_dims(const char *size, int *w, int *h, long *frames)
{
    char tail;
    if (sscanf(size, "%dx%dx%ld%c", w, h, frames, &tail) != 3)
        return -1;
    return (*w < 16 || *h < 16 || *w > 8192 || *h > 8192 || *frames < 1 || *frames > 1000000) ? -1 : 0;
}

static int vs_parse(const char *size, double *mem, char *err, size_t n)
{
    int w, h;
    long f;
    if (vs_dims(size, &w, &h, &f)) {
        snprintf(err, n, "videostream size '%s': give WIDTHxHEIGHTxFRAMES, e.g. 1280x720x30", size);
        return -1;
    }
    /* Rank 0: frames in flight, one accumulator. */
    double rho = sqrt((double)w * w + (double)h * h) + 2;
    *mem = (double)w * h * (WINDOW * 8 + 2) + 4.0 * NTHETA * (2 * rho + 1);
    return 0;
}

/* A frame: dark noise with six bright lines whose angles drift with the frame number. */
static void make_frame(long f, int w, int h, uint8_t *img)
{
    for (long i = 0; i < (long)w * h; i++)
        img[i] = (uint8_t)(20 + wk_mix((uint64_t)f * 0x100000001ULL + (uint64_t)i) % 24);
    for (int l = 0; l < 6; l++) {
        uint64_t r = wk_mix(0x11E5ULL * (uint64_t)(l + 1) + (uint64_t)f / 8);
        int x0 = (int)(r % (uint64_t)w), y0 = (int)((r >> 20) % (uint64_t)h);
        int dx = (int)((r >> 40) % 2001) - 1000, dy = (int)((r >> 52) % 2001) - 1000;
        dx += (int)(f % 8) * 17;
        if (dx == 0 && dy == 0)
            dx = 1000;
        int steps = 4 * (w > h ? w : h);
        for (int s = -steps; s <= steps; s++) {
            long x = x0 + (long)dx * s / 2000, y = y0 + (long)dy * s / 2000;
            for (int t = 0; t < 2; t++)
                if (x + t >= 0 && x + t < w && y >= 0 && y < h)
                    img[y * w + x + t] = 230;
        }
    }
}

/* poll (may be NULL) is called every few rows: rank 0 serves its workers while it works. */
static void process(const uint8_t *img, int w, int h, int *acc, int nrho, vs_result *out,
                    void (*poll)(void *), void *arg)
{
    int rho_off = nrho / 2;
    memset(acc, 0, sizeof(int) * (size_t)nrho * NTHETA);
    for (int y = 1; y < h - 1; y++) {
        if (poll && y % 8 == 0)
            poll(arg);
        for (int x = 1; x < w - 1; x++) {
            const uint8_t *p = img + (size_t)y * w + x;
            int gx = (p[-w + 1] + 2 * p[1] + p[w + 1]) - (p[-w - 1] + 2 * p[-1] + p[w - 1]);
            int gy = (p[w - 1] + 2 * p[w] + p[w + 1]) - (p[-w - 1] + 2 * p[-w] + p[-w + 1]);
            if (abs(gx) + abs(gy) < EDGE_THRESHOLD)
                continue;
            for (int t = 0; t < NTHETA; t++) {
                int rho = ((x * cos_q[t] + y * sin_q[t]) >> 12) + rho_off;
                acc[(size_t)rho * NTHETA + t]++;
            }
        }
    }
    /* Strongest lines; each pick clears its neighbourhood (+-8 rho, +-8 theta). */
    for (int k = 0; k < TOP; k++) {
        int best = -1, br = 0, bt = 0;
        for (int r = 0; r < nrho; r++)
            for (int t = 0; t < NTHETA; t++)
                if (acc[(size_t)r * NTHETA + t] > best)
                    best = acc[(size_t)r * NTHETA + t], br = r, bt = t;
        out->line[k][0] = br - rho_off, out->line[k][1] = bt, out->line[k][2] = best;
        for (int r = br - 8; r <= br + 8; r++)
            for (int t = bt - 8; t <= bt + 8; t++)
                if (r >= 0 && r < nrho)
                    acc[(size_t)r * NTHETA + (t + NTHETA) % NTHETA] = 0;
    }
}

#ifndef WK_PROBE_ONLY /* the MPI part: left out of shoal-guest-probe */
/* Rank 0's view of the farm: frames in flight per worker, results in frame order. */
typedef struct {
    MPI_Comm comm;
    wk_result *res;
    int w, h, workers;
    long frames, next, done;
    size_t frame_B;
    uint8_t *slot;      /* WINDOW frame buffers per worker */
    long *slot_frame;   /* frame in each buffer, -1 when free */
    MPI_Request *req;
    vs_result *results;
    double service_s;   /* time spent serving workers (kept out of rank 0's compute) */
} farm;

static void send_next(farm *fm, int worker, int s)
{
    double t = wk_now();
    make_frame(fm->next, fm->w, fm->h, fm->slot + fm->frame_B * (size_t)s);
    double made = wk_now();
    fm->res->serial_s += made - t;
    MPI_Isend(fm->slot + fm->frame_B * (size_t)s, (int)fm->frame_B, MPI_BYTE, worker, TAG_FRAME, fm->comm,
              &fm->req[s]);
    fm->res->comm_s += wk_now() - made;
    fm->slot_frame[s] = fm->next++;
}

/* Take every result that has arrived (wait for one if block), refilling each worker. */
static void serve(farm *fm, int block)
{
    double t0 = wk_now(), serial0 = fm->res->serial_s;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (block)
            MPI_Probe(MPI_ANY_SOURCE, TAG_RESULT, fm->comm, &st), flag = 1;
        else
            MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, fm->comm, &flag, &st);
        if (!flag)
            break;
        block = 0;
        vs_result out;
        int worker = st.MPI_SOURCE, s = -1;
        MPI_Recv(&out, (int)sizeof out, MPI_BYTE, worker, TAG_RESULT, fm->comm, MPI_STATUS_IGNORE);
        /* A worker answers its frames in order: the oldest it holds is this one. */
        for (int k = 0; k < WINDOW; k++) {
            int c = (worker - 1) * WINDOW + k;
            if (fm->slot_frame[c] >= 0 && (s < 0 || fm->slot_frame[c] < fm->slot_frame[s]))
                s = c;
        }
        MPI_Wait(&fm->req[s], MPI_STATUS_IGNORE);
        out.frame = (int)fm->slot_frame[s];
        fm->results[out.frame] = out;
        fm->slot_frame[s] = -1;
        fm->done++;
        if (fm->next < fm->frames)
            send_next(fm, worker, s);
    }
    double spent = wk_now() - t0;
    fm->service_s += spent;
    fm->res->comm_s += spent - (fm->res->serial_s - serial0);
}

static void poll_farm(void *arg) { serve(arg, 0); }

static void worker_loop(int w, int h, int *acc, int nrho, wk_result *res, MPI_Comm comm)
{
    uint8_t *img = wk_alloc((size_t)w * h);
    for (;;) {
        MPI_Status st;
        double t = wk_now();
        MPI_Probe(0, MPI_ANY_TAG, comm, &st);
        if (st.MPI_TAG == TAG_STOP) {
            MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_STOP, comm, MPI_STATUS_IGNORE);
            res->comm_s += wk_now() - t;
            break;
        }
        vs_result out;
        MPI_Recv(img, w * h, MPI_BYTE, 0, TAG_FRAME, comm, MPI_STATUS_IGNORE);
        res->comm_s += wk_now() - t;
        t = wk_now();
        process(img, w, h, acc, nrho, &out, NULL, NULL);
        res->compute_s += wk_now() - t;
        t = wk_now();
        out.frame = -1; /* rank 0 knows which frame: a worker answers in order */
        MPI_Send(&out, (int)sizeof out, MPI_BYTE, 0, TAG_RESULT, comm);
        res->comm_s += wk_now() - t;
    }
    free(img);
}

static void vs_run(const wk_opts *opts, wk_result *res, MPI_Comm comm)
{
    int rank, p, w, h;
    long frames;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    vs_dims(opts->size, &w, &h, &frames);
    for (int t = 0; t < NTHETA; t++) { /* fixed point, 12 fractional bits */
        double a = M_PI * t / NTHETA;
        cos_q[t] = (int)lround(cos(a) * 4096.0);
        sin_q[t] = (int)lround(sin(a) * 4096.0);
    }
    int nrho = 2 * ((int)ceil(sqrt((double)w * w + (double)h * h)) + 2) + 1;
    int *acc = wk_alloc(sizeof(int) * (size_t)nrho * NTHETA);
    if (rank != 0) {
        worker_loop(w, h, acc, nrho, res, comm);
        free(acc);
        return;
    }

    farm fm = {.comm = comm, .res = res, .w = w, .h = h, .workers = p - 1, .frames = frames,
               .frame_B = (size_t)w * h};
    int slots = fm.workers * WINDOW;
    fm.results = wk_alloc(sizeof(vs_result) * (size_t)frames);
    fm.slot = wk_alloc(fm.frame_B * (size_t)(slots ? slots : 1));
    fm.slot_frame = wk_alloc(sizeof(long) * (size_t)(slots ? slots : 1));
    fm.req = wk_alloc(sizeof(MPI_Request) * (size_t)(slots ? slots : 1));
    uint8_t *local = wk_alloc(fm.frame_B);
    for (int s = 0; s < slots; s++)
        fm.slot_frame[s] = -1, fm.req[s] = MPI_REQUEST_NULL;
    for (int k = 0; k < WINDOW; k++)
        for (int worker = 1; worker <= fm.workers && fm.next < frames; worker++)
            send_next(&fm, worker, (worker - 1) * WINDOW + k);
    while (fm.done < frames) {
        serve(&fm, fm.next >= frames);
        if (fm.next < frames) { /* a frame of rank 0's own, serving workers as it goes */
            long f = fm.next++;
            double t = wk_now();
            make_frame(f, w, h, local);
            res->serial_s += wk_now() - t;
            double service0 = fm.service_s;
            t = wk_now();
            process(local, w, h, acc, nrho, &fm.results[f], fm.workers ? poll_farm : NULL, &fm);
            res->compute_s += wk_now() - t - (fm.service_s - service0);
            fm.results[f].frame = (int)f;
            fm.done++;
        }
    }
    double t = wk_now();
    for (int worker = 1; worker <= fm.workers; worker++)
        MPI_Send(NULL, 0, MPI_BYTE, worker, TAG_STOP, comm);
    res->comm_s += wk_now() - t;
    t = wk_now();
    res->digest = wk_fnv1a(WK_FNV_INIT, fm.results, sizeof(vs_result) * (size_t)frames);
    res->serial_s += wk_now() - t;
    wk_timed_end(res);
    res->work = (double)frames;
    wk_extra(res, "\"width\":%d,\"height\":%d,\"frames\":%ld,\"frame_B\":%zu,\"theta_steps\":%d,"
             "\"lines_per_frame\":%d", w, h, frames, fm.frame_B, NTHETA, TOP);
    vs_result *results = fm.results;
    if (opts->corrupt)
        results[frames / 2].line[0][2] += 1;
    if (opts->output_dir) {
        FILE *fh = wk_open_text(opts, "lines.tsv");
        for (long f = 0; fh && f < frames; f++)
            for (int k = 0; k < TOP; k++)
                fprintf(fh, "%ld\t%d\t%d\t%d\n", f, results[f].line[k][0], results[f].line[k][1],
                        results[f].line[k][2]);
        if (fh)
            fclose(fh);
        make_frame(0, w, h, local);
        fh = wk_open_text(opts, "frame0.pgm");
        if (fh) {
            fprintf(fh, "P5\n%d %d\n255\n", w, h);
            fwrite(local, 1, fm.frame_B, fh);
            fclose(fh);
        }
    }
    if (opts->check)
        for (long f = 0; f < frames; f++) {
            vs_result ref;
            make_frame(f, w, h, local);
            process(local, w, h, acc, nrho, &ref, NULL, NULL);
            if (memcmp(ref.line, results[f].line, sizeof ref.line) != 0) {
                wk_fail(res, "frame %ld: lines differ from the serial run's", f);
                break;
            }
        }
    free(results), free(local), free(fm.slot), free(fm.slot_frame), free(fm.req), free(acc);
}

#endif /* WK_PROBE_ONLY */

/* --probe: one frame of the default size, made and processed (what one worker does per frame,
 * with the camera's part); always the same frame, so every part costs the same (frames differ
 * by their edges' lengths, up to 30 %). */
static void vs_probe(long part, double *units)
{
    enum { W = 640, H = 360 };
    static uint8_t img[W * H];
    static int *acc, nrho;
    static vs_result out;
    if (!acc) {
        for (int t = 0; t < NTHETA; t++) {
            double a = M_PI * t / NTHETA;
            cos_q[t] = (int)lround(cos(a) * 4096.0);
            sin_q[t] = (int)lround(sin(a) * 4096.0);
        }
        nrho = 2 * ((int)ceil(sqrt((double)W * W + (double)H * H)) + 2) + 1;
        acc = wk_alloc(sizeof(int) * (size_t)nrho * NTHETA);
    }
    (void)part;
    make_frame(0, W, H, img);
    process(img, W, H, acc, nrho, &out, NULL, NULL);
    *units = 1;
}

WK_WORKLOAD_PROBED(videostream, "frame", "640x360x32", "96x64x6", vs_parse, vs_run, vs_probe,
            "video stream (seed 003): Sobel edges and a Hough line transform per frame, a frame "
            "farm from rank 0; frames/s");
