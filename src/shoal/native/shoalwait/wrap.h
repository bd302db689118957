/* Internal forms of the wrapped calls, shared by the C and Fortran entry points. */
#ifndef SHOALWAIT_WRAP_H
#define SHOALWAIT_WRAP_H
#include "shoalwait.h"

#pragma GCC visibility push(hidden)

int sw_finish(int fn, const void *site, int rc, MPI_Request *req, MPI_Status *status);
/* recv_cache.c: an inactive persistent receive with exactly these arguments
 * (made on first use), or NULL when there is none to reuse. */
MPI_Request *sw_cached_recv(const void *site, void *buf, int count, MPI_Datatype type,
                            int source, int tag, MPI_Comm comm);
void sw_recv_cache_free_all(void);
int sw_recv(const void *site, void *buf, int count, MPI_Datatype type, int source, int tag,
            MPI_Comm comm, MPI_Status *status);
int sw_send(const void *site, int fn, const void *buf, int count, MPI_Datatype type, int dest,
            int tag, MPI_Comm comm);
int sw_probe(const void *site, int source, int tag, MPI_Comm comm, MPI_Status *status);
int sw_wait1(const void *site, MPI_Request *req, MPI_Status *status);
int sw_waitall(const void *site, int n, MPI_Request reqs[], MPI_Status statuses[]);
int sw_waitany(const void *site, int n, MPI_Request reqs[], int *index, MPI_Status *status);
int sw_barrier(const void *site, MPI_Comm comm);
int sw_bcast(const void *site, void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int sw_allreduce(const void *site, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                 MPI_Op op, MPI_Comm comm);
int sw_reduce(const void *site, const void *sbuf, void *rbuf, int count, MPI_Datatype type,
              MPI_Op op, int root, MPI_Comm comm);
/* alltoall.c: the shape this call takes (SW_A2A_MPI: the MPI's nonblocking form), and
 * the exchange in the other shapes. */
enum sw_alltoall sw_alltoall_shape(const void *sbuf, int scount, MPI_Datatype stype,
                                   MPI_Comm comm);
int sw_alltoall(const void *site, enum sw_alltoall shape, const void *sbuf, int scount,
                MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm);
/* In MPI_Init: MPI_COMM_WORLD's private communicator, where an Alltoall on it may need one. */
int sw_alltoall_prepare(void);
#pragma GCC visibility pop
#endif
