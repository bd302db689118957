/* raytrace: a Tachyon-like ray tracer over a procedural scene of our own.
 *
 * Seed 002 §V renders Tachyon's SC98 scene with one rank per set-top box:
 * scanlines go round-robin over the ranks and every finished line is sent to
 * rank 0, which assembles the image. Here: a checkered mirror floor, a grid
 * of spheres (matte, glossy, mirror), two point lights with shadows,
 * reflections to depth 5, 2x2 samples per pixel. Every rank runs the same
 * code on the same inputs, so the image is byte-identical to the serial
 * render (checked under --check). Pixels/s. */
#include "work.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 5
#define GRID 5
#define NSPHERES (GRID * GRID + 1)

typedef struct { double x, y, z; } vec;

static vec v(double x, double y, double z) { return (vec){x, y, z}; }
static vec add(vec a, vec b) { return v(a.x + b.x, a.y + b.y, a.z + b.z); }
static vec sub(vec a, vec b) { return v(a.x - b.x, a.y - b.y, a.z - b.z); }
static vec scale(vec a, double s) { return v(a.x * s, a.y * s, a.z * s); }
static vec mul(vec a, vec b) { return v(a.x * b.x, a.y * b.y, a.z * b.z); }
static double dot(vec a, vec b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static vec norm(vec a) { return scale(a, 1.0 / sqrt(dot(a, a))); }

typedef struct { vec centre; double radius; vec colour; double reflect, shine; } sphere;

static sphere spheres[NSPHERES];
static const vec lights[2] = {{-6.0, 9.0, -4.0}, {7.0, 6.0, -8.0}};
static const double light_power[2] = {0.75, 0.45};

/* The scene: a GRID x GRID field of spheres of varied size and finish, one large mirror ball. */
static void build_scene(void)
{
    for (int i = 0; i < GRID; i++)
        for (int j = 0; j < GRID; j++) {
            sphere *s = &spheres[i * GRID + j];
            double r = 0.35 + 0.1 * ((i * 7 + j * 3) % 4);
            s->centre = v(-4.0 + 2.0 * j, r, 2.0 + 2.0 * i);
            s->radius = r;
            s->colour = v(0.3 + 0.6 * ((i + 2 * j) % 3 == 0), 0.3 + 0.6 * ((2 * i + j) % 3 == 1),
                          0.3 + 0.6 * ((i + j) % 3 == 2));
            s->reflect = ((i + j) % 4 == 0) ? 0.6 : 0.15;
            s->shine = 20.0 + 30.0 * ((i * j) % 3);
        }
    spheres[NSPHERES - 1] = (sphere){v(0.0, 2.5, 13.0), 2.5, v(0.9, 0.9, 0.9), 0.8, 80.0};
}

/* Nearest hit along o + t d (t > eps): sphere index, NSPHERES for the floor, -1 for none. */
static int hit(vec o, vec d, double *t_out)
{
    double best = 1e30;
    int which = -1;
    for (int i = 0; i < NSPHERES; i++) {
        vec oc = sub(o, spheres[i].centre);
        double b = dot(oc, d), c = dot(oc, oc) - spheres[i].radius * spheres[i].radius;
        double disc = b * b - c;
        if (disc <= 0)
            continue;
        double sq = sqrt(disc), t = -b - sq;
        if (t < 1e-6)
            t = -b + sq;
        if (t > 1e-6 && t < best)
            best = t, which = i;
    }
    if (d.y < -1e-9) {
        double t = -o.y / d.y;
        if (t > 1e-6 && t < best)
            best = t, which = NSPHERES;
    }
    *t_out = best;
    return which;
}

static vec trace(vec o, vec d, int depth)
{
    double t;
    int which = hit(o, d, &t);
    if (which < 0) /* sky: a vertical gradient */
        return add(scale(v(0.55, 0.7, 0.95), 1.0 - 0.5 * d.y), scale(v(0.2, 0.2, 0.3), d.y));
    vec p = add(o, scale(d, t)), n, colour;
    double reflect, shine;
    if (which == NSPHERES) {
        n = v(0, 1, 0);
        int check = ((int)floor(p.x) + (int)floor(p.z)) & 1;
        colour = check ? v(0.85, 0.85, 0.8) : v(0.15, 0.15, 0.2);
        reflect = 0.3;
        shine = 10.0;
    } else {
        n = norm(sub(p, spheres[which].centre));
        colour = spheres[which].colour;
        reflect = spheres[which].reflect;
        shine = spheres[which].shine;
    }
    vec result = scale(colour, 0.08); /* ambient */
    for (int l = 0; l < 2; l++) {
        vec to_light = sub(lights[l], p);
        double dist = sqrt(dot(to_light, to_light));
        vec ldir = scale(to_light, 1.0 / dist);
        double lambert = dot(n, ldir);
        if (lambert <= 0)
            continue;
        double ts;
        int blocker = hit(p, ldir, &ts);
        if (blocker >= 0 && ts < dist)
            continue; /* in shadow */
        vec h = norm(sub(ldir, d));
        double spec = pow(fmax(dot(n, h), 0.0), shine);
        result = add(result, scale(add(scale(colour, lambert), v(spec, spec, spec)), light_power[l]));
    }
    if (depth < MAX_DEPTH && reflect > 0) {
        vec r = sub(d, scale(n, 2.0 * dot(d, n)));
        result = add(scale(result, 1.0 - reflect), mul(scale(trace(p, r, depth + 1), reflect), v(1, 1, 1)));
    }
    return result;
}

static unsigned char to_byte(double c)
{
    c = c < 0 ? 0 : c > 1 ? 1 : c;
    return (unsigned char)(c * 255.0 + 0.5);
}

/* One scanline (y = 0 at the top), 2x2 samples per pixel, RGB bytes. */
static void render_row(int w, int h, int y, unsigned char *out)
{
    const vec eye = v(0.0, 3.0, -6.0);
    const double aspect = (double)w / h, fov = 0.8;
    for (int x = 0; x < w; x++) {
        vec sum = v(0, 0, 0);
        for (int sy = 0; sy < 2; sy++)
            for (int sx = 0; sx < 2; sx++) {
                double u = ((x + 0.25 + 0.5 * sx) / w * 2.0 - 1.0) * aspect * fov;
                double vv = (1.0 - (y + 0.25 + 0.5 * sy) / h * 2.0) * fov;
                vec d = norm(v(u, vv - 0.25, 1.0));
                sum = add(sum, trace(eye, d, 0));
            }
        out[3 * x] = to_byte(sum.x / 4);
        out[3 * x + 1] = to_byte(sum.y / 4);
        out[3 * x + 2] = to_byte(sum.z / 4);
    }
}

static int rt_dims(const char *size, int *w, int *h)
{
    char *end;
    long a = strtol(size, &end, 10), b = a;
    if (*end == 'x')
        b = strtol(end + 1, &end, 10);
    if (*end || a < 8 || b < 8 || a > 16384 || b > 16384)
        return -1;
    *w = (int)a;
    *h = (int)b;
    return 0;
}

static int rt_parse(const char *size, double *mem, char *err, size_t n)
{
    int w, h;
    if (rt_dims(size, &w, &h)) {
        snprintf(err, n, "raytrace size '%s': give the image side (512) or WIDTHxHEIGHT, 8..16384", size);
        return -1;
    }
    *mem = 3.0 * w * h; /* rank 0 holds the image (twice under --check) */
    return 0;
}

#ifndef WK_PROBE_ONLY /* the MPI part: left out of shoal-guest-probe */
static void rt_run(const wk_opts *opts, wk_result *res, MPI_Comm comm)
{
    int rank, p, w, h;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    rt_dims(opts->size, &w, &h);
    build_scene();
    size_t row_B = 3 * (size_t)w;
    unsigned char *image = rank == 0 ? wk_alloc(row_B * (size_t)h) : NULL;
    unsigned char *row = wk_alloc(row_B);

    /* Rows round-robin over ranks; each finished row goes to rank 0 at once. Rank 0 posts
     * a receive for every other rank's row up front, straight into the image, and lets MPI
     * progress them between its own rows: a sender never waits for rank 0 to finish rendering
     * (over TCP a blocked send would idle that rank for most of rank 0's share). */
    int remote = rank == 0 ? h - (h + p - 1) / p : 0;
    MPI_Request *pending = remote ? wk_alloc(sizeof(MPI_Request) * (size_t)remote) : NULL;
    for (int y = 0, i = 0; rank == 0 && y < h; y++)
        if (y % p != 0)
            MPI_Irecv(image + row_B * (size_t)y, (int)row_B, MPI_UNSIGNED_CHAR, y % p, y, comm,
                      &pending[i++]);
    for (int y = rank; y < h; y += p) {
        double t = wk_now();
        render_row(w, h, y, rank == 0 ? image + row_B * (size_t)y : row);
        res->compute_s += wk_now() - t;
        t = wk_now();
        if (rank != 0) {
            MPI_Send(row, (int)row_B, MPI_UNSIGNED_CHAR, 0, y, comm);
        } else if (remote) {
            int all_done;
            MPI_Testall(remote, pending, &all_done, MPI_STATUSES_IGNORE);
        }
        res->comm_s += wk_now() - t;
    }
    if (rank == 0) {
        double t = wk_now();
        if (remote)
            MPI_Waitall(remote, pending, MPI_STATUSES_IGNORE);
        free(pending);
        res->comm_s += wk_now() - t;
        /* Rank 0 alone: the finished image's digest, and the image written where Tachyon writes
         * its file: to the cluster's file server where there is one (seed 002's NFS). */
        t = wk_now();
        res->digest = wk_fnv1a(WK_FNV_INIT, image, row_B * (size_t)h);
        char ppm[48];
        int ppm_n = snprintf(ppm, sizeof ppm, "P6\n%d %d\n255\n", w, h);
        long stored = wk_store(res, "image.ppm", ppm, (size_t)ppm_n, image, row_B * (size_t)h);
        res->serial_s += wk_now() - t;
        wk_timed_end(res);
        res->work = (double)w * h;
        wk_extra(res, "\"width\":%d,\"height\":%d,\"samples_per_pixel\":4,\"max_depth\":%d,\"stored_B\":%ld",
                 w, h, MAX_DEPTH, stored > 0 ? stored : 0);
        if (opts->corrupt) {
            image[row_B * (size_t)(h / 2) + 3 * (size_t)(w / 2)] ^= 0x40;
            res->digest = wk_fnv1a(WK_FNV_INIT, image, row_B * (size_t)h);
        }
        if (opts->output_dir) {
            FILE *fh = wk_open_text(opts, "image.ppm");
            if (fh) {
                fputs(ppm, fh);
                fwrite(image, 1, row_B * (size_t)h, fh);
                fclose(fh);
            }
        }
        if (opts->check) {
            unsigned char *ref = wk_alloc(row_B);
            for (int y = 0; y < h; y++) {
                render_row(w, h, y, ref);
                if (memcmp(ref, image + row_B * (size_t)y, row_B) != 0) {
                    int x = 0;
                    while (ref[x] == image[row_B * (size_t)y + x])
                        x++;
                    wk_fail(res, "pixel (%d, %d) differs from the serial render", x / 3, y);
                    break;
                }
            }
            free(ref);
        }
        free(image);
    }
    free(row);
}

#endif /* WK_PROBE_ONLY */

/* --probe: every 8th row of the 512x512 image, starting at row part mod 8 (the rows of a
 * whole render, in eight equal shares). */
static void rt_probe(long part, double *units)
{
    enum { SIDE = 512, STRIDE = 8 };
    static unsigned char row[3 * SIDE];
    build_scene();
    for (int y = (int)(part % STRIDE); y < SIDE; y += STRIDE)
        render_row(SIDE, SIDE, y, row);
    *units = (double)SIDE * SIDE / STRIDE;
}

WK_WORKLOAD_PROBED(raytrace, "pixel", "1024", "48", rt_parse, rt_run, rt_probe,
            "ray tracer (seed 002, Tachyon-like): rows round-robin, each row sent to rank 0; pixels/s");
