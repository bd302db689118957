/* Image kernels shared by the sequential, plain-MPI and S-DSM programs, so
 * that their outputs can be compared byte for byte. */
#ifndef SDSM_IMAGING_H
#define SDSM_IMAGING_H

#include <stddef.h>
#include <stdint.h>

typedef struct { int32_t rho, theta, votes, pad; } peak_t;
#define MAX_PEAKS 64

typedef struct {
    int thetas, nrho;           /* accumulator: nrho lines of `thetas` cells */
    double *cos_t, *sin_t;
} hough_t;

void hough_setup(hough_t *h, int width, int height, int thetas);
/* Votes of the edge pixels (value != 0) of one image line into acc. */
void hough_line(const hough_t *h, const uint8_t *row, int width, int y, uint32_t *acc);
/* The same, reporting the first and last accumulator line touched. */
void hough_line_span(const hough_t *h, const uint8_t *row, int width, int y, uint32_t *acc,
                     int *lo, int *hi);
/* Cells of one accumulator line with at least `threshold` votes. */
int hough_peaks_line(const hough_t *h, const uint32_t *line, int rho_index, int threshold,
                     peak_t *out, int max);
/* Order peaks (votes desc, rho, theta) and keep the first MAX_PEAKS. */
int peaks_canonical(peak_t *p, int n);
/* Pixels of line y that lie on one of the peaks' lines (value 255). */
void render_line(const hough_t *h, const peak_t *p, int n, int width, int y, uint8_t *out);

/* Hough's deterministic 256x256 input: a few straight lines on black. */
void synth_lines(uint8_t *img, int size);
/* Videostream's frame f: moving shapes on a gradient, 8-bit gray. */
void synth_frame(uint8_t *img, int width, int height, int f);
/* One frame's processing: 3x3 edge detection, Hough, lines drawn at 128. */
void process_frame(const hough_t *h, const uint8_t *in, int width, int height, uint8_t *out,
                   uint32_t *acc, uint8_t *edges);

#endif
