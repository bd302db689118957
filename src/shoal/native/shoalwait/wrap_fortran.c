/* Fortran (mpif.h / use mpi) entry points for the most used blocking calls.
 *
 * Open MPI's Fortran layer calls PMPI_* directly, so the C wrappers never
 * see a Fortran program's waits; these entry points take their place.
 * Handles arrive as MPI_Fint and are converted with MPI_*_f2c/c2f; every
 * common name mangling (name_, name__, name, NAME) points at one body.
 * Covered: MPI_INIT, MPI_INIT_THREAD, MPI_FINALIZE, MPI_RECV, MPI_SEND,
 * MPI_SSEND, MPI_PROBE, MPI_WAIT, MPI_WAITALL, MPI_WAITANY, MPI_BARRIER,
 * MPI_BCAST. Reductions are not (Fortran MPI_IN_PLACE is an address only
 * the MPI's own Fortran layer can recognise). */
#define _GNU_SOURCE
#include "shoalwait.h"
#include "wrap.h"

#include <stdlib.h>

#define SITE __builtin_return_address(0)

#define FORTRAN_NAMES(lower, UPPER, impl)                                  \
    extern __typeof__(impl) lower##_ __attribute__((alias(#impl)));       \
    extern __typeof__(impl) lower##__ __attribute__((alias(#impl)));      \
    extern __typeof__(impl) lower __attribute__((alias(#impl)));          \
    extern __typeof__(impl) UPPER __attribute__((alias(#impl)));

/* A C status for a Fortran one, or MPI_STATUS_IGNORE. */
#define C_STATUS(fstatus, cstatus) \
    ((fstatus) == MPI_F_STATUS_IGNORE ? MPI_STATUS_IGNORE : &(cstatus))

static void to_f_status(MPI_Status *c, MPI_Fint *f)
{
    if (c != MPI_STATUS_IGNORE)
        PMPI_Status_c2f(c, f);
}

void sw_f_init(MPI_Fint *ierr);
void sw_f_init(MPI_Fint *ierr)
{
    *ierr = MPI_Init(NULL, NULL);
}
FORTRAN_NAMES(mpi_init, MPI_INIT, sw_f_init)

void sw_f_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr);
void sw_f_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    int got = 0;
    *ierr = MPI_Init_thread(NULL, NULL, *required, &got);
    *provided = got;
}
FORTRAN_NAMES(mpi_init_thread, MPI_INIT_THREAD, sw_f_init_thread)

void sw_f_finalize(MPI_Fint *ierr);
void sw_f_finalize(MPI_Fint *ierr)
{
    *ierr = MPI_Finalize();
}
FORTRAN_NAMES(mpi_finalize, MPI_FINALIZE, sw_f_finalize)

void sw_f_recv(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *source, MPI_Fint *tag,
               MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr);
void sw_f_recv(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *source, MPI_Fint *tag,
               MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr)
{
    MPI_Status cs, *sp = C_STATUS(status, cs);
    *ierr = sw_recv(SITE, buf, *count, PMPI_Type_f2c(*type), *source, *tag,
                    PMPI_Comm_f2c(*comm), sp);
    if (*ierr == MPI_SUCCESS)
        to_f_status(sp, status);
}
FORTRAN_NAMES(mpi_recv, MPI_RECV, sw_f_recv)

void sw_f_send(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag,
               MPI_Fint *comm, MPI_Fint *ierr);
void sw_f_send(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag,
               MPI_Fint *comm, MPI_Fint *ierr)
{
    *ierr = sw_send(SITE, F_SEND, buf, *count, PMPI_Type_f2c(*type), *dest, *tag,
                    PMPI_Comm_f2c(*comm));
}
FORTRAN_NAMES(mpi_send, MPI_SEND, sw_f_send)

void sw_f_ssend(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag,
                MPI_Fint *comm, MPI_Fint *ierr);
void sw_f_ssend(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest, MPI_Fint *tag,
                MPI_Fint *comm, MPI_Fint *ierr)
{
    *ierr = sw_send(SITE, F_SSEND, buf, *count, PMPI_Type_f2c(*type), *dest, *tag,
                    PMPI_Comm_f2c(*comm));
}
FORTRAN_NAMES(mpi_ssend, MPI_SSEND, sw_f_ssend)

void sw_f_probe(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *status,
                MPI_Fint *ierr);
void sw_f_probe(MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *status,
                MPI_Fint *ierr)
{
    MPI_Status cs, *sp = C_STATUS(status, cs);
    *ierr = sw_probe(SITE, *source, *tag, PMPI_Comm_f2c(*comm), sp);
    if (*ierr == MPI_SUCCESS)
        to_f_status(sp, status);
}
FORTRAN_NAMES(mpi_probe, MPI_PROBE, sw_f_probe)

void sw_f_wait(MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierr);
void sw_f_wait(MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierr)
{
    MPI_Request req = PMPI_Request_f2c(*request);
    MPI_Status cs, *sp = C_STATUS(status, cs);
    *ierr = sw_wait1(SITE, &req, sp);
    if (*ierr == MPI_SUCCESS) {
        *request = PMPI_Request_c2f(req);
        to_f_status(sp, status);
    }
}
FORTRAN_NAMES(mpi_wait, MPI_WAIT, sw_f_wait)

void sw_f_waitall(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *statuses, MPI_Fint *ierr);
void sw_f_waitall(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *statuses, MPI_Fint *ierr)
{
    int n = *count, ignore = statuses == MPI_F_STATUSES_IGNORE;
    MPI_Request *reqs = malloc(sizeof *reqs * (n > 0 ? n : 1));
    MPI_Status *cs = ignore ? MPI_STATUSES_IGNORE : malloc(sizeof *cs * (n > 0 ? n : 1));
    if (!reqs || !cs) {
        free(reqs);
        *ierr = MPI_ERR_NO_MEM;
        return;
    }
    for (int i = 0; i < n; i++)
        reqs[i] = PMPI_Request_f2c(requests[i]);
    *ierr = sw_waitall(SITE, n, reqs, cs);
    if (*ierr == MPI_SUCCESS || *ierr == MPI_ERR_IN_STATUS) {
        for (int i = 0; i < n; i++) {
            requests[i] = PMPI_Request_c2f(reqs[i]);
            if (!ignore)
                PMPI_Status_c2f(&cs[i], &statuses[i * MPI_F_STATUS_SIZE]);
        }
    }
    free(reqs);
    if (!ignore)
        free(cs);
}
FORTRAN_NAMES(mpi_waitall, MPI_WAITALL, sw_f_waitall)

void sw_f_waitany(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *status,
                  MPI_Fint *ierr);
void sw_f_waitany(MPI_Fint *count, MPI_Fint *requests, MPI_Fint *index, MPI_Fint *status,
                  MPI_Fint *ierr)
{
    int n = *count, idx = MPI_UNDEFINED;
    MPI_Request *reqs = malloc(sizeof *reqs * (n > 0 ? n : 1));
    if (!reqs) {
        *ierr = MPI_ERR_NO_MEM;
        return;
    }
    for (int i = 0; i < n; i++)
        reqs[i] = PMPI_Request_f2c(requests[i]);
    MPI_Status cs, *sp = C_STATUS(status, cs);
    *ierr = sw_waitany(SITE, n, reqs, &idx, sp);
    if (*ierr == MPI_SUCCESS) {
        if (idx != MPI_UNDEFINED)
            requests[idx] = PMPI_Request_c2f(reqs[idx]);
        *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1;   /* Fortran counts from 1 */
        to_f_status(sp, status);
    }
    free(reqs);
}
FORTRAN_NAMES(mpi_waitany, MPI_WAITANY, sw_f_waitany)

void sw_f_barrier(MPI_Fint *comm, MPI_Fint *ierr);
void sw_f_barrier(MPI_Fint *comm, MPI_Fint *ierr)
{
    *ierr = sw_barrier(SITE, PMPI_Comm_f2c(*comm));
}
FORTRAN_NAMES(mpi_barrier, MPI_BARRIER, sw_f_barrier)

void sw_f_bcast(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm,
                MPI_Fint *ierr);
void sw_f_bcast(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm,
                MPI_Fint *ierr)
{
    *ierr = sw_bcast(SITE, buf, *count, PMPI_Type_f2c(*type), *root, PMPI_Comm_f2c(*comm));
}
FORTRAN_NAMES(mpi_bcast, MPI_BCAST, sw_f_bcast)
