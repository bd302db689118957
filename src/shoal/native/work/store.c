/* wk_store: rank 0 writes its output to the cluster's file server (SHOAL_STORE=ADDRESS:PORT,
 * shoal.cluster.storage), as an NFS client's synchronous writes go: a block, then its
 * acknowledgement once the storage committed it, then the next. The server answers the
 * file's byte count and CRC-32, checked here: every byte stored, or the run fails. */
#include "work.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static int send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* One line from the server (without its newline); -1 when the connection ends first. */
static int read_line(int fd, char *line, size_t cap)
{
    size_t used = 0;
    while (used + 1 < cap) {
        ssize_t k = recv(fd, line + used, 1, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        if (line[used] == '\n')
            break;
        used++;
    }
    line[used] = 0;
    return 0;
}

static int connect_to(const char *where, char *err, size_t errlen)
{
    char host[64];
    const char *colon = strrchr(where, ':');
    size_t hlen = colon ? (size_t)(colon - where) : 0;
    struct sockaddr_in to = {.sin_family = AF_INET};
    if (!colon || hlen == 0 || hlen >= sizeof host) {
        snprintf(err, errlen, "SHOAL_STORE=%s: give ADDRESS:PORT", where);
        return -1;
    }
    memcpy(host, where, hlen);
    host[hlen] = 0;
    to.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &to.sin_addr) != 1) {
        snprintf(err, errlen, "SHOAL_STORE=%s: %s is not an IPv4 address", where, host);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        snprintf(err, errlen, "the file server %s: %s", where, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int one = 1; /* each block goes at once: the writer waits for its acknowledgement */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

long wk_store(wk_result *res, const char *name, const void *head, size_t head_n, const void *data,
              size_t n)
{
    const char *where = getenv("SHOAL_STORE");
    if (!where || !*where)
        return 0;
    char err[200], line[128];
    int fd = connect_to(where, err, sizeof err);
    if (fd < 0) {
        wk_fail(res, "%s", err);
        return -1;
    }
    size_t total = head_n + n;
    long block = 0;
    snprintf(line, sizeof line, "STORE %s %zu\n", name, total);
    if (send_all(fd, line, strlen(line)) || read_line(fd, line, sizeof line) ||
        sscanf(line, "BLOCK %ld", &block) != 1 || block <= 0) {
        wk_fail(res, "the file server %s refused %s: %s", where, name, line);
        close(fd);
        return -1;
    }
    /* The file as one piece: head then data, cut into the server's blocks. */
    unsigned char *file = wk_alloc(total);
    memcpy(file, head, head_n);
    memcpy(file + head_n, data, n);
    uint32_t crc = crc32_update(0, file, total);
    int failed = 0;
    for (size_t at = 0; at < total && !failed; at += (size_t)block) {
        size_t piece = total - at < (size_t)block ? total - at : (size_t)block;
        char ack;
        failed = send_all(fd, file + at, piece) || recv(fd, &ack, 1, MSG_WAITALL) != 1 || ack != 'k';
    }
    free(file);
    unsigned long stored = 0, their_crc = 0;
    if (failed || read_line(fd, line, sizeof line) || sscanf(line, "DONE %lu %lu", &stored, &their_crc) != 2) {
        wk_fail(res, "the file server %s stopped answering while %s was written", where, name);
        close(fd);
        return -1;
    }
    close(fd);
    if (stored != total || their_crc != crc) {
        wk_fail(res, "the file server %s stored %lu B of %s (CRC-32 %lu), not the %zu B written (%lu)",
                where, stored, name, their_crc, total, (unsigned long)crc);
        return -1;
    }
    return (long)total;
}
