/* Image kernels (see imaging.h). Integer or fixed-order floating point only,
 * so every program computes identical bytes. */
#include "imaging.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void hough_setup(hough_t *h, int width, int height, int thetas)
{
    h->thetas = thetas;
    /* rho in +-diagonal; 256x256 gives 724 lines, seed 003's intermediate height */
    h->nrho = (int)(2.0 * sqrt((double)width * width + (double)height * height) / 1.0);
    h->cos_t = malloc(sizeof(double) * thetas);
    h->sin_t = malloc(sizeof(double) * thetas);
    for (int t = 0; t < thetas; t++) {
        double a = M_PI * t / thetas;
        h->cos_t[t] = cos(a);
        h->sin_t[t] = sin(a);
    }
}

static inline int rho_index(const hough_t *h, int x, int y, int t)
{
    return (int)lround(x * h->cos_t[t] + y * h->sin_t[t]) + h->nrho / 2;
}

void hough_line_span(const hough_t *h, const uint8_t *row, int width, int y, uint32_t *acc,
                     int *lo, int *hi)
{
    int a = h->nrho, b = -1;
    for (int x = 0; x < width; x++) {
        if (!row[x])
            continue;
        for (int t = 0; t < h->thetas; t++) {
            int r = rho_index(h, x, y, t);
            if (r < 0 || r >= h->nrho)
                continue;
            acc[(size_t)r * h->thetas + t]++;
            if (r < a) a = r;
            if (r > b) b = r;
        }
    }
    *lo = a;
    *hi = b;
}

void hough_line(const hough_t *h, const uint8_t *row, int width, int y, uint32_t *acc)
{
    int lo, hi;
    hough_line_span(h, row, width, y, acc, &lo, &hi);
}

int hough_peaks_line(const hough_t *h, const uint32_t *line, int r, int threshold,
                     peak_t *out, int max)
{
    int n = 0;
    for (int t = 0; t < h->thetas && n < max; t++)
        if (line[t] >= (uint32_t)threshold)
            out[n++] = (peak_t){r, t, (int32_t)line[t], 0};
    return n;
}

static int peak_cmp(const void *a, const void *b)
{
    const peak_t *p = a, *q = b;
    if (p->votes != q->votes)
        return p->votes > q->votes ? -1 : 1;
    if (p->rho != q->rho)
        return p->rho < q->rho ? -1 : 1;
    return (p->theta > q->theta) - (p->theta < q->theta);
}

int peaks_canonical(peak_t *p, int n)
{
    qsort(p, n, sizeof *p, peak_cmp);
    return n < MAX_PEAKS ? n : MAX_PEAKS;
}

void render_line(const hough_t *h, const peak_t *p, int n, int width, int y, uint8_t *out)
{
    memset(out, 0, width);
    for (int i = 0; i < n; i++) {
        double c = h->cos_t[p[i].theta], s = h->sin_t[p[i].theta];
        double rho = p[i].rho - h->nrho / 2;
        for (int x = 0; x < width; x++)
            if (fabs(x * c + y * s - rho) < 0.5)
                out[x] = 255;
    }
}

void synth_lines(uint8_t *img, int size)
{
    memset(img, 0, (size_t)size * size);
    /* a diagonal, a horizontal, a vertical and two slanted lines */
    for (int i = 0; i < size; i++) {
        img[(size_t)i * size + i] = 255;
        img[(size_t)(size / 3) * size + i] = 255;
        img[(size_t)i * size + (2 * size) / 3] = 255;
        int y = size - 1 - i / 2;
        img[(size_t)y * size + i] = 255;
        int x = (i * 3) / 4 + size / 8;
        if (x < size)
            img[(size_t)i * size + x] = 255;
    }
}

void synth_frame(uint8_t *img, int width, int height, int f)
{
    for (int y = 0; y < height; y++)
        for (int x = 0; x < width; x++)
            img[(size_t)y * width + x] = (uint8_t)((x + y + 2 * f) / 16 % 64);
    /* a rectangle and a bar moving across, a slanted band turning slowly */
    int rx = (f * 7) % (width - width / 5), ry = height / 4 + (f * 3) % (height / 3);
    for (int y = ry; y < ry + height / 5 && y < height; y++)
        for (int x = rx; x < rx + width / 5; x++)
            img[(size_t)y * width + x] = 200;
    int bx = width - 1 - (f * 11) % width;
    for (int y = 0; y < height; y++)
        for (int x = bx; x < bx + 6 && x < width; x++)
            img[(size_t)y * width + x] = 230;
    for (int x = 0; x < width; x++) {
        int y = height / 2 + (x - width / 2) * (f % 40 - 20) / 40;
        for (int d = 0; d < 4; d++)
            if (y + d >= 0 && y + d < height)
                img[(size_t)(y + d) * width + x] = 160;
    }
}

void process_frame(const hough_t *h, const uint8_t *in, int width, int height, uint8_t *out,
                   uint32_t *acc, uint8_t *edges)
{
    memset(edges, 0, (size_t)width * height);
    for (int y = 1; y < height - 1; y++)
        for (int x = 1; x < width - 1; x++) {
            const uint8_t *p = in + (size_t)y * width + x;
            int gx = -p[-width - 1] - 2 * p[-1] - p[width - 1] + p[-width + 1] + 2 * p[1] + p[width + 1];
            int gy = -p[-width - 1] - 2 * p[-width] - p[-width + 1] + p[width - 1] + 2 * p[width] + p[width + 1];
            edges[(size_t)y * width + x] = abs(gx) + abs(gy) > 240 ? 255 : 0;
        }
    memset(acc, 0, sizeof(uint32_t) * (size_t)h->nrho * h->thetas);
    for (int y = 0; y < height; y++)
        hough_line(h, edges + (size_t)y * width, width, y, acc);
    peak_t peaks[MAX_PEAKS * 4];
    int n = 0, threshold = width / 4;
    for (int r = 0; r < h->nrho && n < MAX_PEAKS * 4; r++)
        n += hough_peaks_line(h, acc + (size_t)r * h->thetas, r, threshold, peaks + n,
                              MAX_PEAKS * 4 - n);
    n = peaks_canonical(peaks, n);
    memcpy(out, edges, (size_t)width * height);
    /* detected lines drawn at 128 where there is no edge */
    for (int i = 0; i < n; i++) {
        double c = h->cos_t[peaks[i].theta], s = h->sin_t[peaks[i].theta];
        double rho = peaks[i].rho - h->nrho / 2;
        if (fabs(s) > 0.7) {
            for (int x = 0; x < width; x++) {
                int y = (int)lround((rho - x * c) / s);
                if (y >= 0 && y < height && !out[(size_t)y * width + x])
                    out[(size_t)y * width + x] = 128;
            }
        } else {
            for (int y = 0; y < height; y++) {
                int x = (int)lround((rho - y * s) / c);
                if (x >= 0 && x < width && !out[(size_t)y * width + x])
                    out[(size_t)y * width + x] = 128;
            }
        }
    }
}
