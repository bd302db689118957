/* Who talks to whom: the bytes and messages this rank sent to each rank of
 * MPI_COMM_WORLD, counted at the sender from the calls the library already
 * intercepts, while telemetry is on (each rank writes its own row).
 *
 * Point-to-point sends count by their destination, one message each.
 * A collective counts by its logical pattern, the same whatever algorithm
 * the MPI runs: one message from a rank to each rank its data must reach,
 * carrying that rank's share (Bcast and Scatter: root to every other rank;
 * Gather and Reduce: every other rank to the root; the all- forms: every
 * rank to every other; Barrier: a message of 0 B to every other rank).
 * A tree or a ring would move other bytes on the wire; the logical pattern
 * is what the program asked for, and it does not change with the MPI.
 * Collectives on intercommunicators are not counted. */
#define _GNU_SOURCE
#include "shoalwait.h"
#include "wrap.h"

#include <pthread.h>
#include <stdlib.h>

/* Per world rank: [0] p2p bytes, [1] p2p messages, [2] coll bytes, [3] coll messages. */
static int64_t (*counts)[4];
static int world_size;
static int keyval = MPI_KEYVAL_INVALID;

/* A communicator's ranks in MPI_COMM_WORLD, kept as an attribute of it. */
struct members {
    int inter;   /* an intercommunicator: peers are its remote group */
    int n;
    int world[];
};

static int forget(MPI_Comm comm, int key, void *value, void *extra)
{
    (void)comm, (void)key, (void)extra;
    free(value);
    return MPI_SUCCESS;
}

void sw_traffic_start(void)
{
    if (!sw_cfg.timed)
        return;
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    counts = calloc((size_t)world_size, sizeof *counts);
    if (counts)
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, forget, &keyval, NULL);
}

static struct members *make_members(MPI_Comm comm)
{
    struct members *m = NULL;
    int inter = 0, n = 0;
    MPI_Group group, world;
    PMPI_Comm_test_inter(comm, &inter);
    if ((inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group)) != MPI_SUCCESS)
        return NULL;
    PMPI_Group_size(group, &n);
    m = malloc(sizeof *m + 2 * (size_t)n * sizeof(int));
    if (m) {
        int *local = m->world + n;   /* scratch after the table */
        m->inter = inter;
        m->n = n;
        for (int i = 0; i < n; i++)
            local[i] = i;
        PMPI_Comm_group(MPI_COMM_WORLD, &world);
        PMPI_Group_translate_ranks(group, n, local, world, m->world);
        PMPI_Group_free(&world);
        if (PMPI_Comm_set_attr(comm, keyval, m) != MPI_SUCCESS) {
            free(m);
            m = NULL;
        }
    }
    PMPI_Group_free(&group);
    return m;
}

/* Made once per communicator, under a lock: two threads making it at once would
 * each set the attribute, and setting it again frees the value the other holds. */
static pthread_mutex_t making = PTHREAD_MUTEX_INITIALIZER;

static const struct members *members_of(MPI_Comm comm)
{
    struct members *m = NULL;
    int found = 0;
    if (PMPI_Comm_get_attr(comm, keyval, &m, &found) == MPI_SUCCESS && found)
        return m;
    pthread_mutex_lock(&making);
    if (PMPI_Comm_get_attr(comm, keyval, &m, &found) != MPI_SUCCESS || !found)
        m = make_members(comm);
    pthread_mutex_unlock(&making);
    return m;
}

static int64_t bytes_of(int count, MPI_Datatype type)
{
    int size = 0;
    if (count <= 0 || PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0)
        return 0;
    return (int64_t)count * size;
}

static void add(int world, int kind, int64_t bytes)
{
    if (world < 0 || world >= world_size)   /* MPI_UNDEFINED: not a rank of MPI_COMM_WORLD */
        return;
    __atomic_fetch_add(&counts[world][2 * kind], bytes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&counts[world][2 * kind + 1], 1, __ATOMIC_RELAXED);
}

/* The communicator's table when traffic is being counted, else NULL. */
static const struct members *counting(MPI_Comm comm)
{
    if (!counts || keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL)
        return NULL;
    return members_of(comm);
}

void sw_traffic_send(MPI_Comm comm, int dest, int count, MPI_Datatype type)
{
    const struct members *m = counting(comm);
    if (m && dest >= 0 && dest < m->n)   /* MPI_PROC_NULL sends nothing */
        add(m->world[dest], 0, bytes_of(count, type));
}

/* The collective's own members, or NULL (not counted: off, or an intercommunicator). */
static const struct members *coll_members(MPI_Comm comm, int *me)
{
    const struct members *m = counting(comm);
    if (!m || m->inter)
        return NULL;
    *me = -1;
    PMPI_Comm_rank(comm, me);
    return *me < 0 ? NULL : m;
}

void sw_traffic_to_one(MPI_Comm comm, int to, int count, MPI_Datatype type)
{
    int me;
    const struct members *m = coll_members(comm, &me);
    if (m && to != me && to >= 0 && to < m->n)
        add(m->world[to], 1, bytes_of(count, type));
}

void sw_traffic_to_all(MPI_Comm comm, int count, MPI_Datatype type)
{
    int me;
    const struct members *m = coll_members(comm, &me);
    if (!m)
        return;
    int64_t b = bytes_of(count, type);
    for (int i = 0; i < m->n; i++)
        if (i != me)
            add(m->world[i], 1, b);
}

void sw_traffic_to_each(MPI_Comm comm, const int items[], MPI_Datatype type)
{
    int me;
    const struct members *m = coll_members(comm, &me);
    if (!m || !items)
        return;
    for (int i = 0; i < m->n; i++)
        if (i != me)
            add(m->world[i], 1, bytes_of(items[i], type));
}

void sw_traffic_write(FILE *f)
{
    fputs(",\n  \"traffic\": [", f);
    const char *sep = "\n", *kinds[2] = {"p2p", "coll"};
    for (int d = 0; counts && d < world_size; d++)
        for (int k = 0; k < 2; k++) {
            int64_t msgs = __atomic_load_n(&counts[d][2 * k + 1], __ATOMIC_RELAXED);
            if (!msgs)
                continue;
            fprintf(f, "%s    {\"dst\": %d, \"kind\": \"%s\", \"bytes\": %lld, \"messages\": %lld}",
                    sep, d, kinds[k],
                    (long long)__atomic_load_n(&counts[d][2 * k], __ATOMIC_RELAXED),
                    (long long)msgs);
            sep = ",\n";
        }
    fputs(*sep == ',' ? "\n  ]" : "]", f);
}
