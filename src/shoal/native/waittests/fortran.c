/* The Fortran entry points, called exactly as a Fortran compiler would:
 * handles as MPI_Fint, everything by reference, ierr last, 1-based index. */
#define _GNU_SOURCE
#include "waittest.h"

#include <dlfcn.h>
#include <stdio.h>

/* Looked up at run time: the MPI here may ship no Fortran layer, and the
 * entry points under test are the ones libshoalwait exports. */
typedef void (*f_recv)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                       MPI_Fint *, MPI_Fint *);
typedef void (*f_send)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                       MPI_Fint *);
typedef void (*f_probe)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_wait)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_waitall)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_waitany)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_barrier)(MPI_Fint *, MPI_Fint *);
typedef void (*f_bcast)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);

static void *need(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        fprintf(stderr, "no Fortran entry point %s in this process\n", name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return f;
}

int wt_fortran(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    f_recv mpi_recv_ = (f_recv)need("mpi_recv_");
    f_send mpi_send_ = (f_send)need("mpi_send_");
    f_probe mpi_probe_ = (f_probe)need("mpi_probe_");
    f_wait mpi_wait_ = (f_wait)need("mpi_wait_");
    f_waitall mpi_waitall_ = (f_waitall)need("mpi_waitall_");
    f_waitany mpi_waitany_ = (f_waitany)need("mpi_waitany_");
    f_bcast mpi_bcast_ = (f_bcast)need("mpi_bcast_");
    f_barrier barriers[4] = {(f_barrier)need("mpi_barrier_"), (f_barrier)need("MPI_BARRIER"),
                             (f_barrier)need("mpi_barrier__"), (f_barrier)need("mpi_barrier")};
    MPI_Fint comm = MPI_Comm_c2f(MPI_COMM_WORLD), type = MPI_Type_c2f(MPI_INT);
    MPI_Fint ierr = -1, one = 1, three = 3, tag = 5, any_source = MPI_ANY_SOURCE,
             any_tag = MPI_ANY_TAG, zero = 0, peer = 1 - rank;
    MPI_Fint fst[MPI_F_STATUS_SIZE + 2], fsts[2 * MPI_F_STATUS_SIZE + 2];
    MPI_Status st;
    int v[3] = {0, 0, 0};

    if (rank == 0) {
        int out[3] = {1, 2, 3};
        mpi_send_(out, &three, &type, &peer, &tag, &comm, &ierr);
        bad += ierr != MPI_SUCCESS;
    } else if (rank == 1) {
        mpi_probe_(&any_source, &any_tag, &comm, fst, &ierr);
        MPI_Status_f2c(fst, &st);
        bad += ierr != MPI_SUCCESS || st.MPI_SOURCE != 0 || st.MPI_TAG != 5;
        mpi_recv_(v, &three, &type, &any_source, &any_tag, &comm, fst, &ierr);
        MPI_Status_f2c(fst, &st);
        int n = -1;
        MPI_Get_count(&st, MPI_INT, &n);
        bad += ierr != MPI_SUCCESS || v[2] != 3 || n != 3 || st.MPI_TAG != 5;
    }
    if (rank < 2) {
        /* Nonblocking from C, completed through the Fortran MPI_WAIT* forms. */
        int a = 10 + rank, b = -1, c = -1;
        MPI_Request r[2];
        MPI_Irecv(&b, 1, MPI_INT, 1 - rank, 6, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(&a, 1, MPI_INT, 1 - rank, 6, MPI_COMM_WORLD, &r[1]);
        MPI_Fint fr[2] = {MPI_Request_c2f(r[0]), MPI_Request_c2f(r[1])}, two = 2;
        mpi_waitall_(&two, fr, fsts, &ierr);
        MPI_Status_f2c(fsts, &st);
        bad += ierr != MPI_SUCCESS || b != 11 - rank || st.MPI_TAG != 6 ||
               MPI_Request_f2c(fr[0]) != MPI_REQUEST_NULL;

        MPI_Irecv(&c, 1, MPI_INT, 1 - rank, 7, MPI_COMM_WORLD, &r[0]);
        MPI_Fint f1 = MPI_Request_c2f(r[0]);
        MPI_Send(&a, 1, MPI_INT, 1 - rank, 7, MPI_COMM_WORLD);
        mpi_wait_(&f1, fst, &ierr);
        MPI_Status_f2c(fst, &st);
        bad += ierr != MPI_SUCCESS || c != 11 - rank || st.MPI_SOURCE != 1 - rank ||
               MPI_Request_f2c(f1) != MPI_REQUEST_NULL;

        MPI_Irecv(&c, 1, MPI_INT, 1 - rank, 8, MPI_COMM_WORLD, &r[1]);
        MPI_Fint fa[2] = {MPI_Request_c2f(MPI_REQUEST_NULL), MPI_Request_c2f(r[1])}, index = -9;
        MPI_Send(&a, 1, MPI_INT, 1 - rank, 8, MPI_COMM_WORLD);
        mpi_waitany_(&two, fa, &index, fst, &ierr);
        bad += ierr != MPI_SUCCESS || index != 2;   /* Fortran index: 1-based */
    }
    int root = rank == 0 ? 77 : 0;
    mpi_bcast_(&root, &one, &type, &zero, &comm, &ierr);
    bad += ierr != MPI_SUCCESS || root != 77;
    for (int i = 0; i < 4; i++) {   /* every name mangling */
        ierr = -1;
        barriers[i](&comm, &ierr);
        bad += ierr != MPI_SUCCESS;
    }
    printf("{\"rank\": %d, \"fortran_failures\": %d}\n", rank, bad);
    fflush(stdout);
    MPI_Finalize();
    return bad ? 1 : 0;
}
