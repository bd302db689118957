/* Data written by senders and checked by receivers under --check.
 *
 * A byte depends on the sender's rank, the repetition and its index, so a
 * message from the wrong rank, a stale message from an earlier repetition
 * or a shifted block all show up as errors. Pattern bytes are 1..255:
 * receive buffers are poisoned with 0 before each repetition, so data that
 * never arrived cannot pass.
 */
#include "bench.h"

#include <stdint.h>

unsigned char sb_pattern_byte(int sender, unsigned long rep, size_t index)
{
    /* A cheap integer mix; any bijection-like scramble works. */
    uint32_t h = (uint32_t)index * 2654435761u;
    h ^= (uint32_t)sender * 40503u + (uint32_t)rep * 2246822519u;
    h ^= h >> 15;
    return (unsigned char)(1 + h % 255u);
}

void sb_fill_bytes(unsigned char *buf, size_t n, int sender, unsigned long rep, size_t offset)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = sb_pattern_byte(sender, rep, offset + i);
}

long sb_verify_bytes(const unsigned char *buf, size_t n, int sender, unsigned long rep, size_t offset)
{
    long errors = 0;
    for (size_t i = 0; i < n; i++)
        errors += buf[i] != sb_pattern_byte(sender, rep, offset + i);
    return errors;
}

/* A rank's contribution to an MPI_UNSIGNED_CHAR sum: kept in 1..255/nprocs so
 * the sum is never 0 (the poison) for up to 255 ranks. */
unsigned char sb_contrib_u8(int rank, int nprocs, unsigned long rep, size_t index)
{
    unsigned cap = nprocs < 255 ? 255u / (unsigned)nprocs : 1u;
    return (unsigned char)(1 + sb_pattern_byte(rank, rep, index) % cap);
}

/* A rank's contribution to an MPI_FLOAT sum: small integers, so every partial
 * sum is exact in any order and the result can be compared with ==. */
float sb_contrib_float(int rank, unsigned long rep, size_t index)
{
    return (float)(1 + sb_pattern_byte(rank, rep, index) % 16);
}
