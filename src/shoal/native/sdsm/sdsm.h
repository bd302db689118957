/* libshoalsdsm: a software distributed shared memory over two-sided MPI.
 *
 * Data lives in regions split into chunks; every chunk has a home on one of
 * the server ranks (the first `nservers` ranks of the communicator). Clients
 * acquire a chunk for reading (many at once) or writing (one at a time),
 * work on their local copy, and release it; a dirty release sends the chunk
 * home and makes it a new version. Grants are FIFO per chunk, so no writer
 * starves. sdsm_wait_newer blocks until a chunk has a newer version than the
 * one given (publish-subscribe). Every wait is one blocking MPI_Recv at its
 * own call site, so a PMPI waiting library (libshoalwait) governs all of them.
 *
 * Typical use:
 *     sdsm_init(MPI_COMM_WORLD, 1, &s);
 *     sdsm_alloc(s, nchunks, bytes, SDSM_PLACE_CYCLIC, &r);   // every rank
 *     if (sdsm_is_server(s)) sdsm_serve(s);
 *     else { ... sdsm_acquire_write(s, sdsm_chunk(r, i), &p, NULL); ...
 *            sdsm_release(s, sdsm_chunk(r, i), SDSM_DIRTY); }
 *     sdsm_finalize(&s);
 *
 * Environment: SDSM_WATCHDOG_S (default 60; 0 disables): a server that has
 * received nothing for that long while a request is queued or held prints
 * every home's holders, queues and waiters, and exits with status 3. */
#ifndef SDSM_H
#define SDSM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sdsm_errno.h"

typedef struct sdsm sdsm_t;
typedef uint64_t sdsm_chunk_t;                 /* region << 32 | index */
typedef struct { uint32_t id, nchunks; size_t chunk_bytes; } sdsm_region_t;

enum { SDSM_PLACE_CYCLIC = 0, SDSM_PLACE_BLOCK = 1 };
#define SDSM_PLACE_ON(server) (0x100 | (server))   /* every chunk on one server */
enum { SDSM_DIRTY = 0, SDSM_CLEAN = 1 };

/* Time split and traffic of one rank (seconds, messages, bytes). */
typedef struct {
    double lib_s;          /* inside libshoalsdsm calls (includes wait_s) */
    double wait_s;         /* blocked in the library's MPI_Recv calls */
    double barrier_s;      /* in sdsm_barrier */
    uint64_t msgs_sent, msgs_recv, bytes_sent, bytes_recv;
    uint64_t acquires, releases, waits, grants_with_data;
    uint64_t protocol_errors;
} sdsm_stats_t;

int  sdsm_init(MPI_Comm comm, int nservers, sdsm_t **s);
int  sdsm_finalize(sdsm_t **s);
/* sdsm_finalize, handing back the rank's last stats: its goodbye messages included. */
int  sdsm_finalize_stats(sdsm_t **s, sdsm_stats_t *out);
int  sdsm_is_server(const sdsm_t *s);
int  sdsm_rank(const sdsm_t *s);               /* rank in the communicator */
int  sdsm_client_index(const sdsm_t *s);       /* 0..nclients-1, -1 on servers */
int  sdsm_nclients(const sdsm_t *s);
int  sdsm_nservers(const sdsm_t *s);
/* Serve requests until every client has finalized (server ranks only). */
int  sdsm_serve(sdsm_t *s);

/* Collective over every rank of the communicator, servers included. */
int  sdsm_alloc(sdsm_t *s, uint32_t nchunks, size_t chunk_bytes, int place, sdsm_region_t *r);
int  sdsm_lock_create(sdsm_t *s, sdsm_chunk_t *lock);

static inline sdsm_chunk_t sdsm_chunk(sdsm_region_t r, uint32_t i)
{
    return ((uint64_t)r.id << 32) | i;
}
int  sdsm_home(const sdsm_t *s, sdsm_chunk_t c);

/* Client calls. `ver` (optional) receives the version granted. */
int  sdsm_acquire_read(sdsm_t *s, sdsm_chunk_t c, const void **p, uint64_t *ver);
int  sdsm_acquire_write(sdsm_t *s, sdsm_chunk_t c, void **p, uint64_t *ver);
int  sdsm_release(sdsm_t *s, sdsm_chunk_t c, int flags);   /* SDSM_DIRTY or SDSM_CLEAN */
int  sdsm_wait_newer(sdsm_t *s, sdsm_chunk_t c, uint64_t known, uint64_t *now);
int  sdsm_lock(sdsm_t *s, sdsm_chunk_t lock);
int  sdsm_unlock(sdsm_t *s, sdsm_chunk_t lock);
int  sdsm_barrier(sdsm_t *s);                  /* every client; not the servers */
MPI_Comm sdsm_client_comm(const sdsm_t *s);    /* the clients only (MPI_COMM_NULL on servers) */

void sdsm_stats(const sdsm_t *s, sdsm_stats_t *out);
/* The stats as one JSON object (no newline). */
void sdsm_stats_json(const sdsm_t *s, FILE *f);

#endif
