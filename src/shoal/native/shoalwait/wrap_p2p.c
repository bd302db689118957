/* Point-to-point waits rewritten as nonblocking call + test loop.
 *
 * Semantics come from the MPI itself: MPI_Test* on the same requests give
 * the same statuses, error codes, MPI_UNDEFINED indices, null and inactive
 * persistent request handling as the blocking calls. The internal sw_*
 * functions take the caller's site so the Fortran entry points share them. */
#define _GNU_SOURCE
#include "shoalwait.h"
#include "wrap.h"

#include <limits.h>
#include <stdlib.h>

#define SITE __builtin_return_address(0)

/* ---- test callbacks ------------------------------------------------------ */
struct all { int n; MPI_Request *reqs; MPI_Status *statuses; };
static int test_all(void *c, int *done)
{
    struct all *x = c;
    return PMPI_Testall(x->n, x->reqs, done, x->statuses);
}

struct any { int n; MPI_Request *reqs; int *index; MPI_Status *status; };
static int test_any(void *c, int *done)
{
    struct any *x = c;
    return PMPI_Testany(x->n, x->reqs, x->index, done, x->status);
}

struct some { int n; MPI_Request *reqs; int *outcount; int *indices; MPI_Status *statuses; };
static int test_some(void *c, int *done)
{
    struct some *x = c;
    int rc = PMPI_Testsome(x->n, x->reqs, x->outcount, x->indices, x->statuses);
    *done = *x->outcount != 0;   /* MPI_UNDEFINED (all inactive) also ends the wait */
    return rc;
}

struct probe { int source, tag; MPI_Comm comm; MPI_Status *status; };
static int test_probe(void *c, int *done)
{
    struct probe *x = c;
    return PMPI_Iprobe(x->source, x->tag, x->comm, done, x->status);
}

struct mprobe { int source, tag; MPI_Comm comm; MPI_Message *message; MPI_Status *status; };
static int test_mprobe(void *c, int *done)
{
    struct mprobe *x = c;
    return PMPI_Improbe(x->source, x->tag, x->comm, done, x->message, x->status);
}

/* Finish one request started by the wrapper (Irecv, Isend, I<collective>). */
int sw_finish(int fn, const void *site, int rc, MPI_Request *req, MPI_Status *status)
{
    if (rc != MPI_SUCCESS)
        return rc;
    return sw_wait_request(fn, site, req, status);
}

/* ---- internal forms (C and Fortran entry points share them) -------------- */

/* A rewritten receive: the cached persistent request of this call site when
 * there is one (see recv_cache.c), else a new MPI_Irecv. */
static inline int recv_active(const void *site, void *buf, int count, MPI_Datatype type,
                              int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Request *cached = sw_cached_recv(site, buf, count, type, source, tag, comm);
    if (cached) {
        int rc = PMPI_Start(cached);
        return rc != MPI_SUCCESS ? rc : sw_wait_request(F_RECV, site, cached, status);
    }
    MPI_Request req;
    int rc = PMPI_Irecv(buf, count, type, source, tag, comm, &req);
    return sw_finish(F_RECV, site, rc, &req, status);
}

int sw_recv(const void *site, void *buf, int count, MPI_Datatype type, int source, int tag,
            MPI_Comm comm, MPI_Status *status)
{
    if (!sw_active(F_RECV))
        SW_PASS(F_RECV, PMPI_Recv(buf, count, type, source, tag, comm, status));
    return recv_active(site, buf, count, type, source, tag, comm, status);
}

/* The last datatype sent by this thread and the largest count of it that
 * stays below the eager limit (-1: none). A stale entry (a handle freed and
 * reused for another type) only changes whether a send is rewritten, never
 * what it does. */
static __thread MPI_Datatype small_type __attribute__((tls_model("initial-exec")));
static __thread long small_max __attribute__((tls_model("initial-exec"))) = -1;

static __attribute__((noinline)) int small_send_learn(MPI_Datatype type, int count)
{
    int size = 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return 0;   /* the MPI reports the bad type itself */
    small_type = type;
    if (sw_cfg.send_eager_B <= 0)
        small_max = -1;
    else if (size <= 0)
        small_max = INT_MAX;   /* nothing to send, whatever the count */
    else
        small_max = (long)((sw_cfg.send_eager_B - 1) / size);
    return count <= small_max;
}

/* Sends below the eager limit return at once: not worth a request. */
static inline int small_send(MPI_Datatype type, int count)
{
    return type == small_type ? count <= small_max : small_send_learn(type, count);
}

int sw_send(const void *site, int fn, const void *buf, int count, MPI_Datatype type, int dest,
            int tag, MPI_Comm comm)
{
    if (sw_cfg.timed)
        sw_traffic_send(comm, dest, count, type);
    if (sw_active(fn) && fn == F_SEND && small_send(type, count))
        SW_PASS(fn, PMPI_Send(buf, count, type, dest, tag, comm));
    if (!sw_active(fn))
        SW_PASS(fn, fn == F_SEND ? PMPI_Send(buf, count, type, dest, tag, comm)
                                 : PMPI_Ssend(buf, count, type, dest, tag, comm));
    MPI_Request req;
    int rc = fn == F_SEND ? PMPI_Isend(buf, count, type, dest, tag, comm, &req)
                          : PMPI_Issend(buf, count, type, dest, tag, comm, &req);
    return sw_finish(fn, site, rc, &req, MPI_STATUS_IGNORE);
}

int sw_probe(const void *site, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    if (!sw_active(F_PROBE))
        SW_PASS(F_PROBE, PMPI_Probe(source, tag, comm, status));
    struct probe x = {source, tag, comm, status};
    return sw_wait(F_PROBE, site, test_probe, &x);
}

int sw_wait1(const void *site, MPI_Request *req, MPI_Status *status)
{
    if (!sw_active(F_WAIT))
        SW_PASS(F_WAIT, PMPI_Wait(req, status));
    return sw_wait_request(F_WAIT, site, req, status);
}

int sw_waitall(const void *site, int n, MPI_Request reqs[], MPI_Status statuses[])
{
    if (!sw_active(F_WAITALL))
        SW_PASS(F_WAITALL, PMPI_Waitall(n, reqs, statuses));
    struct all x = {n, reqs, statuses};
    return sw_wait(F_WAITALL, site, test_all, &x);
}

int sw_waitany(const void *site, int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    if (!sw_active(F_WAITANY))
        SW_PASS(F_WAITANY, PMPI_Waitany(n, reqs, index, status));
    struct any x = {n, reqs, index, status};
    return sw_wait(F_WAITANY, site, test_any, &x);
}

/* ---- C entry points ------------------------------------------------------ */

/* The hottest entry points hand their call site to an out-of-line body
 * through this variable rather than an extra argument: with the entry
 * point's own arguments the body is reached by a plain jump, so the entry
 * point sets up no frame, and a pass-through call (every call in busy)
 * costs a test and a jump. */
static __thread const void *entry_site __attribute__((tls_model("initial-exec")));

static __attribute__((noinline)) int recv_body(void *buf, int count, MPI_Datatype type,
                                               int source, int tag, MPI_Comm comm,
                                               MPI_Status *status)
{
    /* Here the call is rewritten or timed; untimed means rewritten, and
     * that path is taken without sw_recv's own checks. */
    if (sw_cfg.timed)
        return sw_recv(entry_site, buf, count, type, source, tag, comm, status);
    return recv_active(entry_site, buf, count, type, source, tag, comm, status);
}

static __attribute__((noinline)) int send_body(const void *buf, int count, MPI_Datatype type,
                                               int dest, int tag, MPI_Comm comm)
{
    return sw_send(entry_site, F_SEND, buf, count, type, dest, tag, comm);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    SW_DIRECT(F_RECV, PMPI_Recv(buf, count, type, source, tag, comm, status));
    entry_site = SITE;
    return recv_body(buf, count, type, source, tag, comm, status);
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message,
              MPI_Status *status)
{
    if (!sw_active(F_MRECV))
        SW_PASS(F_MRECV, PMPI_Mrecv(buf, count, type, message, status));
    MPI_Request req;
    int rc = PMPI_Imrecv(buf, count, type, message, &req);
    return sw_finish(F_MRECV, SITE, rc, &req, status);
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    SW_DIRECT(F_SEND, PMPI_Send(buf, count, type, dest, tag, comm));
    /* A small send of the type sent last goes through from here. */
    if (type == small_type && count <= small_max && !sw_cfg.timed)
        return PMPI_Send(buf, count, type, dest, tag, comm);
    entry_site = SITE;
    return send_body(buf, count, type, dest, tag, comm);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    SW_DIRECT(F_SSEND, PMPI_Ssend(buf, count, type, dest, tag, comm));
    return sw_send(SITE, F_SSEND, buf, count, type, dest, tag, comm);
}

/* Nonblocking sends are not rewritten (nothing waits in them); they are
 * seen only to count who talks to whom. */
int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    if (sw_cfg.timed)
        sw_traffic_send(comm, dest, count, type);
    return PMPI_Isend(buf, count, type, dest, tag, comm, req);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *req)
{
    if (sw_cfg.timed)
        sw_traffic_send(comm, dest, count, type);
    return PMPI_Issend(buf, count, type, dest, tag, comm, req);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    SW_DIRECT(F_PROBE, PMPI_Probe(source, tag, comm, status));
    return sw_probe(SITE, source, tag, comm, status);
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    if (!sw_active(F_MPROBE))
        SW_PASS(F_MPROBE, PMPI_Mprobe(source, tag, comm, message, status));
    struct mprobe x = {source, tag, comm, message, status};
    return sw_wait(F_MPROBE, SITE, test_mprobe, &x);
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    SW_DIRECT(F_WAIT, PMPI_Wait(req, status));
    return sw_wait1(SITE, req, status);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    SW_DIRECT(F_WAITALL, PMPI_Waitall(n, reqs, statuses));
    return sw_waitall(SITE, n, reqs, statuses);
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    SW_DIRECT(F_WAITANY, PMPI_Waitany(n, reqs, index, status));
    return sw_waitany(SITE, n, reqs, index, status);
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    if (!sw_active(F_WAITSOME))
        SW_PASS(F_WAITSOME, PMPI_Waitsome(n, reqs, outcount, indices, statuses));
    struct some x = {n, reqs, outcount, indices, statuses};
    return sw_wait(F_WAITSOME, SITE, test_some, &x);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
                 MPI_Comm comm, MPI_Status *status)
{
    if (sw_cfg.timed)
        sw_traffic_send(comm, dest, scount, stype);
    if (!sw_active(F_SENDRECV))
        SW_PASS(F_SENDRECV, PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount,
                                          rtype, source, rtag, comm, status));
    MPI_Request req;
    int rc = PMPI_Isendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source,
                            rtag, comm, &req);
    return sw_finish(F_SENDRECV, SITE, rc, &req, status);
}

/* Sendrecv_replace as a packed copy of the outgoing data, a receive into the
 * buffer and a send of the copy (MPI_Isendrecv_replace's status is not the
 * receive's in every MPI). */
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int stag,
                         int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    if (sw_cfg.timed)
        sw_traffic_send(comm, dest, count, type);
    if (!sw_active(F_SENDRECV_REPLACE))
        SW_PASS(F_SENDRECV_REPLACE, PMPI_Sendrecv_replace(buf, count, type, dest, stag,
                                                          source, rtag, comm, status));
    int bytes = 0, pos = 0, rc = PMPI_Pack_size(count, type, comm, &bytes);
    if (rc != MPI_SUCCESS)
        return rc;
    char *copy = malloc(bytes > 0 ? bytes : 1);
    if (!copy)
        return MPI_ERR_NO_MEM;
    rc = PMPI_Pack(buf, count, type, copy, bytes, &pos, comm);
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (rc == MPI_SUCCESS)
        rc = PMPI_Irecv(buf, count, type, source, rtag, comm, &reqs[0]);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Isend(copy, pos, MPI_PACKED, dest, stag, comm, &reqs[1]);
    if (rc != MPI_SUCCESS) {
        /* Nothing posted must stay behind: cancel a receive already posted. */
        if (reqs[0] != MPI_REQUEST_NULL) {
            PMPI_Cancel(&reqs[0]);
            PMPI_Request_free(&reqs[0]);
        }
        free(copy);
        return rc;
    }
    MPI_Status sts[2];
    struct all x = {2, reqs, sts};
    rc = sw_wait(F_SENDRECV_REPLACE, SITE, test_all, &x);
    if (status != MPI_STATUS_IGNORE && (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS))
        *status = sts[0];
    if (rc == MPI_ERR_IN_STATUS)
        rc = sts[0].MPI_ERROR != MPI_SUCCESS ? sts[0].MPI_ERROR : sts[1].MPI_ERROR;
    free(copy);
    return rc;
}
