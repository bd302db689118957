/* Corner cases of blocking MPI calls whose results must not change under
 * any wait mode. Every rank prints one JSON line: its failures and a digest
 * of everything it observed, so runs under different modes can be compared. */
#define _GNU_SOURCE
#include "waittest.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;
static char digest[8192];

static void note(const char *fmt, ...)
{
    char item[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    strncat(digest, item, sizeof digest - strlen(digest) - 2);
    strcat(digest, ";");
}

#define CHECK(cond, name, ...)                                              \
    do {                                                                    \
        if (!(cond)) {                                                      \
            failures++;                                                     \
            fprintf(stderr, "FAIL rank %d %s: ", rank, name);               \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
        }                                                                   \
    } while (0)

/* An empty status: MPI_ANY_SOURCE, MPI_ANY_TAG, count 0. */
static int empty(MPI_Status *st)
{
    int n = -1;
    MPI_Get_count(st, MPI_INT, &n);
    return st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && n == 0;
}

static int error_class(int rc)
{
    int cls = -1;
    MPI_Error_class(rc, &cls);
    return cls;
}

static void p2p(void)
{
    MPI_Status st;
    int buf[8] = {0}, n = -1;
    double d[5] = {1, 2, 3, 4, 5}, dr[5] = {0};
    /* ANY_SOURCE / ANY_TAG fill the status. */
    if (rank == 0) {
        int out[3] = {10, 20, 30};
        MPI_Send(out, 3, MPI_INT, 1, 7, MPI_COMM_WORLD);
        MPI_Send(d, 5, MPI_DOUBLE, 1, 11, MPI_COMM_WORLD);
        MPI_Send(out, 3, MPI_INT, 1, 12, MPI_COMM_WORLD);
        MPI_Send(out, 1, MPI_INT, 1, 13, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Recv(buf, 8, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT, &n);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 7 && n == 3 && buf[2] == 30, "recv_any",
              "source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, n);
        note("recv_any=%d,%d,%d", st.MPI_SOURCE, st.MPI_TAG, n);

        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_DOUBLE, &n);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 11 && n == 5, "probe_any",
              "source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, n);
        note("probe_any=%d,%d,%d", st.MPI_SOURCE, st.MPI_TAG, n);
        MPI_Recv(dr, 5, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(dr[4] == 5.0, "recv_status_ignore", "got %g", dr[4]);

        MPI_Message msg;
        MPI_Mprobe(MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &msg, &st);
        MPI_Get_count(&st, MPI_INT, &n);
        memset(buf, 0, sizeof buf);
        MPI_Mrecv(buf, n, MPI_INT, &msg, &st);
        CHECK(n == 3 && buf[1] == 20 && msg == MPI_MESSAGE_NULL && st.MPI_TAG == 12, "mprobe",
              "count %d value %d", n, buf[1]);
        note("mprobe=%d,%d", n, st.MPI_TAG);

        MPI_Recv(buf, 8, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        note("recv_tag=%d", st.MPI_TAG);
    }

    /* MPI_PROC_NULL: returns at once with the documented status. */
    MPI_Recv(buf, 1, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && n == 0, "proc_null",
          "source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, n);
    note("proc_null=%d", n);

    /* Wait on MPI_REQUEST_NULL: at once, empty status. */
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Wait(&req, &st);
    CHECK(empty(&st) && req == MPI_REQUEST_NULL, "wait_null", "status not empty");
    note("wait_null=%d", empty(&st));

    /* Waitall with a null request in the middle, with and without statuses. */
    if (rank < 2) {
        int peer = 1 - rank, a = 100 + rank, b = -1, c = -1;
        MPI_Request r[3];
        MPI_Status sts[3];
        MPI_Irecv(&b, 1, MPI_INT, peer, 21, MPI_COMM_WORLD, &r[0]);
        r[1] = MPI_REQUEST_NULL;
        MPI_Isend(&a, 1, MPI_INT, peer, 21, MPI_COMM_WORLD, &r[2]);
        MPI_Waitall(3, r, sts);
        CHECK(b == 100 + peer && sts[0].MPI_SOURCE == peer && sts[0].MPI_TAG == 21 &&
                  empty(&sts[1]) && r[0] == MPI_REQUEST_NULL && r[2] == MPI_REQUEST_NULL,
              "waitall_null", "b %d source %d", b, sts[0].MPI_SOURCE);
        note("waitall_null=%d,%d,%d", b, sts[0].MPI_TAG, empty(&sts[1]));

        MPI_Irecv(&c, 1, MPI_INT, peer, 22, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(&a, 1, MPI_INT, peer, 22, MPI_COMM_WORLD, &r[1]);
        r[2] = MPI_REQUEST_NULL;
        MPI_Waitall(3, r, MPI_STATUSES_IGNORE);
        CHECK(c == 100 + peer, "waitall_statuses_ignore", "c %d", c);

        /* Waitany: all null gives MPI_UNDEFINED and an empty status. */
        int index = -5;
        r[0] = r[1] = MPI_REQUEST_NULL;
        MPI_Waitany(2, r, &index, &st);
        CHECK(index == MPI_UNDEFINED && empty(&st), "waitany_all_null", "index %d", index);
        note("waitany_null=%d", index == MPI_UNDEFINED);

        /* Waitany with a null first: index of the real one. */
        r[0] = MPI_REQUEST_NULL;
        MPI_Irecv(&b, 1, MPI_INT, peer, 23, MPI_COMM_WORLD, &r[1]);
        MPI_Send(&a, 1, MPI_INT, peer, 23, MPI_COMM_WORLD);
        MPI_Waitany(2, r, &index, &st);
        CHECK(index == 1 && st.MPI_TAG == 23 && r[1] == MPI_REQUEST_NULL, "waitany",
              "index %d tag %d", index, st.MPI_TAG);
        note("waitany=%d,%d", index, st.MPI_TAG);

        /* Waitsome until both are done; all inactive -> MPI_UNDEFINED. */
        int x = -1, y = -1, done = 0, outcount = 0, idx[2];
        MPI_Irecv(&x, 1, MPI_INT, peer, 24, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(&y, 1, MPI_INT, peer, 25, MPI_COMM_WORLD, &r[1]);
        MPI_Send(&a, 1, MPI_INT, peer, 25, MPI_COMM_WORLD);
        MPI_Send(&a, 1, MPI_INT, peer, 24, MPI_COMM_WORLD);
        while (done < 2) {
            MPI_Waitsome(2, r, &outcount, idx, sts);
            CHECK(outcount >= 1 && outcount <= 2, "waitsome_outcount", "outcount %d", outcount);
            if (outcount < 1)
                break;
            done += outcount;
        }
        MPI_Waitsome(2, r, &outcount, idx, sts);
        CHECK(x == 100 + peer && y == 100 + peer && outcount == MPI_UNDEFINED, "waitsome",
              "x %d y %d final outcount %d", x, y, outcount);
        note("waitsome=%d,%d", done, outcount == MPI_UNDEFINED);

        /* Persistent request: Wait while inactive returns at once, empty. */
        int p = -1;
        MPI_Request pr;
        MPI_Recv_init(&p, 1, MPI_INT, peer, 26, MPI_COMM_WORLD, &pr);
        MPI_Wait(&pr, &st);
        CHECK(empty(&st) && pr != MPI_REQUEST_NULL, "persistent_inactive", "not empty");
        for (int round = 0; round < 2; round++) {
            MPI_Start(&pr);
            int v = 1000 * round + rank;
            MPI_Send(&v, 1, MPI_INT, peer, 26, MPI_COMM_WORLD);
            MPI_Wait(&pr, &st);
            CHECK(p == 1000 * round + peer && st.MPI_TAG == 26 && pr != MPI_REQUEST_NULL,
                  "persistent", "round %d got %d", round, p);
        }
        MPI_Wait(&pr, &st);
        CHECK(empty(&st), "persistent_after", "status not empty after completion");
        MPI_Request_free(&pr);
        note("persistent=%d", p);

        /* Ssend and a send above the eager limit, while the receiver is late. */
        int big = 1 << 18;
        int *large = malloc(sizeof(int) * big);
        if (rank == 0) {
            for (int i = 0; i < big; i++)
                large[i] = i;
            MPI_Ssend(&a, 1, MPI_INT, 1, 27, MPI_COMM_WORLD);
            MPI_Send(large, big, MPI_INT, 1, 28, MPI_COMM_WORLD);
        } else {
            wt_sleep(0.02);
            MPI_Recv(&b, 1, MPI_INT, 0, 27, MPI_COMM_WORLD, &st);
            wt_sleep(0.02);
            MPI_Recv(large, big, MPI_INT, 0, 28, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_INT, &n);
            CHECK(b == 100 && n == big && large[big - 1] == big - 1, "large_send", "n %d", n);
            note("large=%d", n);
        }
        free(large);

        /* Sendrecv and Sendrecv_replace swap values. */
        int mine = 7 + rank, theirs = -1;
        MPI_Sendrecv(&mine, 1, MPI_INT, peer, 29, &theirs, 1, MPI_INT, MPI_ANY_SOURCE, 29,
                     MPI_COMM_WORLD, &st);
        CHECK(theirs == 7 + peer && st.MPI_SOURCE == peer, "sendrecv", "got %d", theirs);
        int swap = 50 + rank;
        MPI_Sendrecv_replace(&swap, 1, MPI_INT, peer, 30, peer, 30, MPI_COMM_WORLD, &st);
        CHECK(swap == 50 + peer && st.MPI_TAG == 30, "sendrecv_replace", "got %d", swap);
        note("sendrecv=%d,%d", theirs, swap);
    }
}

/* One receive call site used again and again with the same arguments, while
 * the communicator and the datatype it names are freed and made anew (the
 * library keeps a persistent request per call site: a freed handle that
 * comes back for another object must not receive through the old one). */
static int recv_here(void *buf, int count, MPI_Datatype type, int source, MPI_Comm comm,
                     MPI_Status *st)
{
    return MPI_Recv(buf, count, type, source, 31, comm, st);
}

static void repeated_site(void)
{
    if (size < 2 || rank > 1)
        return;
    int peer = 1 - rank;
    /* Two communicators (same ranks: only the handle tells them apart) and
     * two datatypes (1 and 2 ints) alive at once, used in turn with
     * otherwise equal arguments; each round makes them anew. */
    for (int round = 0; round < 2; round++) {
        MPI_Comm comm[2];
        MPI_Datatype type[2];
        for (int j = 0; j < 2; j++) {
            MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &comm[j]);
            MPI_Type_contiguous(1 + j, MPI_INT, &type[j]);
            MPI_Type_commit(&type[j]);
        }
        /* Each call changes one of the two from the call before. */
        static const int order[8][2] = {{0, 0}, {0, 1}, {1, 1}, {1, 0},
                                        {0, 0}, {0, 0}, {1, 0}, {1, 1}};
        for (int k = 0; k < 8; k++) {
            int c = order[k][0], t = order[k][1], me = -1;
            int out[2] = {100 * k + rank, 10 * round + t}, in[2] = {-1, -1};
            MPI_Comm_rank(comm[c], &me);
            MPI_Status st;
            if (rank == 0) {
                MPI_Send(out, 1, type[t], 1 - me, 31, comm[c]);
                recv_here(in, 1, type[t], 1 - me, comm[c], &st);
            } else {
                recv_here(in, 1, type[t], 1 - me, comm[c], &st);
                MPI_Send(out, 1, type[t], 1 - me, 31, comm[c]);
            }
            int n = -1, ints = -1;
            MPI_Get_count(&st, type[t], &n);
            MPI_Get_count(&st, MPI_INT, &ints);
            CHECK(in[0] == 100 * k + peer && st.MPI_SOURCE == 1 - me && n == 1 && ints == 1 + t &&
                      (t == 0 ? in[1] == -1 : in[1] == 10 * round + t),
                  "repeated_site", "round %d k %d got %d,%d from %d (%d ints)", round, k, in[0],
                  in[1], st.MPI_SOURCE, ints);
            note("site%d.%d=%d,%d,%d", round, k, in[0], in[1], ints);
        }
        for (int j = 0; j < 2; j++) {
            MPI_Type_free(&type[j]);
            MPI_Comm_free(&comm[j]);
        }
    }
}

static void errors(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int x = 0, rc;
    MPI_Status st;
    rc = MPI_Recv(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD, &st);
    CHECK(error_class(rc) == MPI_ERR_RANK, "err_recv_rank", "class %d", error_class(rc));
    rc = MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
    CHECK(error_class(rc) == MPI_ERR_RANK, "err_send_rank", "class %d", error_class(rc));
    rc = MPI_Probe(0, -5, MPI_COMM_WORLD, &st);
    CHECK(error_class(rc) == MPI_ERR_TAG, "err_probe_tag", "class %d", error_class(rc));
    rc = MPI_Bcast(&x, -1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(error_class(rc) == MPI_ERR_COUNT, "err_bcast_count", "class %d", error_class(rc));
    note("errors=%d,%d", error_class(MPI_ERR_RANK), error_class(rc));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void collectives(void)
{
    int me = rank + 1, sum = 0, all[64], one = -1, got[64], sumall = 0;
    long digest_sum = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    int root_value = rank == 0 ? 4242 : 0;
    MPI_Bcast(&root_value, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(root_value == 4242, "bcast", "got %d", root_value);
    MPI_Reduce(&me, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        CHECK(sum == size * (size + 1) / 2, "reduce", "got %d", sum);
    MPI_Allreduce(&me, &sumall, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sumall == size * (size + 1) / 2, "allreduce", "got %d", sumall);
    int inplace = me;
    MPI_Allreduce(MPI_IN_PLACE, &inplace, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(inplace == size, "allreduce_in_place", "got %d", inplace);
    MPI_Gather(&me, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int i = 0; i < size; i++)
            CHECK(all[i] == i + 1, "gather", "slot %d = %d", i, all[i]);
    for (int i = 0; i < size; i++)
        all[i] = 10 * i;
    MPI_Scatter(all, 1, MPI_INT, &one, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(one == 10 * rank, "scatter", "got %d", one);
    MPI_Allgather(&me, 1, MPI_INT, got, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++)
        CHECK(got[i] == i + 1, "allgather", "slot %d = %d", i, got[i]);
    int sendv[64], recvv[64];
    for (int i = 0; i < size; i++)
        sendv[i] = 100 * rank + i;
    MPI_Alltoall(sendv, 1, MPI_INT, recvv, 1, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++)
        CHECK(recvv[i] == 100 * i + rank, "alltoall", "slot %d = %d", i, recvv[i]);
    int counts[64], displs[64];
    for (int i = 0; i < size; i++) {
        counts[i] = 1;
        displs[i] = i;
    }
    MPI_Allgatherv(&me, 1, MPI_INT, got, counts, displs, MPI_INT, MPI_COMM_WORLD);
    MPI_Gatherv(&me, 1, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Scatterv(sendv, counts, displs, MPI_INT, &one, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Alltoallv(sendv, counts, displs, MPI_INT, recvv, counts, displs, MPI_INT,
                  MPI_COMM_WORLD);
    int rs = -1;
    MPI_Reduce_scatter(sendv, &rs, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int expect = 0;
    for (int r = 0; r < size; r++)
        expect += 100 * r + rank;
    CHECK(rs == expect, "reduce_scatter", "got %d want %d", rs, expect);
    int rsb = -1;
    MPI_Reduce_scatter_block(sendv, &rsb, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rsb == expect, "reduce_scatter_block", "got %d want %d", rsb, expect);
    for (int i = 0; i < size; i++)
        digest_sum += got[i] + recvv[i];
    note("coll=%d,%d,%d,%ld", sumall, inplace, rs, digest_sum);
}

int wt_semantics(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || size > 64) {
        if (rank == 0)
            fprintf(stderr, "semantics needs 2 to 64 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    p2p();
    repeated_site();
    errors();
    collectives();
    printf("{\"rank\": %d, \"failures\": %d, \"digest\": \"%s\"}\n", rank, failures, digest);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
