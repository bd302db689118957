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
 * the message. After each round the root ends with END markers; every rank then ORs the
 * bitmap of the chunks it still lacks into one (MPI_Allreduce, itself waited on by
 * libshoalwait when that is loaded), and the root sends those chunks again, until no rank
 * lacks any. After MAX_ROUNDS the message goes by the MPI's own broadcast. The root paces
 * its datagrams at SHOAL_PLANTCAST_RATE_BPS (its upstream's rate: a modem drops what
 * exceeds its buffer).
 *
 * Other calls (smaller messages, other communicators, datatypes that are not contiguous)
 * go on to the next MPI_Bcast (libshoalwait's, else the MPI's). Configuration:
 *   SHOAL_PLANTCAST         group:port, e.g. 239.255.42.1:47000 (unset: the library is idle)
 *   SHOAL_PLANTCAST_IF      the interface the group is on (default eth0)
 *   SHOAL_PLANTCAST_RATE_BPS the root's pace in bit/s (0 or unset: unpaced)
 *   SHOAL_PLANTCAST_MIN_B   the smallest message sent this way (default 8192)
 *   SHOAL_PLANTCAST_IDLE_S  how long a rank waits for the next datagram of a round once one
 *                           came (default 0.5); the first may take SHOAL_PLANTCAST_WAIT_S (60)
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
#define MAX_ROUNDS 16
#define END_COPIES 3
#define WIRE_OVERHEAD_B 42 /* UDP, IP and Ethernet headers: what the pace counts beside the datagram */

enum { DATA = 0, END = 1 };

struct header { /* network byte order */
    uint32_t magic, job, seq, round, offset, total, kind;
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
    long bcasts, rounds, resent_chunks, fallbacks;
    unsigned long long bytes;
    const char *stats_dir;
} pc = {.fd = -1};

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
    pc.ready = !any_broken;
    pc.failed = any_broken;
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
            return; /* a datagram that cannot go is one the round sends again */
        sleep_until(now_s() + 0.001);
    }
}

static struct header make_header(uint32_t round, uint32_t offset, uint32_t total, uint32_t kind)
{
    struct header h = {htonl(MAGIC), htonl(pc.job), htonl(pc.seq), htonl(round), htonl(offset), htonl(total),
                       htonl(kind)};
    return h;
}

/* The root: the chunks ``need`` marks, then the round's END markers, at the pace. */
static void send_round(const char *buf, size_t len, const unsigned char *need, size_t chunks, uint32_t round)
{
    double start = now_s(), bits = 0.0;
    for (size_t i = 0; i <= chunks + END_COPIES - 1; i++) {
        int end = i >= chunks;
        if (!end && !(need[i / 8] & (1u << (i % 8))))
            continue;
        size_t offset = end ? 0 : i * CHUNK_B, n = end ? 0 : (len - offset < CHUNK_B ? len - offset : CHUNK_B);
        struct header h = make_header(round, (uint32_t)offset, (uint32_t)len, end ? END : DATA);
        send_datagram(&h, end ? NULL : buf + offset, n);
        if (pc.rate_bps > 0) {
            bits += 8.0 * (double)(sizeof h + n + WIRE_OVERHEAD_B);
            double due = start + bits / pc.rate_bps;
            if (due > now_s())
                sleep_until(due);
        }
    }
}

/* Any other rank: datagrams of this broadcast into ``buf`` until it has every chunk, the
 * round's END arrives, or the datagrams stop (then what is missing goes into the next round). */
static void receive_round(char *buf, size_t len, unsigned char *have, size_t chunks, size_t *held, uint32_t round)
{
    static char datagram[sizeof(struct header) + CHUNK_B];
    int heard = 0;
    while (*held < chunks) {
        struct pollfd p = {.fd = pc.fd, .events = POLLIN};
        int ready = poll(&p, 1, (int)((heard ? pc.idle_s : pc.wait_s) * 1000.0));
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return;
        ssize_t got = recv(pc.fd, datagram, sizeof datagram, 0);
        if (got < (ssize_t)sizeof(struct header))
            continue;
        struct header h;
        memcpy(&h, datagram, sizeof h);
        if (ntohl(h.magic) != MAGIC || ntohl(h.job) != pc.job || ntohl(h.seq) != pc.seq)
            continue; /* another job's, or an earlier broadcast's */
        uint32_t offset = ntohl(h.offset), kind = ntohl(h.kind);
        size_t n = (size_t)got - sizeof h;
        if (ntohl(h.total) != len)
            continue;
        if (kind == END) {
            if (ntohl(h.round) == round)
                return;
            continue; /* a copy of an earlier round's END: the root may not have begun this one */
        }
        heard = 1;
        size_t i = offset / CHUNK_B;
        if (offset % CHUNK_B || i >= chunks || offset + n > len ||
            n != (len - offset < CHUNK_B ? len - offset : CHUNK_B))
            continue;
        if (!(have[i / 8] & (1u << (i % 8)))) {
            memcpy(buf + offset, datagram + sizeof h, n);
            have[i / 8] |= (unsigned char)(1u << (i % 8));
            (*held)++;
        }
    }
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
    unsigned char *need = malloc(map_B), *lack = malloc(map_B), *have = calloc(map_B, 1);
    if (!need || !lack || !have) {
        free(need), free(lack), free(have);
        pc.fallbacks++;
        return next_bcast()(buf, count, type, root, MPI_COMM_WORLD);
    }
    memset(need, 0xff, map_B);
    if (chunks % 8)
        need[map_B - 1] = (unsigned char)((1u << (chunks % 8)) - 1);
    pc.seq++;
    int rc = MPI_SUCCESS;
    for (uint32_t round = 0;; round++) {
        pc.rounds++;
        if (pc.rank == root) {
            send_round(buf, len, need, chunks, round);
            memset(lack, 0, map_B);
        } else {
            receive_round(buf, len, have, chunks, &held, round);
            for (size_t k = 0; k < map_B; k++)
                lack[k] = (unsigned char)(~have[k] & need[k]);
        }
        /* Through the global symbol: libshoalwait's wait when it is loaded. */
        rc = MPI_Allreduce(lack, need, (int)map_B, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD);
        size_t missing = 0;
        for (size_t k = 0; k < map_B && rc == MPI_SUCCESS; k++)
            missing += (size_t)__builtin_popcount(need[k]);
        if (rc != MPI_SUCCESS || missing == 0)
            break;
        if (round + 1 >= MAX_ROUNDS) {
            pc.fallbacks++;
            rc = next_bcast()(buf, count, type, root, MPI_COMM_WORLD);
            break;
        }
        pc.resent_chunks += (long)missing;
    }
    if (pc.rank == root)
        drain(); /* its own datagrams, looped back */
    free(need), free(lack), free(have);
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
            fprintf(f, "{\"rank\": %d, \"bcasts\": %ld, \"bytes\": %llu, \"rounds\": %ld, "
                       "\"resent_chunks\": %ld, \"fallbacks\": %ld, \"chunk_B\": %d}\n",
                    pc.rank, pc.bcasts, pc.bytes, pc.rounds, pc.resent_chunks, pc.fallbacks, CHUNK_B);
            fclose(f);
        }
    }
    if (pc.fd >= 0)
        close(pc.fd);
    pc.fd = -1;
    pc.ready = 0;
    finalize_fn next = (finalize_fn)dlsym(RTLD_NEXT, "MPI_Finalize");
    return next ? next() : PMPI_Finalize();
}
