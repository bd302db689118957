/* libshoalplantcast: a broadcast sent down a shared medium once.
 *
 * A cable plant's downstream is a broadcast medium: one transmission from the head-end
 * reaches every box. MPI_Bcast knows nothing of it and sends the message along a tree of
 * point-to-point transfers: on a plant of N boxes, N - 1 copies go up the shared upstream
 * and down again. Preloaded ahead of the MPI (and of libshoalwait), this library sends an
 * MPI_Bcast on MPI_COMM_WORLD of at least SHOAL_PLANTCAST_MIN_B bytes as UDP multicast
 * datagrams instead: the root's copy crosses its upstream once and the medium carries it
 * down once to every device. The program calls MPI_Bcast unchanged.
 *
 * Reliable: every datagram names the broadcast (job, sequence number) and its place in
 * the message, and the root ends its datagrams with END markers. Then one MPI_Gather of
 * one integer per rank (itself waited on by libshoalwait when that is loaded) tells the
 * root which ranks still lack a chunk; each of those sends the root the bitmap of what it
 * lacks and gets those chunks back point to point, and every other rank is done. The
 * gather is a tree whose leaves return at once: on 128 set-top boxes an MPI_Allreduce of
 * the lacking chunks' bitmaps, which every rank would wait for, cost 0.74-0.95 s of the
 * boxes' CPU, more than the message's own trip. The root paces its datagrams at SHOAL_PLANTCAST_RATE_BPS
 * (its upstream's rate: a modem drops what exceeds its buffer). The counting and the
 * repairs run on a duplicate of MPI_COMM_WORLD, apart from the program's own messages.
 *
 * Other calls (smaller messages, other communicators, datatypes that are not contiguous)
 * go on to the next MPI_Bcast (libshoalwait's, else the MPI's). Configuration:
 *   SHOAL_PLANTCAST         group:port, e.g. 239.77.1.1:47100 (unset: the library is idle)
 *   SHOAL_PLANTCAST_IF      the interface the group is on (default eth0)
 *   SHOAL_PLANTCAST_RATE_BPS the root's pace in bit/s (0 or unset: unpaced)
 *   SHOAL_PLANTCAST_MIN_B   the smallest message sent this way (default 8192)
 *   SHOAL_PLANTCAST_IDLE_S  how long a rank waits for the next datagram of a broadcast once
 *                           one came (default 0.5); the first may take SHOAL_PLANTCAST_WAIT_S (60)
 *   SHOAL_PLANTCAST_STATS   a directory: each rank writes plantcast-RANK.json at MPI_Finalize */
#define _GNU_SOURCE
#include <mpi.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x53504331u /* "SPC1" */
#define CHUNK_B 1400      /* a datagram's payload: with its header, UDP and IP, inside 1500 */
#define END_COPIES 3
#define BATCH 64 /* datagrams read at one wake-up */
#define TAG_ASK 1  /* a rank's bitmap of the chunks it lacks, to the root */
#define TAG_FILL 2 /* those chunks, back from the root */
#define WIRE_OVERHEAD_B 42 /* UDP, IP and Ethernet headers: what the pace counts beside the datagram */

enum { DATA = 0, END = 1 };

struct header { /* network byte order */
    uint32_t magic, job, seq, offset, total, kind;
};

typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*finalize_fn)(void);

static struct {
    int configured, on, failed, ready, fd, rank, size;
    struct sockaddr_in group;
    char ifname[IF_NAMESIZE];
    double rate_bps, idle_s, wait_s;
    long min_B;
    uint32_t job, seq;
    MPI_Comm comm; /* a duplicate of MPI_COMM_WORLD: the counting and the repairs */
    long bcasts, repaired_ranks, resent_chunks, fallbacks;
    unsigned long long bytes;
    const char *stats_dir;
} pc = {.fd = -1, .comm = MPI_COMM_NULL};

static bcast_fn next_bcast(void)
{
    static bcast_fn next;
    if (!next) {
        next = (bcast_fn)dlsym(RTLD_NEXT, "MPI_Bcast");
        if (!next)
            next = PMPI_Bcast;
    }
    return next;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static double env_double(const char *name, double fallback)
{
    const char *v = getenv(name);
    return v && *v ? strtod(v, NULL) : fallback;
}

static void configure(void)
{
    pc.configured = 1;
    const char *spec = getenv("SHOAL_PLANTCAST");
    if (!spec || !*spec)
        return;
    char address[64];
    const char *colon = strrchr(spec, ':');
    if (!colon || (size_t)(colon - spec) >= sizeof address) {
        fprintf(stderr, "libshoalplantcast: SHOAL_PLANTCAST=%s is not GROUP:PORT; broadcasts go by the MPI\n", spec);
        return;
    }
    memcpy(address, spec, (size_t)(colon - spec));
    address[colon - spec] = '\0';
    memset(&pc.group, 0, sizeof pc.group);
    pc.group.sin_family = AF_INET;
    pc.group.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, address, &pc.group.sin_addr) != 1 || !IN_MULTICAST(ntohl(pc.group.sin_addr.s_addr))) {
        fprintf(stderr, "libshoalplantcast: %s is not a multicast group; broadcasts go by the MPI\n", address);
        return;
    }
    const char *ifname = getenv("SHOAL_PLANTCAST_IF");
    snprintf(pc.ifname, sizeof pc.ifname, "%s", ifname && *ifname ? ifname : "eth0");
    pc.rate_bps = env_double("SHOAL_PLANTCAST_RATE_BPS", 0.0);
    pc.min_B = (long)env_double("SHOAL_PLANTCAST_MIN_B", 8192.0);
    pc.idle_s = env_double("SHOAL_PLANTCAST_IDLE_S", 0.5);
    pc.wait_s = env_double("SHOAL_PLANTCAST_WAIT_S", 60.0);
    pc.stats_dir = getenv("SHOAL_PLANTCAST_STATS");
    pc.on = 1;
}

/* This rank's socket: bound to the group's port, joined on the medium's interface, sending
 * there (to itself too: another rank on the root's device needs the datagrams). 0 on success. */
static int open_socket(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1, buffer_B = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_B, sizeof buffer_B);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = pc.group.sin_port,
                              .sin_addr.s_addr = pc.group.sin_addr.s_addr};
    struct ip_mreqn join = {.imr_multiaddr = pc.group.sin_addr, .imr_ifindex = (int)if_nametoindex(pc.ifname)};
    unsigned char ttl = 1, loop = 1;
    if (join.imr_ifindex == 0 || bind(fd, (struct sockaddr *)&any, sizeof any) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &join, sizeof join) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop) < 0) {
        fprintf(stderr, "libshoalplantcast: rank %d cannot use %s:%d on %s (%s); broadcasts go by the MPI\n",
                pc.rank, inet_ntoa(pc.group.sin_addr), ntohs(pc.group.sin_port), pc.ifname, strerror(errno));
        close(fd);
        return -1;
    }
    pc.fd = fd;
    return 0;
}

/* First broadcast: every rank opens its socket, and all agree that every rank could (or all
 * fall back for good) and on the job's identity. Collective on MPI_COMM_WORLD: every rank
 * makes the same first eligible call. Returns with every rank joined. */
static void set_up(void)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &pc.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &pc.size);
    int broken = open_socket() != 0, any_broken = 1;
    PMPI_Allreduce(&broken, &any_broken, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    uint32_t job = 0;
    if (pc.rank == 0) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        job = (uint32_t)(t.tv_nsec ^ ((uint32_t)getpid() << 12) ^ (uint32_t)t.tv_sec);
    }
    PMPI_Bcast(&job, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
    pc.job = job;
    pc.ready = !any_broken && PMPI_Comm_dup(MPI_COMM_WORLD, &pc.comm) == MPI_SUCCESS;
    pc.failed = !pc.ready;
}

static int eligible(int count, MPI_Datatype type, MPI_Comm comm, size_t *bytes)
{
    if (!pc.configured)
        configure();
    if (!pc.on || pc.failed || comm != MPI_COMM_WORLD || count <= 0)
        return 0;
    int size = 0, world = 0;
    MPI_Aint lb = 0, extent = 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS || PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS)
        return 0;
    if (lb != 0 || extent != size || size <= 0) /* not one contiguous block */
        return 0;
    *bytes = (size_t)count * (size_t)size;
    PMPI_Comm_size(comm, &world);
    return world > 1 && *bytes >= (size_t)pc.min_B && *bytes < (size_t)UINT32_MAX;
}

static void send_datagram(const struct header *h, const void *payload, size_t n)
{
    struct iovec parts[2] = {{(void *)h, sizeof *h}, {(void *)payload, n}};
    struct msghdr msg = {.msg_name = &pc.group, .msg_namelen = sizeof pc.group, .msg_iov = parts,
                         .msg_iovlen = payload ? 2 : 1};
    for (int tries = 0; tries < 1000; tries++) {
        if (sendmsg(pc.fd, &msg, 0) >= 0 || (errno != EAGAIN && errno != ENOBUFS && errno != EINTR))
            return; /* a datagram that cannot go is sent point to point afterwards */
        sleep_until(now_s() + 0.001);
    }
}

static struct header make_header(uint32_t offset, uint32_t total, uint32_t kind)
{
    struct header h = {htonl(MAGIC), htonl(pc.job), htonl(pc.seq), htonl(offset), htonl(total), htonl(kind)};
    return h;
}

static size_t chunk_len(size_t len, size_t i)
{
    size_t offset = i * CHUNK_B;
    return len - offset < CHUNK_B ? len - offset : CHUNK_B;
}

/* The root: every chunk, then the END markers, at the pace. */
static void send_all(const char *buf, size_t len, size_t chunks)
{
    double start = now_s(), bits = 0.0;
    for (size_t i = 0; i < chunks + END_COPIES; i++) {
        int end = i >= chunks;
        size_t n = end ? 0 : chunk_len(len, i);
        struct header h = make_header(end ? 0 : (uint32_t)(i * CHUNK_B), (uint32_t)len, end ? END : DATA);
        send_datagram(&h, end ? NULL : buf + i * CHUNK_B, n);
        if (pc.rate_bps > 0) {
            bits += 8.0 * (double)(sizeof h + n + WIRE_OVERHEAD_B);
            double due = start + bits / pc.rate_bps;
            if (due > now_s())
                sleep_until(due);
        }
    }
}

/* One datagram into place if it belongs to this broadcast; 1 at its END marker. */
static int take(const char *datagram, size_t got, char *buf, size_t len, unsigned char *have, size_t chunks,
                size_t *held)
{
    struct header h;
    if (got < sizeof h)
        return 0;
    memcpy(&h, datagram, sizeof h);
    if (ntohl(h.magic) != MAGIC || ntohl(h.job) != pc.job || ntohl(h.seq) != pc.seq || ntohl(h.total) != len)
        return 0; /* another job's, or an earlier broadcast's */
    if (ntohl(h.kind) == END)
        return 1;
    uint32_t offset = ntohl(h.offset);
    size_t i = offset / CHUNK_B, n = got - sizeof h;
    if (offset % CHUNK_B || i >= chunks || n != chunk_len(len, i))
        return 0;
    if (!(have[i / 8] & (1u << (i % 8)))) {
        memcpy(buf + offset, datagram + sizeof h, n);
        have[i / 8] |= (unsigned char)(1u << (i % 8));
        (*held)++;
    }
    return 0;
}

/* Any other rank: datagrams of this broadcast into ``buf`` until it has every chunk, the
 * END arrives, or the datagrams stop (what is missing then comes point to point). They are
 * read in batches, with a sleep between batches while more arrive at the root's pace: a
 * set-top box's core may run a millisecond in 161 (its budget at D = 2), and a wake-up per
 * datagram would spend it. */
static void receive_all(char *buf, size_t len, unsigned char *have, size_t chunks, size_t *held)
{
    static char datagrams[BATCH][sizeof(struct header) + CHUNK_B];
    struct mmsghdr msgs[BATCH];
    struct iovec parts[BATCH];
    double gap_s = pc.rate_bps > 0 ? 8.0 * (double)(sizeof(struct header) + CHUNK_B + WIRE_OVERHEAD_B) / pc.rate_bps
                                   : 0.0;
    int heard = 0;
    while (*held < chunks) {
        struct pollfd p = {.fd = pc.fd, .events = POLLIN};
        int ready = poll(&p, 1, (int)((heard ? pc.idle_s : pc.wait_s) * 1000.0));
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return;
        heard = 1;
        int got;
        do {
            memset(msgs, 0, sizeof msgs);
            for (int k = 0; k < BATCH; k++) {
                parts[k] = (struct iovec){datagrams[k], sizeof datagrams[k]};
                msgs[k].msg_hdr.msg_iov = &parts[k];
                msgs[k].msg_hdr.msg_iovlen = 1;
            }
            got = recvmmsg(pc.fd, msgs, BATCH, MSG_DONTWAIT, NULL);
            for (int k = 0; k < got; k++)
                if (take(datagrams[k], msgs[k].msg_len, buf, len, have, chunks, held))
                    return;
        } while (got == BATCH && *held < chunks);
        size_t left = chunks - *held;
        if (gap_s > 0 && left > 0)
            sleep_until(now_s() + gap_s * (double)(left < BATCH / 2 ? left : BATCH / 2));
    }
}

/* The root: the chunks lacking rank ``rank`` asks for, in chunk order, in one message. */
static int serve_repair(const char *buf, size_t len, size_t chunks, unsigned char *ask, size_t map_B, char *scratch,
                        int rank)
{
    int rc = MPI_Recv(ask, (int)map_B, MPI_BYTE, rank, TAG_ASK, pc.comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return rc;
    size_t n = 0;
    for (size_t i = 0; i < chunks; i++)
        if (ask[i / 8] & (1u << (i % 8))) {
            memcpy(scratch + n, buf + i * CHUNK_B, chunk_len(len, i));
            n += chunk_len(len, i);
            pc.resent_chunks++;
        }
    return MPI_Send(scratch, (int)n, MPI_BYTE, rank, TAG_FILL, pc.comm);
}

/* A lacking rank: ask the root for what it lacks and put it in place. */
static int fetch_repair(char *buf, size_t len, size_t chunks, unsigned char *lack, size_t map_B, char *scratch,
                        int root)
{
    int rc = MPI_Send(lack, (int)map_B, MPI_BYTE, root, TAG_ASK, pc.comm);
    size_t n = 0;
    for (size_t i = 0; i < chunks; i++)
        if (lack[i / 8] & (1u << (i % 8)))
            n += chunk_len(len, i);
    if (rc == MPI_SUCCESS)
        rc = MPI_Recv(scratch, (int)n, MPI_BYTE, root, TAG_FILL, pc.comm, MPI_STATUS_IGNORE);
    for (size_t i = 0, at = 0; i < chunks && rc == MPI_SUCCESS; i++)
        if (lack[i / 8] & (1u << (i % 8))) {
            memcpy(buf + i * CHUNK_B, scratch + at, chunk_len(len, i));
            at += chunk_len(len, i);
        }
    return rc;
}

static void drain(void)
{
    char scrap[64];
    while (recv(pc.fd, scrap, sizeof scrap, MSG_DONTWAIT) >= 0)
        ;
}

static int plantcast(void *buf, size_t len, int root, int count, MPI_Datatype type)
{
    size_t chunks = (len + CHUNK_B - 1) / CHUNK_B, map_B = (chunks + 7) / 8, held = 0;
    unsigned char *have = calloc(map_B, 1), *lack = calloc(map_B, 1);
    char *scratch = malloc(len);
    if (!have || !lack || !scratch) { /* every rank that can go on takes the MPI's way alike */
        free(have), free(lack), free(scratch);
        pc.fallbacks++;
        return next_bcast()(buf, count, type, root, MPI_COMM_WORLD);
    }
    pc.seq++;
    int lacking = 0, rc;
    if (pc.rank == root) {
        send_all(buf, len, chunks);
    } else {
        receive_all(buf, len, have, chunks, &held);
        for (size_t i = 0; i < chunks; i++)
            if (!(have[i / 8] & (1u << (i % 8))))
                lack[i / 8] |= (unsigned char)(1u << (i % 8));
        lacking = held < chunks;
    }
    /* Who lacks a chunk, gathered at the root (named, not counted: a receive from any source
     * needs another transport on emulated devices). Through the global symbols:
     * libshoalwait's waits when it is loaded. */
    int *lacking_ranks = pc.rank == root ? calloc((size_t)pc.size, sizeof(int)) : NULL;
    rc = MPI_Gather(&lacking, 1, MPI_INT, lacking_ranks, 1, MPI_INT, root, pc.comm);
    if (rc == MPI_SUCCESS && pc.rank == root) {
        for (int r = 0; r < pc.size && rc == MPI_SUCCESS; r++)
            if (lacking_ranks[r]) {
                pc.repaired_ranks++;
                rc = serve_repair(buf, len, chunks, lack, map_B, scratch, r);
            }
        drain(); /* its own datagrams, looped back */
    } else if (rc == MPI_SUCCESS && lacking) {
        rc = fetch_repair(buf, len, chunks, lack, map_B, scratch, root);
    }
    free(have), free(lack), free(scratch), free(lacking_ranks);
    pc.bcasts++;
    pc.bytes += len;
    return rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    size_t len = 0;
    if (!eligible(count, type, comm, &len))
        return next_bcast()(buf, count, type, root, comm);
    if (!pc.ready) {
        set_up();
        if (!pc.ready)
            return next_bcast()(buf, count, type, root, comm);
    }
    return plantcast(buf, len, root, count, type);
}

int MPI_Finalize(void)
{
    if (pc.ready && pc.stats_dir && *pc.stats_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/plantcast-%d.json", pc.stats_dir, pc.rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "{\"rank\": %d, \"bcasts\": %ld, \"bytes\": %llu, \"repaired_ranks\": %ld, "
                       "\"resent_chunks\": %ld, \"fallbacks\": %ld, \"chunk_B\": %d}\n",
                    pc.rank, pc.bcasts, pc.bytes, pc.repaired_ranks, pc.resent_chunks, pc.fallbacks, CHUNK_B);
            fclose(f);
        }
    }
    if (pc.comm != MPI_COMM_NULL)
        PMPI_Comm_free(&pc.comm);
    if (pc.fd >= 0)
        close(pc.fd);
    pc.fd = -1;
    pc.ready = 0;
    finalize_fn next = (finalize_fn)dlsym(RTLD_NEXT, "MPI_Finalize");
    return next ? next() : PMPI_Finalize();
}
