/* Sleeps that end when the network has something for the rank.
 *
 * A sleeping rank notices a message only at its next test, so every sleep
 * adds up to its own length to the wait. Over TCP (MPICH's and Open MPI's
 * TCP transports, every emulated device) a message's arrival is a socket
 * event the kernel can report: a sleep here waits on an epoll set holding
 * the process's TCP sockets, edge-triggered for new data and for room in a
 * full send buffer, and ends at the first such event or at its length,
 * whichever comes first. The rank still tests after every wake-up, so an
 * event for another request only costs a test, and transports without
 * sockets (shared memory) sleep exactly as before.
 *
 * Edge-triggered on purpose: a socket that stays readable (data the MPI
 * library leaves for later) would otherwise end every sleep at once, a spin.
 *
 * The sockets are found in /proc/self/fd after MPI_Init; MPI libraries connect
 * to a peer at its first message, so connect() and accept() are interposed and
 * add the new socket at once; a scan at most every RESCAN_NS while ranks sleep
 * catches any made otherwise (raw system calls). */
#define _GNU_SOURCE
#include "shoalwait.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RESCAN_NS 200000000LL   /* 0.2 s: a few 10 us scans a second at most */

static int epfd = -1;
static int64_t scanned_ns;
static int scanning;   /* one thread scans at a time; others sleep on what is known */

static int is_tcp(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return 0;
    int domain = 0, type = 0;
    socklen_t len = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0)
        return 0;
    len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
        return 0;
    return (domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM;
}

static void watch(int fd)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.fd = fd};
    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);   /* EEXIST: known */
}

/* Add every TCP socket of the process not yet in the set. */
static void scan(void)
{
    if (__atomic_exchange_n(&scanning, 1, __ATOMIC_ACQUIRE))
        return;
    DIR *dir = opendir("/proc/self/fd");
    if (dir) {
        int own = dirfd(dir);
        struct dirent *e;
        while ((e = readdir(dir))) {
            char *end;
            long fd = strtol(e->d_name, &end, 10);
            if (*end || end == e->d_name || fd == own || fd == epfd || !is_tcp((int)fd))
                continue;
            watch((int)fd);
        }
        closedir(dir);
    }
    __atomic_store_n(&scanned_ns, sw_now_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&scanning, 0, __ATOMIC_RELEASE);
}

void sw_wake_start(void)
{
    if (!sw_cfg.wake_on_socket || epfd >= 0)
        return;
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd >= 0)
        scan();
}

int64_t sw_wakes;

/* Sleep d ns (0: the kernel's shortest), or until a socket event. Returns
 * 1 when an event ended the sleep. */
int sw_sleep(int64_t d)
{
    struct timespec req = {d / 1000000000LL, d % 1000000000LL};
    if (epfd < 0 || d == 0) {   /* sleep:0 is a real clock_nanosleep(0) (003), not a poll */
        clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
        return 0;
    }
    if (sw_now_ns() - __atomic_load_n(&scanned_ns, __ATOMIC_RELAXED) > RESCAN_NS)
        scan();
    /* ppoll on the epoll set itself: a nanosecond timeout on every kernel
     * (epoll_pwait2 needs 5.11), under the thread's timer slack. */
    struct pollfd p = {.fd = epfd, .events = POLLIN};
    int n = ppoll(&p, 1, &req, NULL);
    if (n <= 0)
        return 0;
    struct epoll_event evs[16];   /* consume the edges, so the next sleep waits for new ones */
    while (epoll_wait(epfd, evs, 16, 0) == 16)
        ;
    __atomic_fetch_add(&sw_wakes, 1, __ATOMIC_RELAXED);
    return 1;
}

/* A socket the MPI library connects or accepts after MPI_Init is watched at once. */
static void watch_new(int fd)
{
    int saved = errno;
    if (fd >= 0 && __atomic_load_n(&epfd, __ATOMIC_RELAXED) >= 0 && is_tcp(fd))
        watch(fd);
    errno = saved;
}

__attribute__((visibility("default"))) int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    static int (*real)(int, const struct sockaddr *, socklen_t);
    if (!real)
        real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
    int rc = real(fd, addr, len);
    if (rc == 0 || errno == EINPROGRESS)
        watch_new(fd);
    return rc;
}

__attribute__((visibility("default"))) int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    static int (*real)(int, struct sockaddr *, socklen_t *);
    if (!real)
        real = (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
    int got = real(fd, addr, len);
    watch_new(got);
    return got;
}

__attribute__((visibility("default"))) int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    if (!real)
        real = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
    int got = real(fd, addr, len, flags);
    watch_new(got);
    return got;
}
