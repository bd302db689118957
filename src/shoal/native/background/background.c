/* shoal-background: a device's work beside its ranks, and the head-end's stream to it.
 *
 *   shoal-background decode --port P [--group G] --period-s T --work-s W [--buffer-s B]
 *                           [--wake-s S] --stats FILE
 *   shoal-background send --to ADDR:PORT[,ADDR:PORT...] --rate-bps R --stats FILE
 *
 * decode runs inside a device core's cgroup (shoal/cluster/background.py starts it
 * through the device's placement): every T seconds (a frame) it takes what the
 * stream has delivered from its UDP socket (joined to multicast group G if given)
 * and burns the rest of W seconds of its own CPU time since the last frame's (waking up
 * and taking the datagrams included), counted on the thread's CPU clock,
 * so a core held to its quota stretches the frame's wall time rather than shortening
 * its work, as a decoder's fixed work per frame would be. A decoder shows a frame from
 * its buffer B seconds after it is due (B: what the stream's decoder buffer holds), so
 * a frame is late when its work ends more than B after its due time, and frames due
 * more than B ago are dropped unworked (a decoder that falls that far behind skips them).
 * It wakes at most once every S seconds (default T) and then works every frame due: a
 * wake-up costs the host tens of microseconds, which a device core of a hundredth of a
 * host core would pay as a large share of itself at 30 wake-ups a second.
 *
 * send runs in the head: R bits a second to each destination, in datagrams of seven
 * MPEG transport-stream packets (1316 B, how MPEG-2 travels over UDP), destinations
 * in turn, on a schedule that catches up after a short stall (up to 1 s of backlog).
 *
 * Both print "ready" once their socket is set up; SIGUSR1 writes their counters to
 * FILE (JSON), SIGTERM or SIGINT writes them and exits.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DATAGRAM_B 1316 /* 7 x 188-byte transport-stream packets */
#define TS_PACKET_B 188
#define MAX_DESTINATIONS 256
#define BACKLOG_S 1.0
#define BATCH 64 /* datagrams taken per call */

static volatile sig_atomic_t stop_asked, stats_asked;

static void on_stop(int sig) { (void)sig; stop_asked = 1; }
static void on_stats(int sig) { (void)sig; stats_asked = 1; }

static double now_s(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double t) {
    struct timespec ts;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    /* EINTR (a signal) returns early: the loop looks at its flags and sleeps again. */
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static void die(const char *what) {
    fprintf(stderr, "shoal-background: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void usage(void) {
    fprintf(stderr, "usage: shoal-background decode --port P [--group G] --period-s T --work-s W "
                    "[--buffer-s B] --stats FILE\n       shoal-background send --to ADDR:PORT[,...] --rate-bps R "
                    "--stats FILE\n");
    exit(2);
}

static void handle_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_stats;
    sigaction(SIGUSR1, &sa, NULL);
}

/* Written whole to FILE.tmp, then renamed: a reader never sees half a record. */
static void write_stats(const char *path, const char *json) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fputs(json, f);
    fclose(f);
    rename(tmp, path);
}

static unsigned eth0_index(void) {
    unsigned index = if_nametoindex("eth0");
    return index; /* 0: let the kernel choose (no eth0: a test on loopback) */
}

/* Burn until this thread has used `work` more seconds of CPU than at `from`. */
static void burn(double from, double work) {
    volatile uint64_t x = 88172645463325252ULL;
    while (now_s(CLOCK_THREAD_CPUTIME_ID) - from < work) {
        for (int i = 0; i < 512; i++) { /* xorshift: work the compiler cannot drop */
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        }
        if (stop_asked) return;
    }
}

static int decode(int argc, char **argv) {
    int port = 0;
    const char *group = NULL, *stats = NULL;
    double period = 0, work = -1, buffer = 0, wake = 0;
    for (int i = 0; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--port")) port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--group")) group = argv[++i];
        else if (!strcmp(argv[i], "--period-s")) period = atof(argv[++i]);
        else if (!strcmp(argv[i], "--work-s")) work = atof(argv[++i]);
        else if (!strcmp(argv[i], "--buffer-s")) buffer = atof(argv[++i]);
        else if (!strcmp(argv[i], "--wake-s")) wake = atof(argv[++i]);
        else if (!strcmp(argv[i], "--stats")) stats = argv[++i];
        else usage();
    }
    if (port <= 0 || port > 65535 || period <= 0 || work < 0 || buffer < 0 || wake < 0 || !stats) usage();
    /* Frames worked together at one wake-up: the due time it sleeps to is the last one's. */
    uint64_t frames_a_wake = wake > period ? (uint64_t)(wake / period) : 1;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (fd < 0) die("socket");
    int one = 1, receive_B = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_B, sizeof receive_B);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port),
                               .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
    if (group) {
        struct ip_mreqn join;
        memset(&join, 0, sizeof join);
        if (inet_pton(AF_INET, group, &join.imr_multiaddr) != 1) usage();
        join.imr_ifindex = (int)eth0_index();
        if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join) < 0)
            die("joining the programme's multicast group");
    }
    handle_signals();
    printf("ready\n");
    fflush(stdout);

    /* A frame's datagrams taken in few calls: on a device core of a hundredth of a host
     * core, a system call per datagram would cost the box more than its decoding does. */
    static char packets[BATCH][2048];
    static struct mmsghdr batch[BATCH];
    static struct iovec iov[BATCH];
    for (int k = 0; k < BATCH; k++) {
        iov[k].iov_base = packets[k];
        iov[k].iov_len = sizeof packets[k];
        batch[k].msg_hdr.msg_iov = &iov[k];
        batch[k].msg_hdr.msg_iovlen = 1;
    }
    uint64_t frames = 0, late = 0, dropped = 0, received_B = 0, datagrams = 0;
    double start = now_s(CLOCK_MONOTONIC), cpu0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    double due = start, worst_late_s = 0;
    /* Every CPU second since the last frame's work counts toward this one: waking up, the
     * timer and the system calls cost a host microseconds that a box core of a hundredth of
     * a host core pays as its own; left out, a tenth of a box core read a fifth. */
    double spent_to = cpu0;
    for (;;) {
        if (stats_asked || stop_asked) {
            char json[1024];
            snprintf(json, sizeof json,
                     "{\"frames\": %llu, \"late\": %llu, \"dropped\": %llu, \"received_B\": %llu, "
                     "\"datagrams\": %llu, \"cpu_s\": %.6f, \"wall_s\": %.6f, \"period_s\": %.9f, "
                     "\"work_s\": %.9f, \"buffer_s\": %.9f, \"worst_late_s\": %.6f}\n",
                     (unsigned long long)frames, (unsigned long long)late,
                     (unsigned long long)dropped, (unsigned long long)received_B,
                     (unsigned long long)datagrams, now_s(CLOCK_THREAD_CPUTIME_ID) - cpu0,
                     now_s(CLOCK_MONOTONIC) - start, period, work, buffer, worst_late_s);
            write_stats(stats, json);
            stats_asked = 0;
            if (stop_asked) return 0;
        }
        double t = now_s(CLOCK_MONOTONIC);
        if (t < due) { sleep_until(due + (double)(frames_a_wake - 1) * period); continue; }
        if (t >= due + buffer + period) { /* behind by more than the buffer: skip frames */
            uint64_t behind = (uint64_t)((t - due - buffer) / period);
            dropped += behind;
            due += behind * period;
        }
        /* The frame's work includes taking what the stream delivered since the last one. */
        for (;;) {
            int got = recvmmsg(fd, batch, BATCH, MSG_DONTWAIT, NULL);
            if (got <= 0) break;
            for (int k = 0; k < got; k++) received_B += batch[k].msg_len;
            datagrams += (uint64_t)got;
            if (got < BATCH) break;
        }
        burn(spent_to, work);
        spent_to = now_s(CLOCK_THREAD_CPUTIME_ID);
        frames++;
        double done = now_s(CLOCK_MONOTONIC);
        if (done > due + buffer + period) { /* shown after its turn on the screen */
            late++;
            if (done - (due + buffer + period) > worst_late_s) worst_late_s = done - (due + buffer + period);
        }
        due += period;
    }
}

static int send_stream(int argc, char **argv) {
    const char *to = NULL, *stats = NULL;
    double rate = 0;
    for (int i = 0; i < argc; i++) {
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--to")) to = argv[++i];
        else if (!strcmp(argv[i], "--rate-bps")) rate = atof(argv[++i]);
        else if (!strcmp(argv[i], "--stats")) stats = argv[++i];
        else usage();
    }
    if (!to || rate <= 0 || !stats) usage();
    struct sockaddr_in dest[MAX_DESTINATIONS];
    int n = 0;
    char *list = strdup(to);
    for (char *item = strtok(list, ","); item; item = strtok(NULL, ",")) {
        char *colon = strrchr(item, ':');
        if (!colon || n == MAX_DESTINATIONS) usage();
        *colon = 0;
        memset(&dest[n], 0, sizeof dest[n]);
        dest[n].sin_family = AF_INET;
        dest[n].sin_port = htons((uint16_t)atoi(colon + 1));
        if (inet_pton(AF_INET, item, &dest[n].sin_addr) != 1) usage();
        n++;
    }
    free(list);
    if (n == 0) usage();
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) die("socket");
    struct ip_mreqn out;
    memset(&out, 0, sizeof out);
    out.imr_ifindex = (int)eth0_index();
    unsigned char ttl = 1, loop = 0;
    if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &out, sizeof out) < 0) die("IP_MULTICAST_IF");
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop);
    handle_signals();
    printf("ready\n");
    fflush(stdout);

    static char payload[DATAGRAM_B];
    for (int k = 0; k < DATAGRAM_B; k += TS_PACKET_B) payload[k] = 0x47; /* TS sync bytes */
    /* One datagram to every destination per tick. */
    double tick = DATAGRAM_B * 8.0 / rate;
    uint64_t sent = 0, sent_B = 0, failed = 0;
    double start = now_s(CLOCK_MONOTONIC), due = start;
    for (;;) {
        if (stats_asked || stop_asked) {
            char json[512];
            snprintf(json, sizeof json,
                     "{\"destinations\": %d, \"datagrams\": %llu, \"sent_B\": %llu, \"failed\": %llu, "
                     "\"rate_bps\": %.6g, \"wall_s\": %.6f}\n", n, (unsigned long long)sent,
                     (unsigned long long)sent_B, (unsigned long long)failed, rate,
                     now_s(CLOCK_MONOTONIC) - start);
            write_stats(stats, json);
            stats_asked = 0;
            if (stop_asked) return 0;
        }
        double t = now_s(CLOCK_MONOTONIC);
        if (t < due) { sleep_until(due); continue; }
        if (t - due > BACKLOG_S) due = t - BACKLOG_S; /* a long stall is not made up for */
        for (int d = 0; d < n; d++) {
            ssize_t put = sendto(fd, payload, DATAGRAM_B, 0, (struct sockaddr *)&dest[d], sizeof dest[d]);
            if (put == DATAGRAM_B) { sent++; sent_B += DATAGRAM_B; }
            else failed++; /* a full queue (ENOBUFS) or an unreachable box: counted, not fatal */
        }
        due += tick;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(argv[1], "decode")) return decode(argc - 2, argv + 2);
    if (!strcmp(argv[1], "send")) return send_stream(argc - 2, argv + 2);
    usage();
    return 2;
}
