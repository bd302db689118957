/* The NAS Parallel Benchmarks' random numbers: x <- a*x mod 2^46, value x/2^46.
 * NPB computes this in split double arithmetic; it is exact, so 128-bit
 * integer arithmetic gives the same numbers. */
#ifndef SHOAL_NPB_RANDOM_H
#define SHOAL_NPB_RANDOM_H

#include <math.h>
#include <stdint.h>

#define NPB_A 1220703125ULL
#define NPB_MASK ((1ULL << 46) - 1)

static inline uint64_t npb_mul(uint64_t a, uint64_t x)
{
    return (uint64_t)(((unsigned __int128)a * x) & NPB_MASK);
}

/* Advance the seed and return the next uniform number in (0, 1). */
static inline double npb_next(uint64_t *x, uint64_t a)
{
    *x = npb_mul(a, *x);
    return ldexp((double)*x, -46);
}

/* a^n mod 2^46 by square-and-multiply. */
static inline uint64_t npb_pow(uint64_t a, uint64_t n)
{
    uint64_t r = 1;
    while (n) {
        if (n & 1)
            r = npb_mul(r, a);
        a = npb_mul(a, a);
        n >>= 1;
    }
    return r;
}

#endif
