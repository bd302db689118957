/* The distribution-free 95% confidence interval of the median.
 *
 * This is the rule of src/shoal/bench/stats.py, kept identical so that the
 * native stopping decision and the table the Python side prints agree:
 * sort the n samples; half = z*sqrt(n)/2; the interval is bounded by the
 * order statistics at 0-based indices max(0, floor(n/2 - half)) and
 * min(n-1, ceil(n/2 + half)); the median is the middle sample (mean of the
 * two middle ones for even n); the relative half-width is
 * (x[upper] - x[lower]) / (2 * median). Below SHOAL_CI_MIN_SAMPLES samples
 * the interval is undefined.
 */
#ifndef SHOAL_MEDIAN_CI_H
#define SHOAL_MEDIAN_CI_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define SHOAL_Z95 1.959963984540054
#define SHOAL_CI_MIN_SAMPLES 6

/* 0-based indices into the sorted sample that bound the median. */
static inline void shoal_median_ci_indices(size_t n, size_t *lower, size_t *upper)
{
    double half = SHOAL_Z95 * sqrt((double)n) / 2.0;
    double lo = floor((double)n / 2.0 - half);
    double hi = ceil((double)n / 2.0 + half);
    *lower = lo < 0.0 ? 0 : (size_t)lo;
    *upper = hi > (double)(n - 1) ? n - 1 : (size_t)hi;
}

/* Median of an already sorted array of n > 0 values. */
static inline double shoal_median_sorted(const double *x, size_t n)
{
    return (n % 2) ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static inline int shoal_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Relative half-width of the median's CI, or -1 when undefined (too few
 * samples or a non-positive median). `scratch` holds n doubles; the
 * samples themselves are left in their original (time) order. */
static inline double shoal_median_ci_rel(const double *samples, size_t n, double *scratch,
                                         double *median_out)
{
    size_t lower, upper;
    double median;
    if (n == 0)
        return -1.0;
    memcpy(scratch, samples, n * sizeof *scratch);
    qsort(scratch, n, sizeof *scratch, shoal_cmp_double);
    median = shoal_median_sorted(scratch, n);
    if (median_out)
        *median_out = median;
    if (n < SHOAL_CI_MIN_SAMPLES || !(median > 0.0))
        return -1.0;
    shoal_median_ci_indices(n, &lower, &upper);
    return (scratch[upper] - scratch[lower]) / (2.0 * median);
}

#endif
