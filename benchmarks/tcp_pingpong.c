/* A TCP ping-pong between two emulated devices, for multihost_pingpong.py.
 *
 *   tcp_pingpong server ADDR PORT
 *   tcp_pingpong client ADDR PORT REPS SIZE...
 *
 * The client tells the server each size and count (8 bytes), then times REPS round trips of
 * SIZE bytes each way (after 10 untimed ones) with CLOCK_MONOTONIC, and prints per size one
 * line: SIZE, the median and the smallest half round trip in seconds. Blocking sockets with
 * TCP_NODELAY, as an MPI's TCP transport waiting in its progress engine's poll. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 10

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int all(int fd, char *buf, size_t len, int sending) {
    while (len) {
        ssize_t n = sending ? write(fd, buf, len) : read(fd, buf, len);
        if (n <= 0) return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct sockaddr_in where(const char *addr, const char *port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
        fprintf(stderr, "tcp_pingpong: bad address %s\n", addr);
        exit(2);
    }
    return a;
}

static void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int serve(struct sockaddr_in a) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 1) < 0) {
        perror("tcp_pingpong: bind");
        return 1;
    }
    printf("listening\n");
    fflush(stdout);
    int c = accept(s, NULL, NULL);
    if (c < 0) return 1;
    nodelay(c);
    uint32_t head[2];
    char *buf = NULL;
    while (all(c, (char *)head, sizeof head, 0) == 0) {
        if (!(buf = realloc(buf, head[0] ? head[0] : 1))) return 1;
        for (uint32_t i = 0; i < head[1]; i++)
            if (all(c, buf, head[0], 0) || all(c, buf, head[0], 1)) return 1;
    }
    return 0;
}

static int client(struct sockaddr_in a, int reps, int nsizes, char **sizes) {
    int c = -1;
    for (int tries = 0; tries < 600; tries++) { /* until the server listens */
        c = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c, (struct sockaddr *)&a, sizeof a) == 0) break;
        close(c);
        c = -1;
        nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
    if (c < 0) {
        perror("tcp_pingpong: connect");
        return 1;
    }
    nodelay(c);
    double *t = malloc(sizeof *t * (size_t)reps);
    for (int k = 0; k < nsizes; k++) {
        uint32_t head[2] = {(uint32_t)atol(sizes[k]), (uint32_t)(reps + WARMUP)};
        char *buf = calloc(1, head[0] ? head[0] : 1);
        if (!buf || !t || all(c, (char *)head, sizeof head, 1)) return 1;
        for (int i = 0; i < reps + WARMUP; i++) {
            double t0 = now();
            if (all(c, buf, head[0], 1) || all(c, buf, head[0], 0)) return 1;
            if (i >= WARMUP) t[i - WARMUP] = (now() - t0) / 2;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp);
        printf("%u %.9g %.9g\n", head[0], t[reps / 2], t[0]);
        fflush(stdout);
        free(buf);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "server")) return serve(where(argv[2], argv[3]));
    if (argc >= 6 && !strcmp(argv[1], "client"))
        return client(where(argv[2], argv[3]), atoi(argv[4]), argc - 5, argv + 5);
    fprintf(stderr, "usage: tcp_pingpong server ADDR PORT | client ADDR PORT REPS SIZE...\n");
    return 2;
}
