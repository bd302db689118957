/* Persistent receive requests, kept per call site and thread.
 *
 * A blocking receive becomes a request plus a test loop. MPI_Irecv makes a
 * new request every time and MPI_Test frees it; in Open MPI that costs
 * about 2 % of an 8-byte ping-pong (MPI_Recv reuses one cached request
 * inside the library). A loop that receives with the same arguments at the
 * same place again and again (every ping-pong, every server loop) gets a
 * persistent request instead, made once with MPI_Recv_init and restarted
 * with MPI_Start: MPI_Test leaves it inactive rather than freeing it.
 *
 * Same arguments, same receive: the request holds the buffer address,
 * count, datatype, source, tag and communicator that MPI_Recv was given,
 * and an inactive request matches nothing. MPI keeps a communicator or
 * datatype that a request refers to alive (reference counts, in MPICH and
 * Open MPI alike), so a handle cannot be freed and reused for another
 * object while a cached request holds it; MPI_Comm_free, MPI_Comm_disconnect
 * and MPI_Type_free drop this thread's requests on the object first, so the
 * object goes when the program frees it, and MPI_Finalize frees them all. */
#define _GNU_SOURCE
#include "shoalwait.h"
#include "wrap.h"

#include <pthread.h>
#include <stdlib.h>

#define SLOTS 16   /* direct-mapped by call site */

struct cached {
    const void *site;
    void *buf;
    int count, source, tag;
    MPI_Datatype type;
    MPI_Comm comm;
    MPI_Request req;   /* MPI_REQUEST_NULL: empty slot */
};

struct cache {
    struct cached slot[SLOTS];
    struct cache *next;   /* every thread's cache, for MPI_Finalize */
};

static __thread struct cache *mine __attribute__((tls_model("initial-exec")));
static struct cache *all_caches;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;

static struct cache *this_thread(void)
{
    if (mine)
        return mine;
    struct cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    for (int i = 0; i < SLOTS; i++)
        c->slot[i].req = MPI_REQUEST_NULL;
    pthread_mutex_lock(&all_lock);
    c->next = all_caches;
    all_caches = c;
    pthread_mutex_unlock(&all_lock);
    return mine = c;
}

static void drop(struct cached *e)
{
    if (e->req != MPI_REQUEST_NULL)
        PMPI_Request_free(&e->req);
    e->req = MPI_REQUEST_NULL;
    e->site = NULL;
}

MPI_Request *sw_cached_recv(const void *site, void *buf, int count, MPI_Datatype type,
                            int source, int tag, MPI_Comm comm)
{
    /* Not from MPI_PROC_NULL: MPICH 5's persistent receive from it reports
     * MPI_ANY_SOURCE as the status's source instead of MPI_PROC_NULL. */
    if (source == MPI_PROC_NULL)
        return NULL;
    struct cache *c = this_thread();
    if (!c)
        return NULL;
    uintptr_t h = (uintptr_t)site;
    struct cached *e = &c->slot[((h >> 4) ^ (h >> 12)) & (SLOTS - 1)];
    if (e->req != MPI_REQUEST_NULL && e->site == site && e->buf == buf && e->count == count &&
        e->type == type && e->source == source && e->tag == tag && e->comm == comm)
        return &e->req;
    drop(e);
    if (PMPI_Recv_init(buf, count, type, source, tag, comm, &e->req) != MPI_SUCCESS) {
        e->req = MPI_REQUEST_NULL;   /* the caller's MPI_Irecv reports the error */
        return NULL;
    }
    *e = (struct cached){site, buf, count, source, tag, type, comm, e->req};
    return &e->req;
}

/* This thread's requests on a communicator or datatype about to be freed. */
static void drop_matching(const MPI_Comm *comm, const MPI_Datatype *type)
{
    if (!mine)
        return;
    for (int i = 0; i < SLOTS; i++) {
        struct cached *e = &mine->slot[i];
        if (e->req != MPI_REQUEST_NULL && ((comm && e->comm == *comm) || (type && e->type == *type)))
            drop(e);
    }
}

void sw_recv_cache_free_all(void)
{
    pthread_mutex_lock(&all_lock);
    for (struct cache *c = all_caches; c; c = c->next)
        for (int i = 0; i < SLOTS; i++)
            drop(&c->slot[i]);
    pthread_mutex_unlock(&all_lock);
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (comm)
        drop_matching(comm, NULL);
    return PMPI_Comm_free(comm);
}

int MPI_Comm_disconnect(MPI_Comm *comm)
{
    if (comm)
        drop_matching(comm, NULL);
    return PMPI_Comm_disconnect(comm);
}

int MPI_Type_free(MPI_Datatype *type)
{
    if (type)
        drop_matching(NULL, type);
    return PMPI_Type_free(type);
}
