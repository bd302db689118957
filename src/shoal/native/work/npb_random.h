/* The NAS Parallel Benchmarks' random numbers: x <- a*x mod 2^46, value x/2^46.
 *
 * Computed the way NPB specifies it (Bailey, NPB report RNR-94-007): in double
 * precision, with each 46-bit factor split into 23-bit halves so that every
 * product and sum stays exact in a 53-bit mantissa. The numbers are the same
 * as with 128-bit integer arithmetic, but the cost is not: the generator is
 * most of EP's work, and drawing it with integers made EP 2.8 times NPB's
 * Mop/s. Truncations are casts to int64_t (one instruction), not trunc(). */
#ifndef SHOAL_NPB_RANDOM_H
#define SHOAL_NPB_RANDOM_H

#include <stdint.h>

#define NPB_A 1220703125.0
#define NPB_2P23 8388608.0               /* 2^23 */
#define NPB_2M23 (1.0 / 8388608.0)       /* 2^-23 */
#define NPB_2P46 (NPB_2P23 * NPB_2P23)   /* 2^46 */
#define NPB_2M46 (NPB_2M23 * NPB_2M23)   /* 2^-46 */

/* A multiplier kept as a = 2^23 hi + lo. */
typedef struct { double hi, lo; } npb_mult;

static inline double npb_whole(double v) { return (double)(int64_t)v; }

static inline npb_mult npb_split(double a)
{
    npb_mult m;
    m.hi = npb_whole(a * NPB_2M23);
    m.lo = a - NPB_2P23 * m.hi;
    return m;
}

/* a*x mod 2^46 for x < 2^46: with x = 2^23 xh + xl,
 * a*x = 2^46 ah xh + 2^23 (ah xl + al xh) + al xl, and the first term vanishes. */
static inline double npb_mulmod(npb_mult a, double x)
{
    double xh = npb_whole(x * NPB_2M23);
    double xl = x - NPB_2P23 * xh;
    double mid = a.hi * xl + a.lo * xh;             /* < 2^47 */
    mid -= NPB_2P23 * npb_whole(mid * NPB_2M23);    /* mod 2^23 */
    double v = NPB_2P23 * mid + a.lo * xl;          /* < 2^47 */
    return v - NPB_2P46 * npb_whole(v * NPB_2M46);  /* mod 2^46 */
}

/* Advance the seed by a and return the new value in (0, 1) (NPB's randlc). */
static inline double npb_next(double *x, double a)
{
    *x = npb_mulmod(npb_split(a), *x);
    return NPB_2M46 * *x;
}

/* n values in (0, 1) into y[0..n-1], advancing the seed (NPB's vranlc). */
static inline void npb_fill(long n, double *x, double a, double *y)
{
    npb_mult m = npb_split(a);
    double s = *x;
    for (long i = 0; i < n; i++) {
        s = npb_mulmod(m, s);
        y[i] = NPB_2M46 * s;
    }
    *x = s;
}

/* a^n mod 2^46 by square-and-multiply (how NPB jumps a seed ahead). */
static inline double npb_pow(double a, uint64_t n)
{
    double r = 1.0;
    while (n) {
        if (n & 1)
            r = npb_mulmod(npb_split(a), r);
        a = npb_mulmod(npb_split(a), a);
        n >>= 1;
    }
    return r;
}

#endif
