/* shoal-linkemu: an emulated Ethernet switch whose ports are links with a rate,
 * a one-way delay, jitter and loss, for kernels without sch_netem.
 *
 * Each port is a TAP device created inside a device's network namespace (it
 * becomes the device's eth0); this process holds the TAP file descriptors and
 * is the switch between them, in the style of Mahimahi's delay and link
 * shells but with nanosecond clocks. A frame read from port i crosses i's
 * uplink, the switch, then the downlink of the port its destination MAC was
 * learned on (flooded when unknown):
 *
 *   uplink:   depart = max(arrival, uplink free) + wire/R_i
 *             at_switch = depart + delay_i (+ jitter), never before the previous frame
 *   downlink: depart = max(at_switch, downlink free) + wire/R_j
 *             deliver = depart + delay_j (+ jitter), never before the previous frame
 *
 * wire = max(frame, 60) + 24 line bytes (FCS, preamble+SFD, inter-frame gap).
 *
 * A shared medium (a cable plant): directions naming the same channel take turns
 * on one transmitter (the channel's free time replaces the direction's own), so
 * all devices' upstreams share one rate, and a frame flooded on a shared
 * downstream is sent once for every port on it. An upstream with a grant
 * interval G models request-grant: a frame that finds its device's queue empty
 * waits for its request to reach the head-end and for the grant in a later
 * allocation map, 1 to 2 G (uniform: the map's phase against the frame's
 * arrival; 1.5 G on average); frames behind it go with the queue (piggybacked
 * requests). An upstream capped below its channel's rate (a service flow's
 * maximum sustained rate) paces its frames at its own rate and takes the channel
 * only for each frame's time at the channel's rate, at the end of its own: the
 * channel then serves frames in the order they are ready, so other devices'
 * frames fill the time a capped device leaves free. A capped upstream may carry its
 * service flow's traffic priority (0-7, DOCSIS's; 0 by default): on a channel where
 * any does, ready frames wait in one queue per priority and, each time the channel is
 * free, the highest priority's oldest goes next (the head-end grants higher-priority
 * flows first); a device's own frames keep their order.
 * Loss is drawn once per direction. A direction's queue holds at most
 * limit bytes' worth of serialization time; later frames are dropped (tail drop).
 * A capped upstream's limit is its device's own buffer instead: the bytes it holds
 * until the channel has carried them (a modem keeps a frame until its grant), so a
 * busy plant drops at the device rather than queueing without end at the head-end.
 * Times are computed from the scheduled times, not from when this process
 * woke, so wake-up lateness never accumulates along a queue.
 *
 * Usage (see shoal/cluster/linkemu.py, which builds the arguments):
 *   shoal-linkemu [--switch NETNS] [--stats FILE] [--log FILE] [--seed N]
 *                 --port NETNS,IFNAME,UP,DOWN ...
 * where UP and DOWN are rate_bps/delay_ns/jitter_ns/loss/limit_B[/grant_ns/channel[/channel_bps[/priority]]]
 * ("0" rate: no serialization; channel N > 0: the shared medium N; channel_bps: its
 * rate when above this direction's own; priority: its service flow's, 0-7). Prints "ready" on stdout once every TAP exists; SIGTERM
 * or SIGINT writes the statistics (JSON) and exits; SIGUSR1 writes them only; SIGUSR2
 * measures the other hosts' forwarders afresh (a new window of fast probes).
 * A line "host_latency_ns N" on stdin takes N/2 off the delay of every direction
 * (the host's own latency, measured once the ports are up), "port_host_latency_ns
 * I N" N/2 off both directions of port I instead (its ranks sleep, or poll, while
 * they wait: the host's latency differs); end of stdin is fine.
 *
 * Links across hosts (a cluster spread over several hosts, one forwarder per
 * host): --udp PORT binds a UDP socket in the forwarder's own (the host's)
 * network namespace (--udp-fd FD takes one already bound there instead: an
 * ordinary user's forwarder runs in a user namespace with no way out), and each --peer ADDR:PORT,MAC,... names another host's
 * forwarder and the devices behind it. A frame for one of those devices goes
 * to its forwarder in one datagram as soon as it is read, stamped with the time
 * it reaches the switch after its own uplink (this host's clock); the receiving
 * forwarder runs it through the downlink of the device it is for from that time
 * (its clock: the stamp less the peers' measured clock offset) and delivers it
 * when the model says, so the underlay's own delay is absorbed into the link's
 * latency. Each direction is thus run once, on the host of the device it
 * belongs to, and a device's downlink is one queue for frames from every host.
 * A frame that arrives after its delivery time is delivered at once and counted
 * late; gaps in each sending device's sequence are counted lost. The forwarders
 * probe each other (NTP's four stamps, on both the monotonic and the real-time
 * clock): the round-trip time and the clock offsets of the fastest recent probe
 * are in the statistics. Datagrams carry --key, so stray ones are dropped.
 * --no-tso makes the devices hand over one frame per Ethernet frame (no TCP
 * super-frames), so each fits one datagram. A fifth field of --port, the
 * port's MAC, is learned at start (no frame is flooded before the device speaks).
 *
 * A shared medium split over hosts keeps one channel: the forwarder of one host
 * (the medium's owner) runs both directions of every device on it, and the
 * others relay. --proxy ADDR:PORT,ID,UP,DOWN,MAC on the owner is a port without
 * a TAP whose device lives behind that peer (ID: its number there); --relay
 * N,ID,ADDR:PORT on the device's host sends every frame read from port N to the
 * owner at once, stamped with when it was read, and delivers what the owner
 * sends back for ID at the time the owner's model says. The owner handles
 * everything that touches a split channel --lookahead NS after the time it
 * computes with, so a frame relayed from another host is still in time for its
 * turn (its order on the channel is that of the model's times, not of arrival):
 * the underlay's one-way delay must stay below NS, and NS plus that delay below
 * the medium's downstream delay; frames that arrive later are counted late.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define VNET_HDR 10        /* struct virtio_net_hdr in front of every frame */
#define FRAME_MAX (VNET_HDR + 65536 + 64) /* TCP segmentation offload: up to 64 KiB frames */
#define MAX_PORTS 2048      /* a host's devices, and a split plant's whole (its proxies) */
#define MAC_TABLE 8192      /* open addressing: at most half full */
#define LINE_OVERHEAD 24   /* FCS 4 + preamble/SFD 8 + inter-frame gap 12 */
#define MIN_FRAME 60       /* minimum Ethernet frame without FCS */
#define READ_BATCH 64
#define MAX_CHANNELS 16
#define MAX_PEERS 64
#define REMOTE_TABLE 65536 /* devices behind other hosts' forwarders (open addressing, at most half full) */
#define PROBE_WINDOW 32    /* the clock offset of the fastest of the last 32 probes */
#define PROBE_FAST_NS 2000000    /* probes every 2 ms until the window is full ... */
#define PROBE_SLOW_NS 100000000  /* ... then every 100 ms, to follow the clocks' drift */
#define WIRE_MAGIC 0x53484c31u   /* "SHL1" */

#define PRIORITIES 8       /* DOCSIS traffic priorities 0-7, 7 served first */

struct frame;
typedef struct {
    int64_t free_ns;       /* when the shared transmitter is next free */
    uint64_t frames, bytes;
    int prioritised;       /* a direction on it has a priority: ready frames wait in queues */
    int serving;           /* an EV_SERVE is scheduled for its next free time */
    struct frame *wait_head[PRIORITIES], *wait_tail[PRIORITIES]; /* ready, not yet on it */
} channel_t;

static channel_t channels[MAX_CHANNELS + 1]; /* 0: unused (a direction of its own) */

typedef struct {
    double rate_bps;       /* 0: no serialization */
    int64_t delay_ns, jitter_ns;
    double loss;
    int64_t limit_B;
    int64_t free_ns;       /* when the transmitter is next free */
    int64_t last_out_ns;   /* FIFO: no frame leaves before the previous one */
    int64_t host_share_ns; /* this port's share of the host's latency (-1: host_ns below) */
    int64_t grant_ns;      /* request-grant interval of a shared upstream (0: none) */
    int channel;           /* shared medium this direction transmits on (0: its own) */
    double channel_bps;    /* the channel's rate when above rate_bps (a capped device; 0: none) */
    int priority;          /* its service flow's traffic priority (0-7) */
    int64_t held_B;        /* a capped upstream: line bytes accepted and not yet off the channel */
    struct { int64_t t_ns, wire; } *leaving; /* ... and when each frame on the channel leaves it */
    size_t leaving_head, leaving_len, leaving_cap;
    uint64_t frames, bytes, lost, dropped; /* bytes: line bytes */
} direction_t;

typedef struct {
    int fd;
    char name[IFNAMSIZ];
    char netns[512];
    direction_t up, down;
    uint64_t write_errors;
    /* A split shared medium: a proxy (on the medium's owner: fd -1, the device behind
     * peer `peer` as `id`) or a relay (the device is here, its links run by peer `peer`). */
    int proxy, relay, peer;
    uint32_t id, seq_out, next_seq;
    uint64_t relayed_in, relayed_late, relayed_lost;
    int64_t relayed_late_max_ns;
    char peer_name[64];
} port_t;

typedef struct frame {
    struct frame *next_free;
    int in_port;
    uint32_t len;          /* bytes read, virtio header included */
    uint32_t wire;         /* line bytes of the frames it stands for */
    uint32_t segments;     /* how many frames that is */
    int64_t first_ns;      /* when its first segment reached the switch */
    int64_t arrived_ns;
    int remote;            /* from another host: the sending device's entry in remotes (-1: local) */
    int switched_later;    /* its switching already put off by the lookahead (a split channel) */
    struct frame *next_wait; /* in its channel's queue of its priority (a prioritised channel) */
    unsigned char data[FRAME_MAX];
} frame_t;

enum { EV_SWITCH = 0, EV_DELIVER = 1, EV_CHANNEL = 2, EV_INGRESS = 3, EV_SERVE = 4 };

typedef struct {
    int64_t t_ns;          /* when it runs */
    int64_t at_ns;         /* the model's time it stands for (t_ns less a split channel's lookahead) */
    uint64_t seq;          /* ties keep insertion order */
    frame_t *frame;
    int port;              /* output port for EV_DELIVER, input port for EV_CHANNEL, channel for EV_SERVE */
    int kind;
} event_t;

static port_t ports[MAX_PORTS];
static int nports;
static event_t *heap;
static size_t heap_len, heap_cap;
static uint64_t seq_counter;
static frame_t *free_frames;
static struct { unsigned char mac[6]; int used, port; } macs[MAC_TABLE];
static int nmacs;
static volatile sig_atomic_t stop_flag, stats_flag, reprobe_flag;
static const char *stats_path;
static FILE *log_file;
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
/* Lateness of deliveries (actual write time - scheduled time), log2 buckets of ns. */
static uint64_t late_hist[40];
static uint64_t frames_in_flight, frames_peak;
static int64_t early_ns = 20000; /* adaptive: wake this long before an event, then spin */
static int realtime;
/* The host's own one-way latency (its TCP stacks, MPI, this switch) between two
 * devices, set through the control pipe: taken off the links' delays, so a
 * small message takes the link's latency, not that plus the host's. */
static int64_t host_ns;

/* ---- links across hosts: state ------------------------------------------------------ */

enum { MSG_FRAME = 1, MSG_PROBE = 2, MSG_REPLY = 3, MSG_RELAY = 4, MSG_DELIVER = 5 };

/* Every datagram starts with this (little-endian on the wire). */
typedef struct __attribute__((packed)) {
    uint32_t magic;
    uint8_t type, pad[3];
    uint64_t key;
} wire_head_t;

typedef struct __attribute__((packed)) {
    wire_head_t h;
    uint32_t seq;          /* per sending device and receiving host, from 1 */
    uint32_t first_before_ns; /* the frame's first segment reached the switch this long before t */
    int64_t t_ns;          /* when it reaches the switch, on the sender's monotonic clock */
} wire_frame_t;

typedef struct __attribute__((packed)) {
    wire_head_t h;
    int64_t mono[3], real[3]; /* sent by the prober, received and answered by the peer */
} wire_probe_t;

/* A split medium's frame: to its owner as read from a device (MSG_RELAY, t: when it was
 * read), or back to the device's host (MSG_DELIVER, t: when to deliver it). */
typedef struct __attribute__((packed)) {
    wire_head_t h;
    uint32_t id;           /* the device, as both hosts number it */
    uint32_t seq;          /* per device and way, from 1 */
    int64_t t_ns;          /* on the sender's monotonic clock */
} wire_relay_t;

typedef struct {
    struct sockaddr_in addr;
    char name[64];
    uint64_t probes, replies, frames_out, frames_in, send_errors;
    int64_t rtt[PROBE_WINDOW], offset[PROBE_WINDOW], real_offset[PROBE_WINDOW];
    int64_t offset_ns;      /* its monotonic clock less ours, from the fastest recent probe */
    int64_t real_offset_ns; /* the same for the real-time clocks: the hosts' clock offset */
    int64_t rtt_min_ns;     /* of that probe */
} peer_t;

typedef struct {
    unsigned char mac[6];
    int used, peer;
    uint32_t next_seq;      /* the sequence number expected next from it */
    uint64_t frames, late, lost, reordered;
    int64_t late_max_ns, late_sum_ns;
} remote_t;

static peer_t peers[MAX_PEERS];
static int npeers;
static remote_t remotes[REMOTE_TABLE];
static int nremotes;
static int udp_fd = -1, udp_port;
static uint64_t wire_key;
static uint64_t foreign_datagrams; /* no peer's, or another key's */
static uint32_t seq_out[MAX_PORTS][MAX_PEERS];
static uint64_t remote_out[MAX_PORTS];
static int no_tso;
static int64_t next_probe_ns;
static int64_t probes_since_ns; /* replies to probes sent before this are left out */
/* A split shared medium's lookahead (--lookahead), and its channels (those of a proxy). */
static int64_t lookahead_ns;
static int split_channel[MAX_CHANNELS + 1], any_split_down;
static uint64_t split_late; /* frames that reached a split channel's switch after their turn */
static int *id_ports;       /* a proxy's or relayed port's id -> the port (-1: none) */
static uint32_t id_ports_len;
_Static_assert(sizeof(wire_relay_t) == sizeof(wire_frame_t), "relayed frames share the frame header's buffer");

static void die(const char *what) {
    fprintf(stderr, "shoal-linkemu: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void usage(const char *msg) {
    fprintf(stderr, "shoal-linkemu: %s\n", msg);
    exit(2);
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t rng_next(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static inline double rng_unit(void) { return (rng_next() >> 11) * (1.0 / 9007199254740992.0); }

/* ---- frames and the event heap -------------------------------------------------- */

static frame_t *frame_new(void) {
    frame_t *f = free_frames;
    if (f) free_frames = f->next_free;
    else if (!(f = malloc(sizeof *f))) die("out of memory");
    if (++frames_in_flight > frames_peak) frames_peak = frames_in_flight;
    return f;
}

static void frame_free(frame_t *f) {
    f->next_free = free_frames;
    free_frames = f;
    frames_in_flight--;
}

static inline int ev_less(const event_t *a, const event_t *b) {
    return a->t_ns < b->t_ns || (a->t_ns == b->t_ns && a->seq < b->seq);
}

static void heap_push_at(int64_t t, int64_t at, frame_t *f, int port, int kind) {
    if (heap_len == heap_cap) {
        heap_cap = heap_cap ? heap_cap * 2 : 1024;
        if (!(heap = realloc(heap, heap_cap * sizeof *heap))) die("out of memory");
    }
    event_t ev = {t, at, seq_counter++, f, port, kind};
    size_t i = heap_len++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&ev, &heap[p])) break;
        heap[i] = heap[p];
        i = p;
    }
    heap[i] = ev;
}

static void heap_push(int64_t t, frame_t *f, int port, int kind) { heap_push_at(t, t, f, port, kind); }

static event_t heap_pop(void) {
    event_t top = heap[0], last = heap[--heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= heap_len) break;
        if (c + 1 < heap_len && ev_less(&heap[c + 1], &heap[c])) c++;
        if (!ev_less(&heap[c], &last)) break;
        heap[i] = heap[c];
        i = c;
    }
    if (heap_len) heap[i] = last;
    return top;
}

/* ---- the link arithmetic ---------------------------------------------------------- */

/* Line bytes of a frame as read from a TAP with offloads: a TCP super-frame of
 * n segments (gso_size payload each) stands for n frames, each with its own
 * Ethernet/IP/TCP headers and line overhead. */
static uint32_t wire_bytes(const unsigned char *buf, uint32_t len, uint32_t *segments_out) {
    *segments_out = 1;
    const struct virtio_net_hdr *vh = (const void *)buf;
    uint32_t frame = len - VNET_HDR;
    if (vh->gso_type == VIRTIO_NET_HDR_GSO_NONE || vh->gso_size == 0)
        return (frame < MIN_FRAME ? MIN_FRAME : frame) + LINE_OVERHEAD;
    const unsigned char *eth = buf + VNET_HDR;
    uint32_t l3 = 14, headers;
    uint16_t type = (uint16_t)(eth[12] << 8 | eth[13]);
    if (type == 0x8100) { l3 = 18; type = (uint16_t)(eth[16] << 8 | eth[17]); }
    if (type == 0x0800 && frame > l3 + 20) {
        uint32_t l4 = l3 + (eth[l3] & 15) * 4;
        headers = l4 + (frame > l4 + 12 ? (eth[l4 + 12] >> 4) * 4 : 20);
    } else if (type == 0x86DD && frame > l3 + 40) {
        uint32_t l4 = l3 + 40;
        headers = l4 + (frame > l4 + 12 ? (eth[l4 + 12] >> 4) * 4 : 20);
    } else {
        headers = l3 + 40;
    }
    if (headers >= frame) return frame + LINE_OVERHEAD;
    uint32_t payload = frame - headers, mss = vh->gso_size;
    uint32_t segments = (payload + mss - 1) / mss;
    *segments_out = segments ? segments : 1;
    return payload + segments * (headers + LINE_OVERHEAD);
}

/* Whether a frame is lost on this direction (drawn once per direction). */
static int lost_on(direction_t *d) {
    if (d->loss > 0 && rng_unit() < d->loss) {
        d->lost++;
        return 1;
    }
    return 0;
}

static int64_t line_ns(uint32_t wire, double rate_bps) {
    return (int64_t)(wire * 8e9 / rate_bps + 0.5);
}

/* When a frame's first segment, arriving at `first`, may start on this direction's own
 * transmitter: when it is free, or, if it was idle on an upstream with grants, after the
 * request and the next MAP's grant. */
static int64_t own_start(direction_t *d, int64_t first) {
    int64_t start = d->free_ns > first ? d->free_ns : first;
    if (d->grant_ns > 0 && d->free_ns <= first) /* idle: request, then the next MAP's grant */
        start = first + d->grant_ns + (int64_t)(rng_unit() * (double)d->grant_ns);
    return start;
}

/* The same, not before `earliest`; -1 if the queue is full (tail drop). */
static int64_t start_at(direction_t *d, int64_t first, int64_t earliest) {
    int64_t start = own_start(d, first);
    if (earliest > start) start = earliest;
    if (d->limit_B > 0 && (double)(start - first) * d->rate_bps / 8e9 > (double)d->limit_B) {
        d->dropped++;
        return -1;
    }
    return start;
}

/* Segments are pipelined: the last, arriving at `last`, leaves one segment's time later. */
static int64_t not_before_tail(int64_t depart, int64_t last, uint32_t wire, uint32_t segments, double rate_bps) {
    int64_t tail = last + (int64_t)(wire * 8e9 / segments / rate_bps + 0.5);
    return tail > depart ? tail : depart;
}

static void count_on_channel(channel_t *ch, int64_t depart, uint32_t wire, uint32_t segments) {
    ch->free_ns = depart;
    ch->frames += segments;
    ch->bytes += wire;
}

/* The far end of a direction: its delay (less the host's own share), jitter, and no
 * frame before the previous one (TCP sees no reordering). */
static int64_t propagate(direction_t *d, int64_t depart, uint32_t wire) {
    int64_t delay = d->delay_ns - (d->host_share_ns >= 0 ? d->host_share_ns : host_ns) / 2;
    int64_t out = depart + (delay > 0 ? delay : 0);
    if (d->jitter_ns > 0)
        out += (int64_t)((2.0 * rng_unit() - 1.0) * (double)d->jitter_ns);
    if (out < depart) out = depart;
    if (out < d->last_out_ns) out = d->last_out_ns;
    d->last_out_ns = out;
    d->frames++;
    d->bytes += wire;
    return out;
}

/* Queue a frame of `segments` segments on a direction, its first segment
 * arriving at `first`, its last at `last`; return when the last leaves the far
 * end, or -1 if it is lost or the queue is full. Segments are pipelined: a
 * super-frame is not stored and forwarded whole. */
static int64_t cross(direction_t *d, int64_t first, int64_t last, uint32_t wire, uint32_t segments) {
    if (lost_on(d)) return -1;
    int64_t depart = last;
    if (d->rate_bps > 0) {
        channel_t *ch = d->channel ? &channels[d->channel] : NULL;
        int64_t start = start_at(d, first, ch ? ch->free_ns : 0);
        if (start < 0) return -1;
        depart = not_before_tail(start + line_ns(wire, d->rate_bps), last, wire, segments, d->rate_bps);
        d->free_ns = depart;
        if (ch) count_on_channel(ch, depart, wire, segments);
    }
    return propagate(d, depart, wire);
}

/* A capped upstream's own part: when a frame arriving at `t` is ready for its turn on
 * the channel (its own pacing done but the channel's time for it), or -1 if lost or
 * dropped. The channel's part runs at that time (EV_CHANNEL), in the order frames of
 * every device get ready. */
static int64_t pace(direction_t *d, int64_t t, uint32_t wire, uint32_t segments) {
    if (lost_on(d)) return -1;
    while (d->leaving_len && d->leaving[d->leaving_head].t_ns <= t) { /* gone by now */
        d->held_B -= d->leaving[d->leaving_head].wire;
        d->leaving_head = (d->leaving_head + 1) % d->leaving_cap;
        d->leaving_len--;
    }
    /* A full buffer drops the frame (an empty one takes any frame, however large). */
    if (d->limit_B > 0 && d->held_B > 0 && d->held_B + wire > d->limit_B) {
        d->dropped++;
        return -1;
    }
    d->held_B += wire;
    int64_t start = own_start(d, t);
    int64_t done = not_before_tail(start + line_ns(wire, d->rate_bps), t, wire, segments, d->rate_bps);
    d->free_ns = done;
    return done - line_ns(wire, d->channel_bps);
}

/* The channel's part of a capped upstream, at `ready`: when the frame reaches the head-end
 * and then the switch. */
static int64_t on_channel(direction_t *d, int64_t ready, uint32_t wire, uint32_t segments) {
    channel_t *ch = &channels[d->channel];
    int64_t start = ch->free_ns > ready ? ch->free_ns : ready;
    int64_t depart = start + line_ns(wire, d->channel_bps);
    count_on_channel(ch, depart, wire, segments);
    if (d->leaving_len == d->leaving_cap) { /* grow the ring, oldest first */
        size_t cap = d->leaving_cap ? 2 * d->leaving_cap : 256;
        void *grown = malloc(cap * sizeof *d->leaving);
        if (!grown) die("out of memory");
        for (size_t i = 0; i < d->leaving_len; i++)
            memcpy((char *)grown + i * sizeof *d->leaving,
                   &d->leaving[(d->leaving_head + i) % d->leaving_cap], sizeof *d->leaving);
        free(d->leaving);
        d->leaving = grown;
        d->leaving_head = 0;
        d->leaving_cap = cap;
    }
    size_t tail = (d->leaving_head + d->leaving_len++) % d->leaving_cap;
    d->leaving[tail].t_ns = depart;
    d->leaving[tail].wire = wire;
    return propagate(d, depart, wire);
}

static int capped(const direction_t *d) {
    return d->channel && d->channel_bps > 0;
}

/* A prioritised channel: the next EV_SERVE, when it is free again (or at `t`), unless one
 * is already due. */
static void serve_later(int c, int64_t t) {
    channel_t *ch = &channels[c];
    if (ch->serving) return;
    int64_t at = ch->free_ns > t ? ch->free_ns : t;
    ch->serving = 1;
    heap_push_at(at + (split_channel[c] ? lookahead_ns : 0), at, NULL, c, EV_SERVE);
}

/* A capped upstream's frame ready for the channel at `t` on a prioritised channel: into its
 * priority's queue, served when the channel is free (EV_SERVE). */
static void wait_for_channel(frame_t *f, int port, int64_t t) {
    int c = ports[port].up.channel, prio = ports[port].up.priority;
    channel_t *ch = &channels[c];
    f->next_wait = NULL;
    if (ch->wait_tail[prio]) ch->wait_tail[prio]->next_wait = f;
    else ch->wait_head[prio] = f;
    ch->wait_tail[prio] = f;
    serve_later(c, t);
}

/* The highest priority's oldest ready frame off the queues (NULL when none waits). */
static frame_t *next_waiting(channel_t *ch) {
    for (int prio = PRIORITIES - 1; prio >= 0; prio--) {
        frame_t *f = ch->wait_head[prio];
        if (!f) continue;
        ch->wait_head[prio] = f->next_wait;
        if (!ch->wait_head[prio]) ch->wait_tail[prio] = NULL;
        return f;
    }
    return NULL;
}

/* ---- links across hosts: the devices behind other hosts ---------------------------- */

static int64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static unsigned mac_hash(const unsigned char *mac, unsigned size) {
    uint64_t v = 0;
    for (int i = 0; i < 6; i++) v = v << 8 | mac[i];
    return (unsigned)((v * 0x9E3779B97F4A7C15ull) >> 40) % size;
}

static unsigned mac_slot(const unsigned char *mac) {
    return mac_hash(mac, REMOTE_TABLE);
}

/* The entry of a device behind another host's forwarder, -1 if the MAC is none of theirs. */
static int remote_of(const unsigned char *mac) {
    if (!nremotes || (mac[0] & 1)) return -1; /* group addresses stay on this host */
    for (unsigned i = mac_slot(mac), k = 0; k < REMOTE_TABLE; i = (i + 1) % REMOTE_TABLE, k++) {
        if (!remotes[i].used) return -1;
        if (memcmp(remotes[i].mac, mac, 6) == 0) return (int)i;
    }
    return -1;
}

static void add_remote(const unsigned char *mac, int peer) {
    if (nremotes >= REMOTE_TABLE / 2) usage("too many devices behind --peer");
    unsigned i = mac_slot(mac);
    while (remotes[i].used) {
        if (memcmp(remotes[i].mac, mac, 6) == 0) usage("a MAC is named twice in --peer");
        i = (i + 1) % REMOTE_TABLE;
    }
    remotes[i].used = 1;
    memcpy(remotes[i].mac, mac, 6);
    remotes[i].peer = peer;
    remotes[i].next_seq = 1;
    nremotes++;
}

static void put_head(wire_head_t *h, int type) {
    h->magic = htole32(WIRE_MAGIC);
    h->type = (uint8_t)type;
    memset(h->pad, 0, sizeof h->pad);
    h->key = htole64(wire_key);
}

/* Send a frame read from local port `port` to the forwarder of the device it is for, as
 * soon as it is read: stamped with `t`, when it reaches the switch after its uplink. */
static void send_remote(frame_t *f, int port, int r, int64_t t) {
    peer_t *pe = &peers[remotes[r].peer];
    wire_frame_t w;
    put_head(&w.h, MSG_FRAME);
    w.seq = htole32(++seq_out[port][remotes[r].peer]);
    w.first_before_ns = htole32((uint32_t)(t - f->first_ns));
    w.t_ns = (int64_t)htole64((uint64_t)t);
    struct iovec iov[2] = {{&w, sizeof w}, {f->data, f->len}};
    struct msghdr m = {.msg_name = &pe->addr, .msg_namelen = sizeof pe->addr, .msg_iov = iov, .msg_iovlen = 2};
    if (sendmsg(udp_fd, &m, MSG_DONTWAIT) < 0) pe->send_errors++;
    else pe->frames_out++;
    remote_out[port]++;
}

/* Whether a direction transmits on a shared channel split over hosts: what touches it runs
 * the lookahead after the model's time, so frames relayed from other hosts take their turns. */
static int on_split(const direction_t *d) {
    return d->channel && split_channel[d->channel];
}

/* A split medium's frame, to the medium's owner as read from its device (MSG_RELAY), or back
 * to the device's host with its delivery time (MSG_DELIVER). */
static void send_relay(port_t *p, int type, const frame_t *f, int64_t t) {
    peer_t *pe = &peers[p->peer];
    wire_relay_t w;
    put_head(&w.h, type);
    w.id = htole32(p->id);
    w.seq = htole32(++p->seq_out);
    w.t_ns = (int64_t)htole64((uint64_t)t);
    struct iovec iov[2] = {{&w, sizeof w}, {(void *)f->data, f->len}};
    struct msghdr m = {.msg_name = &pe->addr, .msg_namelen = sizeof pe->addr, .msg_iov = iov, .msg_iovlen = 2};
    if (sendmsg(udp_fd, &m, MSG_DONTWAIT) < 0) pe->send_errors++;
    else pe->frames_out++;
}

/* A frame from another host got its delivery time: late if it came after it. */
static void note_arrival(const frame_t *f, int64_t deliver) {
    if (f->remote < 0 || deliver < 0) return;
    remote_t *rd = &remotes[f->remote];
    if (deliver < f->arrived_ns) {
        int64_t late = f->arrived_ns - deliver;
        rd->late++;
        rd->late_sum_ns += late;
        if (late > rd->late_max_ns) rd->late_max_ns = late;
    }
}

static void send_probe(peer_t *pe, int type, const wire_probe_t *asked) {
    wire_probe_t w;
    memset(&w, 0, sizeof w);
    put_head(&w.h, type);
    if (asked) { /* an answer: the prober's stamps back, with ours */
        w.mono[0] = asked->mono[0];
        w.real[0] = asked->real[0];
        w.mono[1] = asked->mono[1];
        w.real[1] = asked->real[1];
    }
    int i = asked ? 2 : 0;
    w.mono[i] = (int64_t)htole64((uint64_t)now_ns());
    w.real[i] = (int64_t)htole64((uint64_t)real_ns());
    if (sendto(udp_fd, &w, sizeof w, MSG_DONTWAIT, (struct sockaddr *)&pe->addr, sizeof pe->addr) < 0)
        pe->send_errors++;
    else if (!asked)
        pe->probes++;
}

/* An answer to one of our probes: the round trip less the peer's own time, and its clocks'
 * offsets (NTP's); the offset in use is that of the fastest probe of the window. */
static void on_reply(peer_t *pe, const wire_probe_t *w, int64_t t3, int64_t r3) {
    int64_t t[3], r[3];
    for (int i = 0; i < 3; i++) {
        t[i] = (int64_t)le64toh((uint64_t)w->mono[i]);
        r[i] = (int64_t)le64toh((uint64_t)w->real[i]);
    }
    if (t[0] < probes_since_ns) return; /* sent before the window was started afresh */
    int64_t rtt = (t3 - t[0]) - (t[2] - t[1]);
    if (rtt < 0) rtt = 0;
    int k = (int)(pe->replies++ % PROBE_WINDOW);
    pe->rtt[k] = rtt;
    pe->offset[k] = ((t[1] - t[0]) + (t[2] - t3)) / 2;
    pe->real_offset[k] = ((r[1] - r[0]) + (r[2] - r3)) / 2;
    int n = pe->replies < PROBE_WINDOW ? (int)pe->replies : PROBE_WINDOW, best = 0;
    for (int i = 1; i < n; i++)
        if (pe->rtt[i] < pe->rtt[best]) best = i;
    pe->offset_ns = pe->offset[best];
    pe->real_offset_ns = pe->real_offset[best];
    pe->rtt_min_ns = pe->rtt[best];
}

/* SIGUSR2: a new window, probed fast, of only probes sent from now on. */
static void reprobe_peers(int64_t now) {
    for (int i = 0; i < npeers; i++) {
        peers[i].replies = 0;
        peers[i].probes = 0;
    }
    probes_since_ns = now;
    next_probe_ns = now;
}

static void probe_peers(int64_t now) {
    if (!npeers || now < next_probe_ns) return;
    int filling = 0;
    for (int i = 0; i < npeers; i++) {
        send_probe(&peers[i], MSG_PROBE, NULL);
        if (peers[i].replies < PROBE_WINDOW) filling = 1;
    }
    next_probe_ns = now + (filling ? PROBE_FAST_NS : PROBE_SLOW_NS);
}

/* ---- switching ---------------------------------------------------------------------- */

/* The MAC table's slot of `mac`: its entry, or the free slot where it would go. */
static unsigned mac_entry(const unsigned char *mac) {
    unsigned i = mac_hash(mac, MAC_TABLE);
    while (macs[i].used && memcmp(macs[i].mac, mac, 6) != 0) i = (i + 1) % MAC_TABLE;
    return i;
}

static void learn(const unsigned char *mac, int port) {
    if ((mac[0] & 1) || port < 0) return; /* never learn a group address, nor another host's */
    unsigned i = mac_entry(mac);
    if (!macs[i].used) {
        if (nmacs >= MAC_TABLE / 2) return; /* full: flooded, as a switch whose table is */
        macs[i].used = 1;
        memcpy(macs[i].mac, mac, 6);
        nmacs++;
    }
    macs[i].port = port;
}

static int lookup(const unsigned char *mac) {
    if (mac[0] & 1) return -1;
    unsigned i = mac_entry(mac);
    return macs[i].used ? macs[i].port : -1;
}

/* Deliver a frame on port `out` at `t`: a proxy's goes back to its device's host now. */
static void deliver_at(frame_t *f, int out, int64_t t) {
    if (!ports[out].proxy) {
        heap_push(t, f, out, EV_DELIVER);
        return;
    }
    send_relay(&ports[out], MSG_DELIVER, f, t);
    frame_free(f);
}

static void to_downlink(frame_t *f, int out, int64_t t) {
    int64_t deliver = cross(&ports[out].down, f->first_ns, t, f->wire, f->segments);
    note_arrival(f, deliver);
    if (deliver < 0) {
        frame_free(f);
        return;
    }
    deliver_at(f, out, deliver);
}

static void at_switch(frame_t *f, int64_t t) {
    learn(f->data + VNET_HDR + 6, f->in_port);
    int out = lookup(f->data + VNET_HDR);
    if (lookahead_ns && !f->switched_later && (out >= 0 ? on_split(&ports[out].down) : any_split_down)) {
        /* Its downlink is a split channel's: take its turn once frames of other hosts that
         * reached the switch before it are here too. */
        f->switched_later = 1;
        if (now_ns() > t + lookahead_ns) split_late++;
        heap_push_at(t + lookahead_ns, t, f, -1, EV_SWITCH);
        return;
    }
    if (out >= 0) {
        if (out == f->in_port) frame_free(f);
        else to_downlink(f, out, t);
        return;
    }
    int first = 1;
    int64_t sent_on[MAX_CHANNELS + 1]; /* a shared downstream carries a flooded frame once */
    for (int c = 0; c <= MAX_CHANNELS; c++) sent_on[c] = -2;
    for (int p = 0; p < nports; p++) { /* flood */
        if (p == f->in_port || ports[p].relay) continue; /* a relayed device's owner floods to it */
        int c = ports[p].down.channel;
        if (c && sent_on[c] == -1) continue; /* lost or dropped there: for every port on it */
        frame_t *copy = f;
        if (!first) {
            copy = frame_new();
            memcpy(copy, f, offsetof(frame_t, data) + f->len);
        }
        first = 0;
        if (c && sent_on[c] >= 0) {
            deliver_at(copy, p, sent_on[c]);
            continue;
        }
        int64_t deliver = cross(&ports[p].down, f->first_ns, t, f->wire, f->segments);
        if (c) sent_on[c] = deliver < 0 ? -1 : deliver;
        if (deliver < 0) frame_free(copy);
        else deliver_at(copy, p, deliver);
    }
    if (first) frame_free(f);
}

static void log_delivery(const frame_t *f, int out, int64_t scheduled, int64_t actual) {
    fprintf(log_file, "%d,%d,%u,%" PRId64 ",%" PRId64 ",%" PRId64 "\n", f->in_port, out, f->len,
            f->arrived_ns, scheduled, actual);
}

static void to_switch(frame_t *f, int port, int64_t t) {
    direction_t *up = &ports[port].up;
    f->first_ns = t;
    if (up->rate_bps > 0 && f->segments > 1) /* its first segment, paced at the device's rate */
        f->first_ns -= (int64_t)((double)f->wire * (f->segments - 1) / f->segments * 8e9 / up->rate_bps);
    int r = remote_of(f->data + VNET_HDR);
    if (r >= 0) { /* for a device on another host: its forwarder takes it from here */
        send_remote(f, port, r, t);
        frame_free(f);
        return;
    }
    heap_push(t, f, port, EV_SWITCH);
}

/* A frame of port i through its uplink, sent by its device at `t`, on to the switch. */
static void uplink(frame_t *f, int i, int64_t t) {
    int64_t at = cross(&ports[i].up, t, t, f->wire, f->segments);
    if (at < 0) frame_free(f);
    else to_switch(f, i, at);
}

/* A frame port i's device sent at `t` (read from its TAP, or relayed from its host). */
static void ingress(frame_t *f, int i, int64_t t) {
    direction_t *up = &ports[i].up;
    int64_t later = on_split(up) ? lookahead_ns : 0;
    if (capped(up)) { /* its own pacing now, its turn on the channel at the time it is ready */
        int64_t ready = pace(up, t, f->wire, f->segments);
        if (ready < 0) frame_free(f);
        else heap_push_at(ready + later, ready, f, i, EV_CHANNEL);
        return;
    }
    if (later) heap_push_at(t + later, t, f, i, EV_INGRESS);
    else uplink(f, i, t);
}

static void run_event(event_t ev) {
    if (ev.kind == EV_SWITCH) {
        at_switch(ev.frame, ev.at_ns);
        return;
    }
    if (ev.kind == EV_CHANNEL) {
        if (channels[ports[ev.port].up.channel].prioritised) {
            wait_for_channel(ev.frame, ev.port, ev.at_ns);
            return;
        }
        to_switch(ev.frame, ev.port, on_channel(&ports[ev.port].up, ev.at_ns, ev.frame->wire, ev.frame->segments));
        return;
    }
    if (ev.kind == EV_SERVE) {
        channel_t *ch = &channels[ev.port];
        ch->serving = 0;
        frame_t *f = next_waiting(ch);
        if (!f) return;
        int i = f->in_port;
        to_switch(f, i, on_channel(&ports[i].up, ev.at_ns, f->wire, f->segments));
        for (int prio = 0; prio < PRIORITIES; prio++)
            if (ch->wait_head[prio]) {
                serve_later(ev.port, ev.at_ns);
                break;
            }
        return;
    }
    if (ev.kind == EV_INGRESS) {
        uplink(ev.frame, ev.port, ev.at_ns);
        return;
    }
    frame_t *f = ev.frame;
    port_t *p = &ports[ev.port];
    if (write(p->fd, f->data, f->len) < 0) p->write_errors++;
    int64_t actual = now_ns(), late = actual - ev.t_ns;
    int b = 0;
    while (b < 39 && late > ((int64_t)1 << b)) b++;
    late_hist[b]++;
    if (log_file) log_delivery(f, ev.port, ev.t_ns, actual);
    frame_free(f);
}

static void read_port(int i) {
    port_t *p = &ports[i];
    for (int k = 0; k < READ_BATCH; k++) {
        frame_t *f = frame_new();
        ssize_t n = read(p->fd, f->data, sizeof f->data);
        if (n < 0) {
            frame_free(f);
            if (errno == EAGAIN || errno == EINTR) return;
            die("read from TAP");
        }
        if (n < VNET_HDR + 14) {
            frame_free(f);
            continue;
        }
        f->in_port = i;
        f->remote = -1;
        f->switched_later = 0;
        f->len = (uint32_t)n;
        f->wire = wire_bytes(f->data, f->len, &f->segments);
        f->arrived_ns = now_ns();
        if (p->relay) { /* its links run on the medium's owner */
            send_relay(p, MSG_RELAY, f, f->arrived_ns);
            frame_free(f);
            continue;
        }
        ingress(f, i, f->arrived_ns);
    }
}

/* A sequence number from another host: a gap is counted lost, and a number that comes late
 * takes its gap back; 1 if it came out of order. */
static int count_sequence(uint32_t seq, uint32_t *next, uint64_t *lost) {
    if (seq >= *next) {
        *lost += seq - *next;
        *next = seq + 1;
        return 0;
    }
    if (*lost) (*lost)--;
    return 1;
}

/* The port a peer's relayed frame is for: a proxy of its device (MSG_RELAY, on the medium's
 * owner) or the relayed device itself (MSG_DELIVER); -1 if none. */
static int relay_port(int peer, uint32_t id, int proxy) {
    int i = id < id_ports_len ? id_ports[id] : -1;
    if (i < 0 || ports[i].peer != peer || !(proxy ? ports[i].proxy : ports[i].relay)) return -1;
    return i;
}

/* A split medium's frame from another host: on the owner, through its device's links as
 * if read at the stamped time; on the device's host, delivered at the stamped time. */
static void from_relay(frame_t *f, int peer, const wire_relay_t *w, int type, uint32_t len, int64_t now) {
    int i = len < VNET_HDR + 14 ? -1 : relay_port(peer, le32toh(w->id), type == MSG_RELAY);
    if (i < 0) {
        foreign_datagrams++;
        frame_free(f);
        return;
    }
    port_t *p = &ports[i];
    count_sequence(le32toh(w->seq), &p->next_seq, &p->relayed_lost);
    p->relayed_in++;
    peers[peer].frames_in++;
    int64_t t = (int64_t)le64toh((uint64_t)w->t_ns) - peers[peer].offset_ns;
    int64_t due = type == MSG_RELAY ? t + lookahead_ns : t;
    if (due < now) { /* after its turn: handled (or delivered) at once, counted late */
        p->relayed_late++;
        if (now - due > p->relayed_late_max_ns) p->relayed_late_max_ns = now - due;
    }
    f->in_port = i;
    f->remote = -1;
    f->switched_later = 0;
    f->len = len;
    f->wire = wire_bytes(f->data, len, &f->segments);
    f->arrived_ns = t;
    if (type == MSG_DELIVER) heap_push(t, f, i, EV_DELIVER); /* a time passed runs at once */
    else ingress(f, i, t);
}

static int peer_of(const struct sockaddr_in *from) {
    for (int i = 0; i < npeers; i++)
        if (peers[i].addr.sin_addr.s_addr == from->sin_addr.s_addr && peers[i].addr.sin_port == from->sin_port)
            return i;
    return -1;
}

/* A frame from another host's forwarder: through the downlink of the device it is for,
 * from when it reached the (other host's) switch, on this host's clock. */
static void from_peer(frame_t *f, int peer, const wire_frame_t *w, uint32_t len, int64_t now) {
    peer_t *pe = &peers[peer];
    int r = len < VNET_HDR + 14 ? -1 : remote_of(f->data + VNET_HDR + 6);
    if (r < 0 || remotes[r].peer != peer) {
        foreign_datagrams++;
        frame_free(f);
        return;
    }
    remote_t *rd = &remotes[r];
    rd->reordered += count_sequence(le32toh(w->seq), &rd->next_seq, &rd->lost);
    rd->frames++;
    pe->frames_in++;
    f->in_port = -1;
    f->remote = r;
    f->switched_later = 0;
    f->len = len;
    f->wire = wire_bytes(f->data, len, &f->segments);
    f->arrived_ns = now;
    int64_t t = (int64_t)le64toh((uint64_t)w->t_ns) - pe->offset_ns;
    f->first_ns = t - (int64_t)le32toh(w->first_before_ns);
    if (t <= now) at_switch(f, t); /* its time at the switch has passed: from then, at once */
    else heap_push(t, f, -1, EV_SWITCH);
}

static void read_udp(void) {
    for (int k = 0; k < READ_BATCH; k++) {
        frame_t *f = frame_new();
        wire_frame_t w;
        struct sockaddr_in from;
        struct iovec iov[2] = {{&w, sizeof w}, {f->data, sizeof f->data}};
        struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = iov, .msg_iovlen = 2};
        ssize_t n = recvmsg(udp_fd, &m, MSG_DONTWAIT);
        int64_t now = now_ns(), real = real_ns();
        if (n < 0) { /* nothing left, or an ICMP error of an earlier datagram: never fatal */
            frame_free(f);
            return;
        }
        int peer = peer_of(&from);
        if (n < (ssize_t)sizeof(wire_head_t) || peer < 0 || le32toh(w.h.magic) != WIRE_MAGIC ||
            le64toh(w.h.key) != wire_key) {
            foreign_datagrams++;
            frame_free(f);
            continue;
        }
        if (w.h.type == MSG_FRAME && n >= (ssize_t)sizeof w) {
            from_peer(f, peer, &w, (uint32_t)(n - sizeof w), now);
            continue;
        }
        if ((w.h.type == MSG_RELAY || w.h.type == MSG_DELIVER) && n >= (ssize_t)sizeof(wire_relay_t)) {
            wire_relay_t r; /* as long as wire_frame_t: read into the same buffer */
            memcpy(&r, &w, sizeof r);
            from_relay(f, peer, &r, w.h.type, (uint32_t)(n - sizeof r), now);
            continue;
        }
        if ((w.h.type == MSG_PROBE || w.h.type == MSG_REPLY) && n == (ssize_t)sizeof(wire_probe_t)) {
            wire_probe_t p; /* the datagram spans both buffers: put it back together */
            memcpy(&p, &w, sizeof w);
            memcpy((char *)&p + sizeof w, f->data, sizeof p - sizeof w);
            if (w.h.type == MSG_PROBE) {
                p.mono[1] = (int64_t)htole64((uint64_t)now);
                p.real[1] = (int64_t)htole64((uint64_t)real);
                send_probe(&peers[peer], MSG_REPLY, &p);
            } else {
                on_reply(&peers[peer], &p, now, real);
            }
        } else {
            foreign_datagrams++;
        }
        frame_free(f);
    }
}

/* ---- statistics ---------------------------------------------------------------------- */

static void write_direction(FILE *out, const char *name, const direction_t *d) {
    fprintf(out, "\"%s\": {\"rate_bps\": %.17g, \"delay_ns\": %" PRId64 ", \"jitter_ns\": %" PRId64
            ", \"loss\": %.17g, \"limit_B\": %" PRId64 ", \"frames\": %" PRIu64 ", \"wire_bytes\": %" PRIu64
            ", \"lost\": %" PRIu64 ", \"dropped\": %" PRIu64 ", \"host_latency_ns\": %" PRId64
            ", \"grant_ns\": %" PRId64 ", \"channel\": %d, \"channel_bps\": %.17g, \"priority\": %d}", name,
            d->rate_bps, d->delay_ns, d->jitter_ns, d->loss, d->limit_B, d->frames, d->bytes, d->lost,
            d->dropped, d->host_share_ns >= 0 ? d->host_share_ns : host_ns, d->grant_ns, d->channel,
            d->channel_bps, d->priority);
}

static void write_stats(void) {
    if (!stats_path) return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", stats_path);
    FILE *out = fopen(tmp, "w");
    if (!out) return;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(out, "{\"cpu_user_s\": %.6f, \"cpu_system_s\": %.6f, \"frames_peak\": %" PRIu64
            ", \"early_ns\": %" PRId64 ", \"realtime\": %s, \"host_latency_ns\": %" PRId64 ",\n \"late_ns_log2_histogram\": [",
            ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
            frames_peak, early_ns, realtime ? "true" : "false", host_ns);
    for (int b = 0; b < 40; b++) fprintf(out, "%s%" PRIu64, b ? ", " : "", late_hist[b]);
    fprintf(out, "],\n \"channels\": [");
    for (int c = 1; c <= MAX_CHANNELS; c++)
        fprintf(out, "%s{\"frames\": %" PRIu64 ", \"wire_bytes\": %" PRIu64 "}", c > 1 ? ", " : "",
                channels[c].frames, channels[c].bytes);
    fprintf(out, "],\n \"ports\": [");
    for (int i = 0; i < nports; i++) {
        fprintf(out, "%s\n  {\"name\": \"%s\", \"netns\": \"%s\", ", i ? "," : "", ports[i].name,
                ports[i].netns);
        write_direction(out, "up", &ports[i].up);
        fprintf(out, ", ");
        write_direction(out, "down", &ports[i].down);
        fprintf(out, ", \"write_errors\": %" PRIu64 ", \"remote_out\": %" PRIu64, ports[i].write_errors,
                remote_out[i]);
        if (ports[i].proxy || ports[i].relay)
            fprintf(out, ", \"%s\": {\"peer\": \"%s\", \"id\": %u, \"frames_in\": %" PRIu64 ", \"late\": %" PRIu64
                    ", \"late_max_ns\": %" PRId64 ", \"lost\": %" PRIu64 ", \"frames_out\": %u}",
                    ports[i].proxy ? "proxy" : "relay", ports[i].peer_name, ports[i].id, ports[i].relayed_in,
                    ports[i].relayed_late, ports[i].relayed_late_max_ns, ports[i].relayed_lost, ports[i].seq_out);
        fprintf(out, "}");
    }
    fprintf(out, "],\n \"udp_port\": %d, \"foreign_datagrams\": %" PRIu64 ", \"lookahead_ns\": %" PRId64
            ", \"split_late\": %" PRIu64 ",\n \"peers\": [", udp_port, foreign_datagrams, lookahead_ns, split_late);
    for (int i = 0; i < npeers; i++) {
        const peer_t *pe = &peers[i];
        int n = pe->replies < PROBE_WINDOW ? (int)pe->replies : PROBE_WINDOW;
        int64_t sorted[PROBE_WINDOW];
        memcpy(sorted, pe->rtt, sizeof sorted);
        for (int a = 1; a < n; a++) /* insertion sort of at most 32 */
            for (int b = a; b > 0 && sorted[b] < sorted[b - 1]; b--) {
                int64_t x = sorted[b];
                sorted[b] = sorted[b - 1];
                sorted[b - 1] = x;
            }
        fprintf(out, "%s\n  {\"address\": \"%s\", \"probes\": %" PRIu64 ", \"replies\": %" PRIu64
                ", \"rtt_min_ns\": %" PRId64 ", \"rtt_median_ns\": %" PRId64 ", \"rtt_max_ns\": %" PRId64
                ", \"offset_ns\": %" PRId64 ", \"clock_offset_ns\": %" PRId64 ", \"frames_out\": %" PRIu64
                ", \"frames_in\": %" PRIu64 ", \"send_errors\": %" PRIu64 "}", i ? "," : "", pe->name,
                pe->probes, pe->replies, pe->rtt_min_ns, n ? sorted[n / 2] : 0, n ? sorted[n - 1] : 0,
                pe->offset_ns, pe->real_offset_ns, pe->frames_out, pe->frames_in, pe->send_errors);
    }
    fprintf(out, "],\n \"remotes\": [");
    int first = 1;
    for (int i = 0; i < REMOTE_TABLE; i++) {
        const remote_t *rd = &remotes[i];
        if (!rd->used) continue;
        fprintf(out, "%s\n  {\"mac\": \"%02x:%02x:%02x:%02x:%02x:%02x\", \"peer\": %d, \"frames\": %" PRIu64
                ", \"late\": %" PRIu64 ", \"late_max_ns\": %" PRId64 ", \"late_sum_ns\": %" PRId64
                ", \"lost\": %" PRIu64 ", \"reordered\": %" PRIu64 "}", first ? "" : ",", rd->mac[0], rd->mac[1],
                rd->mac[2], rd->mac[3], rd->mac[4], rd->mac[5], rd->peer, rd->frames, rd->late, rd->late_max_ns,
                rd->late_sum_ns, rd->lost, rd->reordered);
        first = 0;
    }
    fprintf(out, "]}\n");
    fclose(out);
    rename(tmp, stats_path);
}

static void on_signal(int sig) {
    if (sig == SIGUSR1) stats_flag = 1;
    else if (sig == SIGUSR2) reprobe_flag = 1;
    else stop_flag = 1;
}

/* ---- set-up ---------------------------------------------------------------------------- */

static int parse_mac(const char *text, unsigned char mac[6]) {
    unsigned v[6];
    char end;
    if (sscanf(text, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &end) != 6) return 0;
    for (int i = 0; i < 6; i++) {
        if (v[i] > 255) return 0;
        mac[i] = (unsigned char)v[i];
    }
    return 1;
}

static void parse_direction(const char *text, direction_t *d, const char *spec) {
    double rate, loss, channel_bps = 0;
    long long delay, jitter, limit, grant = 0;
    int channel = 0, priority = 0;
    int got = sscanf(text, "%lf/%lld/%lld/%lf/%lld/%lld/%d/%lf/%d", &rate, &delay, &jitter, &loss, &limit, &grant,
                     &channel, &channel_bps, &priority);
    if ((got != 5 && got != 7 && got != 8 && got != 9) || rate < 0 || delay < 0 || jitter < 0 || loss < 0 ||
        loss > 1 || limit < 0 || grant < 0 || channel < 0 || channel > MAX_CHANNELS ||
        (got >= 8 && (channel == 0 || rate <= 0 || channel_bps < rate)) || priority < 0 || priority >= PRIORITIES) {
        fprintf(stderr, "shoal-linkemu: bad link %s in --port %s (want rate_bps/delay_ns/jitter_ns/"
                "loss/limit_B[/grant_ns/channel[/channel_bps[/priority]]], all >= 0, loss <= 1, channel <= %d, "
                "channel_bps >= rate_bps on a channel, priority 0-%d)\n", text, spec, MAX_CHANNELS,
                PRIORITIES - 1);
        exit(2);
    }
    memset(d, 0, sizeof *d);
    d->rate_bps = rate;
    d->delay_ns = delay;
    d->jitter_ns = jitter;
    d->loss = loss;
    d->limit_B = limit;
    d->host_share_ns = -1;
    d->grant_ns = grant;
    d->channel = channel;
    d->channel_bps = channel_bps > rate ? channel_bps : 0; /* equal: the channel's rate is its own */
    d->priority = priority;
    if (got == 9) { /* a service flow with a priority: paced at its rate, its channel prioritised */
        d->channel_bps = channel_bps;
        channels[channel].prioritised = 1;
    }
}

static void parse_port(char *spec) {
    if (nports == MAX_PORTS) usage("too many ports");
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", spec);
    char *fields[5];
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && n < 5; tok = strtok_r(NULL, ",", &save))
        fields[n++] = tok;
    if (n != 4 && n != 5) usage("--port wants NETNS,IFNAME,UP,DOWN[,MAC]");
    port_t *p = &ports[nports++];
    p->peer = -1;
    p->next_seq = 1;
    snprintf(p->netns, sizeof p->netns, "%s", fields[0]);
    if (strlen(fields[1]) >= IFNAMSIZ || !fields[1][0]) usage("interface name too long or empty");
    snprintf(p->name, sizeof p->name, "%s", fields[1]);
    parse_direction(fields[2], &p->up, spec);
    parse_direction(fields[3], &p->down, spec);
    if (n == 5) {
        unsigned char mac[6];
        if (!parse_mac(fields[4], mac)) usage("bad MAC in --port (want aa:bb:cc:dd:ee:ff)");
        learn(mac, nports - 1);
    }
}

/* --proxy ADDR:PORT,ID,UP,DOWN,MAC: a device of a split shared medium behind another host's
 * forwarder, whose links this one runs (its peer is found once every --peer is read). */
static void parse_proxy(const char *spec) {
    if (nports == MAX_PORTS) usage("too many ports");
    char copy[1024], *fields[5], *save = NULL;
    snprintf(copy, sizeof copy, "%s", spec);
    int n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && n < 5; tok = strtok_r(NULL, ",", &save)) fields[n++] = tok;
    unsigned char mac[6];
    char *end;
    unsigned long id = n == 5 ? strtoul(fields[1], &end, 10) : 0;
    if (n != 5 || *end || !parse_mac(fields[4], mac)) usage("--proxy wants ADDR:PORT,ID,UP,DOWN,MAC");
    port_t *p = &ports[nports++];
    p->fd = -1;
    p->proxy = 1;
    p->peer = -1;
    p->id = (uint32_t)id;
    p->next_seq = 1;
    snprintf(p->peer_name, sizeof p->peer_name, "%s", fields[0]);
    snprintf(p->name, sizeof p->name, "proxy%lu", id);
    snprintf(p->netns, sizeof p->netns, "%s", fields[0]);
    parse_direction(fields[2], &p->up, spec);
    parse_direction(fields[3], &p->down, spec);
    learn(mac, nports - 1);
}

/* --relay N,ID,ADDR:PORT: port N's device is on a split shared medium whose links the forwarder
 * at ADDR:PORT runs, where it is ID. */
static struct { int port; uint32_t id; char peer[64]; } relays[MAX_PORTS];
static int nrelays;

static void parse_relay(const char *spec) {
    char *end;
    long port = strtol(spec, &end, 10);
    unsigned long id = *end == ',' ? strtoul(end + 1, &end, 10) : 0;
    if (port < 0 || *end != ',' || !end[1] || nrelays == MAX_PORTS) usage("--relay wants N,ID,ADDR:PORT");
    relays[nrelays].port = (int)port;
    relays[nrelays].id = (uint32_t)id;
    snprintf(relays[nrelays++].peer, sizeof relays[0].peer, "%s", end + 1);
}

static int peer_named(const char *name) {
    for (int i = 0; i < npeers; i++)
        if (!strcmp(peers[i].name, name)) return i;
    return -1;
}

/* Once every argument is read: the proxies' and relays' peers, and the split channels. */
static void resolve_split(void) {
    for (int i = 0; i < nports; i++) {
        port_t *p = &ports[i];
        if (!p->proxy) continue;
        if ((p->peer = peer_named(p->peer_name)) < 0) usage("--proxy names no --peer");
        split_channel[p->up.channel] = split_channel[p->down.channel] = 1;
        if (p->down.channel) any_split_down = 1;
    }
    split_channel[0] = 0;
    for (int k = 0; k < nrelays; k++) {
        int i = relays[k].port;
        if (i >= nports || ports[i].proxy) usage("--relay names no --port");
        if ((ports[i].peer = peer_named(relays[k].peer)) < 0) usage("--relay names no --peer");
        ports[i].relay = 1;
        ports[i].id = relays[k].id;
        snprintf(ports[i].peer_name, sizeof ports[i].peer_name, "%s", relays[k].peer);
    }
    int split = 0;
    for (int c = 1; c <= MAX_CHANNELS; c++) split |= split_channel[c];
    if (split && lookahead_ns <= 0) usage("--proxy needs --lookahead NS");
    for (int i = 0; i < nports; i++)
        if ((ports[i].proxy || ports[i].relay) && ports[i].id >= id_ports_len) id_ports_len = ports[i].id + 1;
    if (id_ports_len && !(id_ports = malloc(id_ports_len * sizeof *id_ports))) die("out of memory");
    for (uint32_t k = 0; k < id_ports_len; k++) id_ports[k] = -1;
    for (int i = 0; i < nports; i++) {
        if (!ports[i].proxy && !ports[i].relay) continue;
        if (id_ports[ports[i].id] >= 0) usage("--proxy and --relay name an id twice");
        id_ports[ports[i].id] = i;
    }
}

/* --peer ADDR:PORT,MAC,MAC,...: another host's forwarder and the devices behind it. */
static void parse_peer(const char *spec) {
    if (npeers == MAX_PEERS) usage("too many --peer");
    char *copy = strdup(spec), *save = NULL;
    if (!copy) die("out of memory");
    char *where = strtok_r(copy, ",", &save);
    char *colon = where ? strrchr(where, ':') : NULL;
    peer_t *pe = &peers[npeers];
    if (!colon) usage("--peer wants ADDR:PORT,MAC,...");
    *colon = 0;
    long port = strtol(colon + 1, NULL, 10);
    pe->addr.sin_family = AF_INET;
    pe->addr.sin_port = htons((uint16_t)port);
    if (port <= 0 || port > 65535 || inet_pton(AF_INET, where, &pe->addr.sin_addr) != 1)
        usage("--peer wants an IPv4 ADDR:PORT first");
    snprintf(pe->name, sizeof pe->name, "%s:%ld", where, port);
    for (char *tok = strtok_r(NULL, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned char mac[6];
        if (!parse_mac(tok, mac)) usage("bad MAC in --peer (want aa:bb:cc:dd:ee:ff)");
        add_remote(mac, npeers);
    }
    npeers++;
    free(copy);
}

/* Buffers and fragmentation of the socket to the other hosts' forwarders. */
static void tune_udp(void) {
    int size = 8 << 20; /* bursts of a whole TCP window from several devices */
    if (setsockopt(udp_fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
        setsockopt(udp_fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    if (setsockopt(udp_fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
        setsockopt(udp_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    /* A frame and its header pass an underlay MTU of 1500: the kernel fragments it. */
    int pmtu = IP_PMTUDISC_DONT;
    setsockopt(udp_fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
}

static void note_udp_port(void) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    if (getsockname(udp_fd, (struct sockaddr *)&a, &len) != 0 || a.sin_family != AF_INET) {
        fprintf(stderr, "shoal-linkemu: --udp-fd %d is no bound IPv4 UDP socket\n", udp_fd);
        exit(2);
    }
    udp_port = ntohs(a.sin_port);
}

/* The forwarder's socket to the other hosts', in the host's own network namespace. */
static void open_udp(int port) {
    udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (udp_fd < 0) die("socket");
    tune_udp();
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = {htonl(INADDR_ANY)}};
    if (bind(udp_fd, (struct sockaddr *)&a, sizeof a) < 0) {
        fprintf(stderr, "shoal-linkemu: cannot bind UDP port %d for the links to other hosts: %s\n", port,
                strerror(errno));
        exit(2);
    }
    note_udp_port();
}

/* The same socket handed over, bound in the host's namespace by whoever started this one. */
static void adopt_udp(int fd) {
    udp_fd = fd;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        fprintf(stderr, "shoal-linkemu: --udp-fd %d is not open: %s\n", fd, strerror(errno));
        exit(2);
    }
    tune_udp();
    note_udp_port();
}

static void enter_netns(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        fprintf(stderr, "shoal-linkemu: cannot enter network namespace %s: %s\n", path, strerror(errno));
        exit(2);
    }
    close(fd);
}

/* Create port p's TAP inside its namespace; the descriptor keeps working from anywhere. */
static void open_tap(port_t *p) {
    enter_netns(p->netns);
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) die("open /dev/net/tun (is the tun module loaded?)");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    memcpy(ifr.ifr_name, p->name, strlen(p->name));
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        fprintf(stderr, "shoal-linkemu: cannot create TAP %s in %s: %s\n", p->name, p->netns, strerror(errno));
        exit(2);
    }
    /* Let the device's stack hand over (and take) whole TCP super-frames with
     * partial checksums, as to a virtio NIC: one read per 64 KiB instead of per
     * frame. Their line time is still that of every segment. */
    int hdr = VNET_HDR;
    if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) < 0) die("TUNSETVNETHDRSZ");
    if (ioctl(fd, TUNSETOFFLOAD, no_tso ? TUN_F_CSUM : TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) < 0)
        die("TUNSETOFFLOAD");
    p->fd = fd;
}

int main(int argc, char **argv) {
    const char *switch_ns = NULL, *log_path = NULL;
    int given_udp_fd = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc) parse_port(argv[++i]);
        else if (!strcmp(argv[i], "--switch") && i + 1 < argc) switch_ns = argv[++i];
        else if (!strcmp(argv[i], "--stats") && i + 1 < argc) stats_path = argv[++i];
        else if (!strcmp(argv[i], "--log") && i + 1 < argc) log_path = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rng_state = strtoull(argv[++i], NULL, 0) | 1;
        else if (!strcmp(argv[i], "--udp") && i + 1 < argc) udp_port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--udp-fd") && i + 1 < argc) given_udp_fd = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--peer") && i + 1 < argc) parse_peer(argv[++i]);
        else if (!strcmp(argv[i], "--key") && i + 1 < argc) wire_key = strtoull(argv[++i], NULL, 16);
        else if (!strcmp(argv[i], "--no-tso")) no_tso = 1;
        else if (!strcmp(argv[i], "--proxy") && i + 1 < argc) parse_proxy(argv[++i]);
        else if (!strcmp(argv[i], "--relay") && i + 1 < argc) parse_relay(argv[++i]);
        else if (!strcmp(argv[i], "--lookahead") && i + 1 < argc) lookahead_ns = strtoll(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "shoal-linkemu: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (nports < 1) usage("give at least one --port NETNS,IFNAME,UP,DOWN[,MAC]");
    if (npeers && udp_port <= 0 && given_udp_fd < 0) usage("--peer needs --udp PORT or --udp-fd FD");
    resolve_split();
    struct rlimit files; /* a TAP descriptor per port: more than the usual soft limit of 1024 */
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
    int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (own < 0) die("open own network namespace");
    for (int i = 0; i < nports; i++)
        if (!ports[i].proxy) open_tap(&ports[i]);
    if (setns(own, CLONE_NEWNET) != 0) die("return to own network namespace");
    if (given_udp_fd >= 0) adopt_udp(given_udp_fd);
    else if (udp_port > 0) open_udp(udp_port);
    if (switch_ns) enter_netns(switch_ns);
    close(own);
    if (log_path && !(log_file = fopen(log_path, "w"))) die("open --log file");
    if (log_file) fprintf(log_file, "in_port,out_port,len,arrived_ns,scheduled_ns,delivered_ns\n");

    prctl(PR_SET_TIMERSLACK, 1UL); /* hrtimer wake-ups without the default 50 us slack */
    /* The switch is hardware to the devices: where allowed, it runs before any
     * device's (or other) ordinary process, so a busy host delays frames less.
     * Its spins last at most early_ns, so it never holds a CPU for long. */
    struct sched_param sp = {.sched_priority = 1};
    realtime = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    for (int i = 0; i < nports; i++) {
        if (ports[i].proxy) continue;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, ports[i].fd, &ev) < 0) die("epoll_ctl");
    }
    if (udp_fd >= 0) {
        struct epoll_event uev = {.events = EPOLLIN, .data.u32 = (uint32_t)MAX_PORTS + 2};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, udp_fd, &uev) < 0) die("epoll_ctl");
    }
    printf("ready\n");
    fflush(stdout);

    /* A timerfd (no timer slack) wakes the loop shortly before the next event;
     * the rest is spun, since hrtimer wake-ups are late by several microseconds. */
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (tfd < 0) die("timerfd_create");
    struct epoll_event tev = {.events = EPOLLIN, .data.u32 = (uint32_t)MAX_PORTS};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev) < 0) die("epoll_ctl");
    int64_t armed = -1;
    struct epoll_event cev = {.events = EPOLLIN, .data.u32 = (uint32_t)MAX_PORTS + 1};
    epoll_ctl(ep, EPOLL_CTL_ADD, 0, &cev); /* fails harmlessly when stdin is not a pipe */
    char line[256];
    size_t line_len = 0;
    struct epoll_event events[MAX_PORTS + 3];
    while (!stop_flag) {
        if (stats_flag) {
            stats_flag = 0;
            write_stats();
        }
        int64_t now = now_ns();
        if (reprobe_flag) {
            reprobe_flag = 0;
            reprobe_peers(now);
        }
        while (heap_len && heap[0].t_ns <= now) {
            run_event(heap_pop());
            now = now_ns();
        }
        probe_peers(now);
        int timeout = -1;
        if (npeers) /* until the next probe, in whole milliseconds */
            timeout = (int)((next_probe_ns - now + 999999) / 1000000);
        if (heap_len) {
            int64_t target = heap[0].t_ns - early_ns;
            if (target <= now) {
                timeout = 0; /* spin */
            } else if (target != armed) {
                struct itimerspec its = {{0, 0}, {target / 1000000000, target % 1000000000}};
                if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) die("timerfd_settime");
                armed = target;
            }
        }
        int n = epoll_wait(ep, events, MAX_PORTS + 3, timeout);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int k = 0; k < n; k++) {
            uint32_t which = events[k].data.u32;
            if (which == MAX_PORTS + 1) {
                ssize_t got = read(0, line + line_len, sizeof line - 1 - line_len);
                if (got <= 0) {
                    if (got < 0 && errno == EINTR) continue;
                    epoll_ctl(ep, EPOLL_CTL_DEL, 0, NULL); /* the owner closed it */
                    continue;
                }
                line_len += (size_t)got;
                line[line_len] = 0;
                char *nl;
                while ((nl = strchr(line, '\n'))) {
                    *nl = 0;
                    long long v;
                    int idx;
                    if (sscanf(line, "host_latency_ns %lld", &v) == 1 && v >= 0) host_ns = v;
                    if (sscanf(line, "port_host_latency_ns %d %lld", &idx, &v) == 2 && v >= 0 &&
                        idx >= 0 && idx < nports)
                        ports[idx].up.host_share_ns = ports[idx].down.host_share_ns = v;
                    memmove(line, nl + 1, strlen(nl + 1) + 1);
                    line_len = strlen(line);
                }
                if (line_len == sizeof line - 1) line_len = 0;
                continue;
            }
            if (which == MAX_PORTS + 2) {
                read_udp();
                continue;
            }
            if (which != MAX_PORTS) {
                read_port((int)which);
                continue;
            }
            uint64_t expirations;
            if (read(tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN) die("read timerfd");
            /* Adapt how early to wake from how late this wake was; ignore wakes
             * delayed by the host scheduler, which no margin can absorb. */
            int64_t over = now_ns() - armed;
            if (over >= 0 && over < 100000) {
                early_ns += (over + 2000 - early_ns) / 8;
                if (early_ns < 2000) early_ns = 2000;
                if (early_ns > 50000) early_ns = 50000;
            }
            armed = -1;
        }
    }
    write_stats();
    if (log_file) fclose(log_file);
    return 0;
}
